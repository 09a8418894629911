"""Let a GPU build of MXNet find CUDA 11's libraries where NVIDIA's Python wheels put them.

`libmxnet.so` of `mxnet-cu112` 1.9.1 names CUDA 11's runtime, cuBLAS, cuFFT, cuRAND,
cuSOLVER, NVRTC, NVTX, cuDNN 8 and NCCL as NEEDED entries without carrying them. NVIDIA's
`nvidia-*-cu11` wheels (pinned in dlperf's `gpu` and `nccl` extras; PyTorch's CUDA wheels put a
newer NCCL in the same place) install them under `site-packages/nvidia/<part>/lib/`, where the
dynamic loader does not look. Loaded by path and
globally before `libmxnet.so`, each satisfies the NEEDED entry of its soname: the loader reuses a
library already loaded under that name. Only the driver's `libcuda.so.1` still comes from the
system, as it must.

The wheel's `dlperf-cuda-libs.pth` installs the import hook at interpreter start-up, so every
Python of a venv with dlperf (a rank, horovodrun's checks, Horovod's build, a user's shell)
imports MXNet alike. The hook costs nothing until `mxnet` is imported, and loads nothing unless
a GPU build of MXNet is installed (the `cpu` flavor's MXNet needs none of it, even where
PyTorch's CUDA wheels have put an NCCL there). This module imports only `sys` and `os` at
start-up.
"""

from __future__ import annotations

import os
import sys

# (directory under site-packages/nvidia, soname), in an order in which each library's own
# NEEDED entries are loaded before it (cuSOLVER needs cuBLAS, cuBLAS needs cuBLASLt). The exact
# CUDA 11 sonames: a venv that also holds PyTorch's CUDA 12 wheels has most of their libraries
# in the same directories under other names, but not all (CUDA11_WHEELS).
CUDA11_LIBRARIES: tuple[tuple[str, str], ...] = (
    ("cuda_runtime", "libcudart.so.11.0"),
    ("cublas", "libcublasLt.so.11"),
    ("cublas", "libcublas.so.11"),
    ("cufft", "libcufft.so.10"),
    ("curand", "libcurand.so.10"),
    ("cusolver", "libcusolver.so.11"),
    ("cuda_nvrtc", "libnvrtc.so.11.2"),
    ("nvtx", "libnvToolsExt.so.1"),
    ("cudnn", "libcudnn.so.8"),
    ("nccl", "libnccl.so.2"),
)

# The wheel that installs each part's CUDA 11 library (dlperf's gpu extra). CUDA 12's wheels of
# cuRAND, cuSOLVER and NVTX, which a torch built for CUDA 12 brings (a V100 node's, beside the
# MXNet that Horovod needs), keep CUDA 11's sonames in the same directories: the wheel installed
# last owns the file, and uninstalling it removes the file. Each is checked against the size
# its CUDA 11 wheel recorded: a file removed stops `import mxnet` naming it; one written over is
# loaded all the same (CUDA 12's libraries keep those sonames' interfaces, and the R580 driver
# runs them), with a warning naming it. NCCL is left out: a newer NCCL serves MXNet too, and
# PyTorch's wheels put theirs there on purpose.
CUDA11_WHEELS: dict[str, str] = {
    "cuda_runtime": "nvidia-cuda-runtime-cu11",
    "cublas": "nvidia-cublas-cu11",
    "cufft": "nvidia-cufft-cu11",
    "curand": "nvidia-curand-cu11",
    "cusolver": "nvidia-cusolver-cu11",
    "cuda_nvrtc": "nvidia-cuda-nvrtc-cu11",
    "nvtx": "nvidia-nvtx-cu11",
    "cudnn": "nvidia-cudnn-cu11",
}

# The distributions whose libmxnet.so needs them (dlperf.train.mxnet.GPU_ARCHS has their code).
MXNET_GPU_BUILDS = ("mxnet-cu112",)

_loaded: dict[str, str] = {}


def library_paths(
    libraries: tuple[tuple[str, str], ...] = CUDA11_LIBRARIES, search: list[str] | None = None
) -> list[str]:
    """The path of each library that a `nvidia/<part>/lib/` directory on `search` (default:
    sys.path) holds, in the order of `libraries`; the first directory that has it wins. The
    working directory never counts (sys.path holds it as "" under -c, by its path under -m)."""
    here = os.getcwd()
    found = []
    for part, soname in libraries:
        for entry in sys.path if search is None else search:
            if not os.path.isabs(entry) or os.path.normpath(entry) == here:
                continue
            path = os.path.join(entry, "nvidia", part, "lib", soname)
            if os.path.isfile(path):
                found.append(path)
                break
    return found


def preload(
    libraries: tuple[tuple[str, str], ...] = CUDA11_LIBRARIES, search: list[str] | None = None
) -> dict[str, str]:
    """Load every library found, globally; returns {soname: path} of all loaded so far.

    A library that is there but does not load raises ImportError naming it and the loader's
    reason (a damaged wheel, or one for another CUDA major)."""
    import ctypes

    for path in library_paths(libraries, search):
        soname = os.path.basename(path)
        if soname in _loaded:
            continue
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as err:
            raise ImportError(f"dlperf: cannot load {path} for MXNet: {err}") from err
        _loaded[soname] = path
    return dict(_loaded)


def replaced(
    libraries: tuple[tuple[str, str], ...], site: str, wheels: dict[str, str]
) -> list[tuple[str, int | None, str, int]]:
    """The libraries under SITE that are not the files their wheel (WHEELS, by part) installed
    there, by the size its RECORD gives: another wheel wrote over them, or removed them. Each
    as (path, its size now or None where it is gone, the wheel, the size it installed)."""
    from importlib import metadata

    found = []
    for part, soname in libraries:
        for dist in metadata.distributions(name=wheels.get(part, "-"), path=[site]):
            for file in dist.files or []:
                if file.as_posix().endswith(f"nvidia/{part}/lib/{soname}") and file.size:
                    path = str(file.locate())
                    size = os.path.getsize(path) if os.path.isfile(path) else None
                    if size != file.size:
                        found.append((path, size, dist.name, file.size))
            break
    return found


def _named(clashes: list[tuple[str, int | None, str, int]]) -> str:
    return "; ".join(
        f"{path} ({'gone' if size is None else f'{size} bytes'}; {wheel} installed {recorded})"
        for path, size, wheel, recorded in clashes
    )


def _site_of(dists: tuple[str, ...]) -> str | None:
    """The directory the first installed distribution of `dists` was installed into (where its
    nvidia-* wheels went too), or None."""
    from importlib import metadata

    for dist in dists:
        try:
            return str(metadata.distribution(dist).locate_file(""))
        except metadata.PackageNotFoundError:
            continue
    return None


class _PreloadBeforeImport:
    """A meta path finder that finds nothing: the first time `name` is imported it loads the
    libraries — from the site directory of whichever of `dists` is installed, or from sys.path
    where `dists` is empty, and not at all where none is — and from then on does nothing. It
    stays on sys.meta_path: removing itself while the import system walks that list would make
    the walk skip the finder after it."""

    def __init__(self, name: str, libraries, dists: tuple[str, ...], wheels: dict[str, str]):
        self.name, self.libraries, self.dists, self.wheels = name, libraries, dists, wheels
        self.done = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname == self.name and not self.done:
            self.done = True
            _load_for(self.libraries, self.dists, self.wheels)
        return None


def _load_for(libraries, dists: tuple[str, ...], wheels: dict[str, str]) -> None:
    if not dists:
        preload(libraries)
    elif (site := _site_of(dists)) is not None:
        clashes = replaced(libraries, site, wheels)
        why = (
            "a torch built for CUDA 12 brings nvidia-*-cu12 wheels that keep CUDA 11's file "
            "names for cuRAND, cuSOLVER and NVTX"
        )
        if gone := [c for c in clashes if c[1] is None]:
            raise ImportError(
                f"dlperf: {dists[0]} needs CUDA 11 libraries that another wheel removed: "
                f"{_named(gone)} ({why}, and uninstalling one removes the file). Reinstall "
                "the CUDA 11 wheel named (pip install --force-reinstall --no-deps)"
            )
        if clashes:
            import warnings

            warnings.warn(
                f"dlperf: {dists[0]} loads CUDA 12's libraries in place of CUDA 11's: "
                f"{_named(clashes)} ({why}); if MXNet fails in them, reinstall the CUDA 11 "
                "wheels named (pip install --force-reinstall --no-deps), which torch then shares",
                RuntimeWarning,
                stacklevel=2,
            )
        preload(libraries, search=[site])


def install_import_hook(
    name: str = "mxnet",
    libraries: tuple[tuple[str, str], ...] = CUDA11_LIBRARIES,
    dists: tuple[str, ...] = MXNET_GPU_BUILDS,
    wheels: dict[str, str] | None = None,
) -> None:
    """Load the libraries the first time `name` is imported (at once if it already was), where
    one of `dists` is installed (() for always), each checked against the wheel that installed
    it (WHEELS by part, default CUDA11_WHEELS)."""
    wheels = CUDA11_WHEELS if wheels is None else wheels
    if name in sys.modules:
        _load_for(libraries, dists, wheels)
        return
    if not any(isinstance(f, _PreloadBeforeImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _PreloadBeforeImport(name, libraries, dists, wheels))
