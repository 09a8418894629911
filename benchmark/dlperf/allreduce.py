"""`dlperf allreduce`: a Horovod allreduce across the launched ranks, checked and timed.

The cluster check behind playbooks/validate.yml: every rank contributes a tensor filled with
rank + 1, so the sum is known exactly (size * (size + 1) / 2 in every element) and a wrong or
partial reduction is caught, not just a hang. Bandwidths follow nccl-tests' definitions:
algorithm bandwidth = bytes / time, bus bandwidth = algbw * 2 (n - 1) / n (what each link
carries in a ring allreduce), so numbers compare with published ones at the same size (small
tensors are latency-bound: nccl-tests' peak bus bandwidth needs hundreds of MB). Where the ranks see
GPUs the tensor lives on each rank's GPU, so the reduction goes through NCCL (and GPUDirect RDMA
where the fabric has it), as training's gradients do; else it is a host tensor (Gloo or MPI).
"""

from __future__ import annotations

import socket
import statistics
import time
from pathlib import Path

from dlperf.results import write_atomic
from dlperf.usage import UsageError


def bus_factor(size: int) -> float:
    return 2.0 * (size - 1) / size if size > 1 else 1.0


def run_allreduce(
    megabytes: float, iterations: int, warmup: int, output: Path | None, device: str = "auto"
) -> dict:
    import horovod.mxnet as hvd
    import mxnet as mx
    import numpy as np

    from dlperf.train.mxnet.comm import HorovodComm

    comm = HorovodComm()
    rank, size = comm.rank, comm.size
    elements = max(1, int(megabytes * 1e6) // 4)
    gpus = mx.context.num_gpus()
    if device == "gpu" and gpus == 0:
        raise UsageError(
            "--device gpu: MXNet sees no GPU here (a CPU build of mxnet, or no NVIDIA "
            "driver); use --device auto or cpu"
        )
    on_gpu = device == "gpu" or (device == "auto" and gpus > 0)
    ctx = mx.gpu(comm.local_rank % gpus) if on_gpu else mx.cpu()
    tensor = mx.nd.full((elements,), rank + 1, dtype="float32", ctx=ctx)
    controller = "mpi" if hvd.mpi_enabled() else "gloo"
    expected = size * (size + 1) / 2.0
    times, worst = [], 0.0
    for i in range(warmup + iterations):
        start = time.perf_counter()
        # One name for every iteration: Horovod negotiates a tensor once and then serves it from
        # its response cache, as it does for training's gradients.
        out = hvd.allreduce(tensor, average=False, name="dlperf.allreduce")
        out.wait_to_read()  # the reduction alone is timed, not the copy back to the host
        elapsed = time.perf_counter() - start
        worst = max(worst, float(np.max(np.abs(out.asnumpy() - expected))))
        if i >= warmup:
            times.append(elapsed)
    # Every rank's verdict and timing, so one bad rank fails the whole check.
    rows = comm.gather(np.array([worst, statistics.median(times)], dtype="float64"))
    hosts = comm.hostnames()
    median = max(float(t) for t in rows[:, 1])
    nbytes = elements * 4
    algbw = nbytes / median / 1e6
    summary = {
        "world_size": size,
        "hosts": sorted(set(hosts)),
        "controller": controller,
        "device": "gpu" if on_gpu else "cpu",
        # GPU tensors go through Horovod's NCCL operations when it was built with them.
        "transport": "nccl" if on_gpu and hvd.nccl_built() else controller,
        "bytes": nbytes,
        "iterations": iterations,
        "expected": expected,
        "max_abs_error": float(max(rows[:, 0])),
        "correct": bool(max(rows[:, 0]) == 0.0),
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
            f"host(s) ({summary['transport']}, {summary['device']} tensors): {state}, "
            f"median {median * 1e3:.1f} ms, algbw {algbw:.1f} MB/s, "
            f"busbw {summary['busbw_MBps']:.1f} MB/s",
            flush=True,
        )
    return summary
