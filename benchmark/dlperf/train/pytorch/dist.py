"""The process's place in the job, from whichever launcher started it.

torchrun (and Slurm wrappers) set RANK/WORLD_SIZE/LOCAL_RANK; horovodrun sets HOROVOD_*; mpirun
sets OMPI_COMM_WORLD_*; srun sets SLURM_*. Rank 0's address comes from MASTER_ADDR and
MASTER_PORT (the sweep and the dlperf_job module set them); a job whose ranks are all on this
host may leave MASTER_ADDR out and meets on the loopback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

# (rank, world size, local rank, local size) variables, most specific launcher first.
LAUNCHERS = (
    ("torchrun", ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")),
    ("horovodrun", ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE")),
    (
        "mpirun",
        (
            "OMPI_COMM_WORLD_RANK",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
        ),
    ),
    ("srun", ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")),
)
DEFAULT_PORT = 29500


class LaunchError(RuntimeError):
    """The launcher's environment does not describe a usable job."""


@dataclass(frozen=True)
class Placement:
    launcher: str  # "none" for a plain single process
    rank: int
    size: int
    local_rank: int
    local_size: int
    master_addr: str
    master_port: int


def _int(env: dict, name: str, default: int | None = None) -> int:
    value = env.get(name)
    if value is None:
        if default is None:
            raise LaunchError(f"{name} is not set")
        return default
    try:
        return int(str(value).split("(")[0].split(",")[0])  # SLURM_NTASKS_PER_NODE: "4(x2)"
    except ValueError as exc:
        raise LaunchError(f"{name}={value!r}: not an integer") from exc


def placement(env: dict | None = None) -> Placement:
    env = dict(os.environ if env is None else env)
    found = [(name, keys) for name, keys in LAUNCHERS if keys[0] in env and keys[1] in env]
    if found:
        launcher, (rank, size, local_rank, local_size) = found[0]
        p_rank, p_size = _int(env, rank), _int(env, size)
        p_local = _int(env, local_rank, p_rank)
        p_local_size = _int(env, local_size, p_size)
    else:
        launcher, p_rank, p_size, p_local, p_local_size = "none", 0, 1, 0, 1
    if not 0 <= p_rank < p_size:
        raise LaunchError(f"rank {p_rank} outside a world of {p_size} ({launcher})")
    addr = env.get("MASTER_ADDR")
    if addr is None:
        if p_size > p_local_size:
            raise LaunchError(
                f"{p_size} ranks on several hosts ({launcher}) but MASTER_ADDR is not set: "
                "export rank 0's host as MASTER_ADDR (dlperf sweep and dlperf_job do)"
            )
        addr = "127.0.0.1"
    port = _int(env, "MASTER_PORT", DEFAULT_PORT)
    return Placement(launcher, p_rank, p_size, p_local, p_local_size, addr, port)
