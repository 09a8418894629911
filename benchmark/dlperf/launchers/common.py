"""What every launcher shares: how a point's job ended, and where `dlperf` is."""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

INTERRUPTS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@dataclass
class Launch:
    """How a point's job ended, as the sweep records it."""

    rc: int
    command: list[str]
    started_at: float  # epoch seconds when the launcher was asked to start the job
    details: dict = field(default_factory=dict)  # e.g. the Slurm job id


def dlperf_binary() -> str:
    return str(Path(sys.executable).parent / "dlperf")
