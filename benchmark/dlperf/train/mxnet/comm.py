"""Process-group view of a run: Horovod when launched by horovodrun/mpirun, else one process."""

from __future__ import annotations

import os
import socket
import time

import numpy as np

# horovodrun, mpirun, PMI-1/2 and PMIx launches (srun --mpi=pmix sets PMIX_RANK).
LAUNCHER_ENV = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")


def launched_distributed() -> bool:
    return any(v in os.environ for v in LAUNCHER_ENV)


class LocalComm:
    """A world of one (plain `dlperf train`, no launcher)."""

    rank = 0
    size = 1
    local_rank = 0
    local_size = 1
    horovod = None

    def broadcast_parameters(self, params) -> None:
        pass

    def sum(self, values: np.ndarray) -> np.ndarray:
        return values

    def gather(self, row: np.ndarray) -> np.ndarray:
        return row.reshape(1, -1)

    def hostnames(self) -> list[str]:
        return [socket.gethostname()]


class HorovodComm:
    def __init__(self) -> None:
        import horovod.mxnet as hvd

        hvd.init()
        self.horovod = hvd
        self.rank, self.size = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()

    def broadcast_parameters(self, params) -> None:
        """Rank 0's parameters on every rank, as a sum to which the other ranks add zeros.

        Not Horovod's broadcast: in 0.28.1 its MXNet path passes the tensor's name by reference
        into EnqueueTensorBroadcast, which logs it after queueing the tensor; by then Horovod's
        thread may have completed the broadcast and MXNet deleted the operation that owned the
        name. That use-after-free crashed a rank at start-up on a loaded machine (a SIGSEGV in
        the log line, then an abort in MXNet's engine). Allreduce logs its names before it
        queues them. x + 0 is exactly x, so every rank gets rank 0's values (a negative zero
        arrives as zero).
        """
        import mxnet as mx

        if self.size == 1:
            return
        for name, param in sorted(params.items()):
            for i, data in enumerate(param.list_data()):
                # A plain copy: after the first forward pass oneDNN may hold the weights in its
                # own layout, which Horovod cannot read.
                mine = mx.nd.array(
                    data.asnumpy() if self.rank == 0 else np.zeros(data.shape),
                    ctx=data.context,
                    dtype=data.dtype,
                )
                out = self.horovod.allreduce(mine, average=False, name=f"dlperf.init.{name}.{i}")
                data[:] = out
        mx.nd.waitall()

    def sum(self, values: np.ndarray) -> np.ndarray:
        import mxnet as mx

        out = self.horovod.allreduce(mx.nd.array(values, dtype="float64"), average=False, name=None)
        return out.asnumpy()

    def gather(self, row: np.ndarray) -> np.ndarray:
        import mxnet as mx

        out = self.horovod.allgather(mx.nd.array(row.reshape(1, -1), dtype="float64"))
        return out.asnumpy()

    def hostnames(self) -> list[str]:
        raw = socket.gethostname().encode()[:63].ljust(64, b"\0")
        rows = self.gather(np.frombuffer(raw, dtype=np.uint8).astype("float64"))
        return [bytes(r.astype(np.uint8)).rstrip(b"\0").decode() for r in rows]


def make_comm():
    return HorovodComm() if launched_distributed() else LocalComm()


class AllreduceRanks:
    """`dlperf allreduce --backend mxnet`: Horovod's allreduce of MXNet arrays, as the MXNet
    engine's gradients go: on the rank's GPU where MXNet sees one (NCCL, when Horovod was built
    with it), else host tensors through Gloo or MPI."""

    def __init__(self, device: str):
        import horovod.mxnet as hvd
        import mxnet as mx

        from dlperf.usage import UsageError

        self.comm, self.hvd, self.mx = HorovodComm(), hvd, mx
        self.rank, self.size = self.comm.rank, self.comm.size
        gpus = mx.context.num_gpus()
        if device == "gpu" and gpus == 0:
            raise UsageError(
                "--device gpu: MXNet sees no GPU here (a CPU build of mxnet, or no NVIDIA "
                "driver); use --device auto or cpu"
            )
        self.on_gpu = device == "gpu" or (device == "auto" and gpus > 0)
        self.ctx = mx.gpu(self.comm.local_rank % gpus) if self.on_gpu else mx.cpu()
        self.controller = "mpi" if hvd.mpi_enabled() else "gloo"
        # GPU tensors go through Horovod's NCCL operations when it was built with them.
        self.transport = "nccl" if self.on_gpu and hvd.nccl_built() else self.controller

    def filled(self, elements: int, value: float):
        return self.mx.nd.full((elements,), value, dtype="float32", ctx=self.ctx)

    def timed(self, tensor):
        """All ranks' TENSOR summed, and the seconds the reduction alone took (not the copy back
        to the host). One name for every call: Horovod negotiates a tensor once and then serves
        it from its response cache, as it does for training's gradients."""
        start = time.perf_counter()
        out = self.hvd.allreduce(tensor, average=False, name="dlperf.allreduce")
        out.wait_to_read()
        return out, time.perf_counter() - start

    def error(self, out, expected: float) -> float:
        return float(np.max(np.abs(out.asnumpy() - expected)))

    def gather(self, row: np.ndarray) -> np.ndarray:
        return self.comm.gather(row)

    def hostnames(self) -> list[str]:
        return self.comm.hostnames()

    def close(self, ok: bool) -> None:
        pass
