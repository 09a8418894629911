"""`dlperf allreduce`: an allreduce across the launched ranks, checked and timed.

The cluster check behind playbooks/validate.yml: every rank contributes a tensor filled with
rank + 1, so the sum is known exactly (size * (size + 1) / 2 in every element) and a wrong or
partial reduction is caught, not just a hang. Bandwidths follow nccl-tests' definitions:
algorithm bandwidth = bytes / time, bus bandwidth = algbw * 2 (n - 1) / n (what each link
carries in a ring allreduce), so numbers compare with published ones at the same size (small
tensors are latency-bound: nccl-tests' peak bus bandwidth needs hundreds of MB). Where the ranks see
GPUs the tensor lives on each rank's GPU, so the reduction goes through NCCL (and GPUDirect RDMA
where the fabric has it), as training's gradients do; else it is a host tensor (Gloo or MPI).
The backend decides whose allreduce: Horovod's with MXNet arrays, as the MXNet engine's
gradients go, or torch.distributed's, as DistributedDataParallel's do (the only one that runs on
GPUs mxnet-cu112 has no code for: Hopper and later). The timed region is the reduction alone.
"""

from __future__ import annotations

import math
import socket
import statistics
from pathlib import Path

from dlperf.results import write_atomic


def bus_factor(size: int) -> float:
    """nccl-tests' allreduce factor: 0 for one rank, whose reduction crosses no link."""
    return 2.0 * (size - 1) / size


def worst_error(errors) -> float:
    """The largest of ERRORS (each the largest deviation from the expected sum), infinite when
    any is NaN: a corrupted element can read as NaN, which `max` would pass over."""
    worst = 0.0
    for value in map(float, errors):
        if not math.isfinite(value):
            return math.inf
        worst = max(worst, value)
    return worst


def run_allreduce(
    megabytes: float,
    iterations: int,
    warmup: int,
    output: Path | None,
    device: str = "auto",
    backend: str = "mxnet",
) -> dict:
    import numpy as np

    from dlperf.train.engine import import_backend

    ranks = import_backend(backend, "allreduce").AllreduceRanks(device)
    rank, size = ranks.rank, ranks.size
    elements = max(1, int(megabytes * 1e6) // 4)
    tensor = ranks.filled(elements, rank + 1)
    expected = size * (size + 1) / 2.0
    times, errors = [], []
    for i in range(warmup + iterations):
        out, elapsed = ranks.timed(tensor)
        errors.append(ranks.error(out, expected))
        if i >= warmup:
            times.append(elapsed)
    worst = worst_error(errors)
    # Every rank's verdict and timing, so one bad rank fails the whole check.
    rows = ranks.gather(np.array([worst, statistics.median(times)], dtype="float64"))
    hosts = ranks.hostnames()
    median = max(float(t) for t in rows[:, 1])
    everywhere = worst_error(rows[:, 0])
    nbytes = elements * 4
    algbw = nbytes / median / 1e6
    summary = {
        "world_size": size,
        "hosts": sorted(set(hosts)),
        "backend": backend,
        "controller": ranks.controller,
        "device": "gpu" if ranks.on_gpu else "cpu",
        "transport": ranks.transport,
        "bytes": nbytes,
        "iterations": iterations,
        "expected": expected,
        # None: some rank's result held a NaN or an infinity (JSON has neither)
        "max_abs_error": everywhere if math.isfinite(everywhere) else None,
        "correct": everywhere == 0.0,
        "median_s": median,
        "algbw_MBps": algbw,
        "busbw_MBps": algbw * bus_factor(size),
        "launch_host": socket.gethostname(),
    }
    if rank == 0:
        if output is not None:
            write_atomic(output, summary)
        state = "correct" if summary["correct"] else "WRONG"
        print(
            f"allreduce of {nbytes / 1e6:.1f} MB over {size} rank(s) on {len(summary['hosts'])} "
            f"host(s) ({backend}, {summary['transport']}, {summary['device']} tensors): {state}, "
            f"median {median * 1e3:.1f} ms, algbw {algbw:.1f} MB/s, "
            f"busbw {summary['busbw_MBps']:.1f} MB/s",
            flush=True,
        )
    # Every rank waits for rank 0's summary: a wrong sum exits 1 everywhere, and launchers stop
    # the other ranks when the first exits non-zero.
    ranks.close(True)
    return summary
