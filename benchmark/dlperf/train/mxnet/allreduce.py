"""`dlperf allreduce --backend mxnet` (dlperf.allreduce runs it): Horovod's allreduce of MXNet
arrays. Imported only for that backend, like the engine."""

from __future__ import annotations

import time

import mxnet as mx  # before Horovod's: a node without MXNet is told to install it
import numpy as np
from horovod import mxnet as hvd

from dlperf.train.mxnet import device_context
from dlperf.train.mxnet.comm import HorovodComm


class AllreduceRanks:
    """`dlperf allreduce --backend mxnet`: Horovod's allreduce of MXNet arrays, as the MXNet
    engine's gradients go: on the rank's GPU where MXNet sees one (NCCL, when Horovod was built
    with it), else host tensors through Gloo or MPI."""

    def __init__(self, device: str):
        self.comm = HorovodComm()
        self.rank, self.size = self.comm.rank, self.comm.size
        self.ctx = device_context(device, self.comm.local_rank)
        self.on_gpu = self.ctx.device_type == "gpu"
        self.controller = "mpi" if hvd.mpi_enabled() else "gloo"
        # GPU tensors go through Horovod's NCCL operations when it was built with them.
        self.transport = "nccl" if self.on_gpu and hvd.nccl_built() else self.controller

    def filled(self, elements: int, value: float):
        return mx.nd.full((elements,), value, dtype="float32", ctx=self.ctx)

    def timed(self, tensor):
        """All ranks' TENSOR summed, and the seconds the reduction alone took (not the copy back
        to the host), timed from a barrier: no rank's time includes waiting for a slower one
        still checking the previous sum. One name for every call: Horovod negotiates a tensor
        once and then serves it from its response cache, as it does for training's gradients."""
        self.comm.sum(np.zeros(1))
        start = time.perf_counter()
        out = hvd.allreduce(tensor, average=False, name="dlperf.allreduce")
        out.wait_to_read()
        return out, time.perf_counter() - start

    def error(self, out, expected: float) -> float:
        """The largest deviation from EXPECTED, in one host copy of the sum (worked in place);
        NumPy's max keeps a NaN, which the check must see."""
        host = out.asnumpy()
        host -= expected
        np.abs(host, out=host)
        return float(np.max(host))

    def gather(self, row: np.ndarray) -> np.ndarray:
        return self.comm.gather(row)

    def hostnames(self) -> list[str]:
        return self.comm.hostnames()

    def close(self, ok: bool) -> None:
        # After rank 0 has written the summary: a wrong sum exits 1 on every rank, and the
        # launcher stops the others when the first exits non-zero.
        if ok:
            self.comm.sum(np.zeros(1))
