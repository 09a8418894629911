"""The MXNet engine (Gluon + Horovod): the seed's framework."""

from dlperf.cuda_libs import install_import_hook

# The wheel's dlperf-cuda-libs.pth has done this where dlperf was installed from it; not where it
# runs from a checkout or an editable install.
install_import_hook()

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

# The GPU code in each GPU build of MXNet's libmxnet.so, read from its fatbin (a package test
# reads it again): machine code for these architectures and no PTX, so nothing the driver could
# compile for a later GPU. mxnet-cu112 1.9.1 runs on Maxwell to Ampere and Ada (8.9 runs sm_86
# code), not on Hopper (9.0) or later.
GPU_ARCHS = {"mxnet-cu112": ("sm_50", "sm_60", "sm_70", "sm_80", "sm_86")}

# cudaDeviceAttr values of the CUDA runtime API
_COMPUTE_CAPABILITY_MAJOR, _COMPUTE_CAPABILITY_MINOR = 75, 76


def cuda_capabilities(runtime: str = "libcudart.so.11.0") -> list[tuple[int, int]]:
    """The compute capability of each GPU, in the CUDA runtime's order (MXNet's gpu(i)), asked
    through the runtime MXNet loaded; [] where it is absent or finds no GPU."""
    import ctypes

    try:
        rt = ctypes.CDLL(runtime)
    except OSError:
        return []
    count = ctypes.c_int()
    if rt.cudaGetDeviceCount(ctypes.byref(count)) != 0:
        return []
    found = []
    for index in range(count.value):
        major, minor = ctypes.c_int(), ctypes.c_int()
        rt.cudaDeviceGetAttribute(ctypes.byref(major), _COMPUTE_CAPABILITY_MAJOR, index)
        rt.cudaDeviceGetAttribute(ctypes.byref(minor), _COMPUTE_CAPABILITY_MINOR, index)
        found.append((major.value, minor.value))
    return found


def installed_dist() -> str:
    """Which MXNet distribution is installed: mxnet (CPU) or a GPU build."""
    from importlib import metadata

    # both write mxnet/: where MXNet sees a GPU, the GPU build's library is the one in place
    for dist in (*GPU_ARCHS, "mxnet"):
        try:
            metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
        return dist
    return "mxnet"


def no_gpu_code(dist: str, capability: tuple[int, int]) -> str | None:
    """Why `dist` (an installed MXNet distribution) cannot run on a GPU of `capability`, or
    None where it can or its GPU code is not known."""
    from dlperf_module_utils.dlperf_gpu import cuda_build_runs

    archs = GPU_ARCHS.get(dist)
    if archs is None or cuda_build_runs(capability, list(archs)):
        return None
    return (
        f"{dist} 1.9.1 has GPU code for {' '.join(archs)} only (no PTX), none of which a GPU of "
        f"compute capability {capability[0]}.{capability[1]} runs; use --backend pytorch there"
    )


def device_context(device: str, local_rank: int):
    """The MXNet context of a rank for --device DEVICE (gpu, cpu, auto): the GPU of its local
    rank among those it sees (all of the node's, or the one a batch system bound it to) where
    MXNet sees GPUs, else the CPU. A GPU the installed build has no code for raises UsageError
    before anything runs there."""
    import mxnet as mx

    from dlperf.usage import UsageError

    gpus = mx.context.num_gpus()
    if device == "gpu" and gpus == 0:
        raise UsageError(
            "--device gpu: MXNet sees no GPU here (a CPU build of mxnet, or no NVIDIA "
            "driver); use --device auto or cpu"
        )
    if not (device == "gpu" or (device == "auto" and gpus > 0)):
        return mx.cpu()
    index = local_rank % gpus
    capabilities = cuda_capabilities()
    if index < len(capabilities):
        refusal = no_gpu_code(installed_dist(), capabilities[index])
        if refusal:
            raise UsageError(f"--backend mxnet: {refusal}")
    return mx.gpu(index)
