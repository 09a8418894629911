"""The seam between the training driver and a framework.

The driver (dlperf.train.driver) owns the clock, time to accuracy, the MLPerf log, progress and
the result. An engine owns everything that touches a framework: process group, device, data,
model, one optimisation step, evaluation, parameter fingerprint, versions and the loss scaler's
record. Each engine lives
in its own package (dlperf.train.<backend>) and is imported only when that backend is chosen,
so `dlperf report` and `dlperf sweep` never import a framework, and no process imports two.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dlperf.train.config import TrainConfig
from dlperf.train.schedule import WarmupCosine
from dlperf.usage import UsageError

BACKENDS = ("mxnet", "pytorch")
# The framework each engine imports: its module, its name, and what installs it. A node without
# it is told so, not shown a traceback.
FRAMEWORKS = {
    "mxnet": (
        "mxnet",
        "MXNet",
        "dlperf[cpu], or dlperf[gpu,nccl] on NVIDIA GPUs (dlperf[gpu] beside PyTorch's CUDA build, "
        "whose NCCL it shares)",
    ),
    "pytorch": ("torch", "PyTorch", "dlperf[pytorch]"),
}


@dataclass
class Datasets:
    train: Any  # iterable of batches, one pass per epoch
    val: Any | None  # iterable of batches; None for synthetic data
    classes: int
    steps_per_epoch: int  # identical on every rank
    train_samples: int  # images in the training set (synthetic: one epoch's worth)
    eval_samples: int  # images in the validation set (0 without one)


class Engine(Protocol):
    name: str
    rank: int
    size: int
    local_rank: int
    device: str  # "gpu" | "cpu"
    precision: str  # what the step computes in, e.g. "bfloat16-amp", "float32"
    threads: int  # data-decoding threads or workers of this rank

    def hostnames(self) -> list[str]: ...

    def datasets(self) -> Datasets: ...

    def build(self, classes: int, schedule: WarmupCosine) -> None: ...

    def step(self, batch: Any, step: int) -> None: ...

    def images(self, batch: Any) -> int:
        """Images this rank trained on in ``batch``."""
        ...

    def synchronize(self) -> None:
        """Wait for every queued device operation of this rank."""
        ...

    def barrier(self) -> None: ...

    def evaluate(self, val: Any) -> float:
        """Top-1 over the whole validation set, every image counted once across ranks."""
        ...

    def fingerprint(self) -> np.ndarray: ...

    def gather(self, row: np.ndarray) -> np.ndarray: ...

    def versions(self) -> dict[str, Any]: ...

    def loss_scaling(self) -> dict[str, Any] | None:
        """After training: the dynamic loss scaler's last scale and the steps it skipped on
        overflowing gradients (identical on every rank: it reads the allreduced gradients);
        None where no scaler runs."""
        ...

    def close(self, ok: bool) -> None:
        """End the process group: after the last collective everywhere when ``ok``."""
        ...


def steps_per_epoch(records: int, batch: int, world: int) -> int:
    """Whole global batches in an epoch, at least one: every rank takes this many steps (a rank
    that ran on would wait in an allreduce)."""
    return max(1, records // (batch * world))


def decode_threads(cfg: TrainConfig, local_size: int) -> int:
    """--threads, or the node's cores shared among its ranks."""
    if cfg.threads is not None:
        return cfg.threads
    return max(1, (os.cpu_count() or 1) // max(local_size, 1))


def import_backend(backend: str, module: str):
    """dlperf.train.BACKEND.MODULE, the only place a framework is imported; a framework that is
    not installed is a usage error naming what installs it."""
    if backend not in BACKENDS:
        raise ValueError(f"--backend {backend!r}: choose from {', '.join(BACKENDS)}")
    try:
        return importlib.import_module(f"dlperf.train.{backend}.{module}")
    except ModuleNotFoundError as exc:
        module_name, framework, install = FRAMEWORKS[backend]
        if exc.name != module_name:
            raise
        other = next(b for b in BACKENDS if b != backend)
        raise UsageError(
            f"--backend {backend}: {framework} is not installed here; install {install}, "
            f"or use --backend {other}"
        ) from exc


def load_engine(cfg: TrainConfig) -> Engine:
    return import_backend(cfg.backend, "engine").create(cfg)
