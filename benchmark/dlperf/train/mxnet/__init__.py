"""The MXNet engine (Gluon + Horovod): the seed's framework."""
