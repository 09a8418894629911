"""Training engine: ResNet v1.5 on MXNet Gluon, data-parallel with Horovod."""
