"""Real training runs on CPU: tiny ResNet widths, small images, few steps, 1-2 processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
# Gloo waits 30 s for a peer by default: short for first steps on a loaded 2-core machine.
ENV = dict(
    os.environ,
    PATH=f"{BIN}:{os.environ['PATH']}",
    OMP_NUM_THREADS="1",
    HOROVOD_GLOO_TIMEOUT_SECONDS="300",
)
TINY = ["--model", "resnet18_v1.5", "--width-multiplier", "0.25", "--image-size", "32"]


def run(cmd: list[str], env: dict | None = None, timeout: int = 300):
    """CMD to its end with output captured (ENV unless told otherwise); never raises on rc."""
    return subprocess.run(
        cmd, capture_output=True, text=True, env=env or ENV, timeout=timeout, check=False
    )


def dlperf(*args: str, launcher: list[str] | None = None, timeout: int = 300):
    return run([*(launcher or []), str(BIN / "dlperf"), *args], timeout=timeout)


def sweep(results: Path, run_id: str, *train: str, nodes: str = "1,2"):
    """`dlperf sweep --launcher local` (the default) over NODES, run to its end."""
    return dlperf(
        "sweep",
        "--quiet",
        "--nodes",
        nodes,
        "--results",
        str(results),
        "--run-id",
        run_id,
        "--telemetry-interval",
        "0.5",
        *train,
        timeout=600,
    )


def read_result(output: Path) -> dict:
    return json.loads((output / "result.json").read_text())


@pytest.fixture(scope="session")
def digits(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digits")
    proc = dlperf("data", "digits", "--output", str(out), "--image-size", "32")
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A real one-node Slurm (tests/training/slurm.py), shared by the launcher's and the
    dlperf_job module's tests."""
    from .slurm import LocalSlurm

    cluster = LocalSlurm(tmp_path_factory.mktemp("slurm")).start()
    yield cluster
    cluster.stop()
