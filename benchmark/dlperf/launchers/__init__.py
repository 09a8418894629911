"""How one sweep point's processes are started: a small closed set of launchers.

Each turns (nodes, processes per node, the `dlperf train` arguments, the point's directory)
into a running job with telemetry on every node of it, waits for it and says how it ended;
an interrupt (Ctrl-C, SIGTERM) stops what it started before it propagates. The sweep does not
know which launcher it uses.

- ``local``: N x P Horovod processes on this machine (`horovod`).
- ``hosts``: horovodrun over the first N of --hosts by SSH, a sampler on each over SSH
  (`horovod`).
- ``slurm``: one batch job per point (`slurm`).
"""

from __future__ import annotations

from pathlib import Path

from dlperf.launchers import horovod, slurm
from dlperf.launchers.common import Launch

NAMES = ("local", "hosts", "slurm")

__all__ = ["NAMES", "Launch", "plan", "run", "stop_leftovers"]


def plan(cfg, nodes: int, partial: Path) -> list[str]:
    """What `run` would start for this point, as command lines (nothing is started)."""
    return (slurm if cfg.launcher == "slurm" else horovod).plan(cfg, nodes, partial)


def run(cfg, nodes: int, partial: Path, log: Path) -> Launch:
    return (slurm if cfg.launcher == "slurm" else horovod).run(cfg, nodes, partial, log)


def stop_leftovers(cfg, nodes: int, partial: Path) -> list[str]:
    """Before an interrupted point runs again: what of the earlier attempt, still writing into
    PARTIAL, was found running and stopped (a sweep killed without its clean-up, by SIGKILL or
    the OOM killer, leaves horovodrun's ranks over SSH, or its Slurm job, running): the hosts
    its ranks ran on, or ["slurm job N"]."""
    if cfg.launcher == "slurm":
        return slurm.stop_leftovers(cfg, nodes, partial)
    return horovod.stop_leftovers(cfg, nodes, partial)
