"""The one result schema (result.json), written atomically, with provenance."""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2
# Versions that still load: version 1 predates the backend seam (every run was MXNet).
READABLE_VERSIONS = (1, 2)


@dataclass
class Result:
    status: str  # "ok" | "failed"
    mode: str  # "throughput" | "tta"
    world_size: int
    nodes: int
    backend: str | None = None  # "mxnet" | "pytorch"
    precision: str | None = None  # e.g. "bfloat16-amp", "float16-amp", "float32"
    device: str | None = None  # "gpu" | "cpu"
    throughput_img_per_s: float | None = None
    throughput_img_per_s_per_worker: float | None = None
    throughput_median_img_per_s: float | None = None  # median of the timed windows
    throughput_windows_img_per_s: list[float] = field(default_factory=list)
    throughput_per_rank_img_per_s: list[float] = field(default_factory=list)
    time_to_accuracy_s: float | None = None
    epochs: int | None = None
    top1: float | None = None
    target_top1: float | None = None
    reached_target: bool | None = None
    wall_time_s: float | None = None
    init_time_s: float | None = None  # setup before the clock: data, model, process group
    first_step_s: float | None = None  # graph capture/compile, kernel autotuning: never timed
    loss_scaling: dict[str, Any] | None = None  # AMP's scaler: last scale, steps skipped
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    param_fingerprints: list[list[float]] = field(default_factory=list)
    error: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write a file so that readers see the old one or the whole new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 would hide results from other users
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic(path: Path, payload: dict) -> None:
    """Write JSON atomically (write_bytes_atomic)."""
    write_bytes_atomic(path, (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode())


def write_result(path: Path, result: Result) -> None:
    write_atomic(path, asdict(result))


def upgrade(data: dict, source: str | Path = "result") -> dict:
    """A result dict of any readable version, in the current version's shape."""
    version = data.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise ValueError(
            f"{source}: schema_version {version!r}, expected one of "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )
    if version == 1:
        dtype = data.get("hyperparameters", {}).get("dtype")
        data = {
            **data,
            "backend": data.get("hyperparameters", {}).get("backend", "mxnet"),
            "precision": dtype if dtype not in (None, "auto") else None,
            "device": None,
            "init_time_s": None,
            "first_step_s": None,
            "throughput_median_img_per_s": None,
            "throughput_windows_img_per_s": [],
            "throughput_per_rank_img_per_s": [],
            "schema_version": SCHEMA_VERSION,
        }
    return data


def read_result(path: Path) -> dict:
    return upgrade(json.loads(path.read_text()), path)


def put_in_place(root: Path, nodes: int, partial: Path, final: Path) -> None:
    """PARTIAL renamed to FINAL; an earlier (failed) record is removed only once the new one is
    in place (a slow removal on NFS, cut by an interrupt, never holds the new point back)."""
    aside = root / f".{nodes}nodes.replaced"
    shutil.rmtree(aside, ignore_errors=True)
    if final.exists():
        os.replace(final, aside)
    os.replace(partial, final)
    shutil.rmtree(aside, ignore_errors=True)


def is_complete(point: Path) -> bool:
    """Whether a point's result.json records a run that finished (rank 0 writes it last)."""
    try:
        return json.loads((point / "result.json").read_text()).get("status") == "ok"
    except (OSError, ValueError, AttributeError):
        return False


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _git(args: list[str]) -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", *args], cwd=here, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def source_revision() -> dict[str, Any]:
    """The git commit of this dlperf and whether tracked files differed from it: from the
    checkout it runs from, else from the stamp scripts/build-dlperf-wheel.sh put in the wheel."""
    commit = _git(["rev-parse", "HEAD"])
    if commit:
        dirty = _git(["status", "--porcelain", "--untracked-files=no"])
        return {"git_commit": commit, "git_dirty": bool(dirty) if dirty is not None else None}
    try:
        stamp = json.loads((Path(__file__).resolve().parent / "_build.json").read_text())
    except (OSError, ValueError):
        return {"git_commit": None, "git_dirty": None}
    return {"git_commit": stamp.get("git_commit"), "git_dirty": stamp.get("git_dirty")}


# Launch and communication settings that change what a run measures.
ENV_PREFIXES = ("NCCL_", "HOROVOD_", "UCX_", "OMP_", "GLOO_", "MXNET_", "TORCH_", "CUDA_")


def launch_environment(env: dict | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {k: v for k, v in sorted(env.items()) if k.startswith(ENV_PREFIXES)}


def _gpu_layout(gpu_count: int = 0) -> dict[str, Any]:
    """gpu_facts' view of the node: the PCIe layout class from `nvidia-smi topo -m` (unknown
    where it prints no matrix of the GPU_COUNT GPUs NVML reported)."""
    import shutil

    binary = shutil.which("nvidia-smi")
    if binary is None:
        return {}
    try:
        from dlperf_module_utils.dlperf_gpu import classify, parse_topology

        out = subprocess.run(
            [binary, "topo", "-m"], capture_output=True, text=True, timeout=20, check=True
        ).stdout
        layout = classify(parse_topology(out), gpu_count=gpu_count)
        return {"pcie_layout": layout["layout"], "nvlink": layout["nvlink"]}
    except Exception as exc:  # a node whose driver is down still records its result
        return {"pcie_layout": None, "pcie_layout_error": f"{type(exc).__name__}: {exc}"[:200]}


def _gpu_versions() -> dict[str, Any]:
    try:
        import pynvml  # nvidia-ml-py; optional

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        names = [
            pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            for i in range(pynvml.nvmlDeviceGetCount())
        ]
        return {
            "driver": str(driver),
            "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "gpus": [n.decode() if isinstance(n, bytes) else str(n) for n in names],
        }
    except Exception:  # no library, no driver or no GPU: recorded as absent
        return {"driver": None, "cuda": None, "gpus": []}


def provenance(hosts: list[str], framework: dict[str, Any] | None = None) -> dict[str, Any]:
    """Where a result came from; ``framework`` holds the engine's own versions (framework,
    launcher library, cuDNN/NCCL as the framework reports them)."""
    gpus = _gpu_versions()
    return {
        "dlperf": _version("dlperf"),
        **(framework or {}),
        **gpus,
        **_gpu_layout(len(gpus["gpus"])),
        "python": platform.python_version(),
        "hosts": hosts,
        "launch_host": socket.gethostname(),
        **source_revision(),
        "environment": launch_environment(),
        "command": sys.argv,
    }
