"""Process-group view of a run: Horovod when launched by horovodrun/mpirun, else one process."""

from __future__ import annotations

import os
import socket

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
