"""The MXNet engine (Gluon + Horovod): the seed's framework."""

# What MXNet 1.9.1 cannot do on a device, refused before anything runs (by `dlperf train` when
# --device names the device, by the engine when it finds it). This module imports no MXNet.
FLOAT16_ON_CPU = (
    "--dtype float16: MXNet has no float16 kernels on CPU; use bfloat16 (oneDNN) or float32 there"
)
BFLOAT16_ON_GPU = (
    "--dtype bfloat16: MXNet computes bfloat16 on CPU (oneDNN) only; use float16 on GPUs"
)
NHWC_ON_CPU = (
    "--layout NHWC: MXNet convolves NHWC only through cuDNN, on GPUs; use NCHW (the default) on "
    "CPUs"
)
