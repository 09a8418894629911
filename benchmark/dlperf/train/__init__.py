"""`dlperf train`: ResNet v1.5 trained data-parallel, one driver over two engines (MXNet Gluon
with Horovod, PyTorch DDP)."""
