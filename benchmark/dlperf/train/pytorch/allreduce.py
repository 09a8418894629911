"""`dlperf allreduce --backend pytorch` (dlperf.allreduce runs it): torch.distributed's
all_reduce on the job's process group. Imported only for that backend, like the engine."""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from dlperf.train.pytorch.comm import TorchComm, select_device
from dlperf.train.pytorch.dist import placement


class AllreduceRanks:
    """`dlperf allreduce --backend pytorch`: torch.distributed's all_reduce, on the rank's GPU
    through NCCL (as DistributedDataParallel's gradients go) or on host tensors through Gloo.
    The ranks meet as training's do (dist.placement: horovodrun, mpirun, srun or torchrun)."""

    def __init__(self, device: str):
        place = placement()
        self.dev = select_device(device, place.local_rank)
        self.comm = TorchComm(place, self.dev, group=True)
        self.rank, self.size = place.rank, place.size
        self.on_gpu = self.dev.type == "cuda"
        self.controller = "torch.distributed"
        self.transport = self.comm.backend
        self._work: torch.Tensor | None = None

    def filled(self, elements: int, value: float) -> torch.Tensor:
        return torch.full((elements,), float(value), dtype=torch.float32, device=self.dev)

    def _sync(self) -> None:
        if self.on_gpu:
            torch.cuda.synchronize(self.dev)

    def timed(self, tensor: torch.Tensor) -> tuple[torch.Tensor, float]:
        """All ranks' TENSOR summed, and the seconds the reduction alone took (all_reduce works
        in place: it gets a fresh copy, made before the clock starts), timed from a barrier: no
        rank's time includes waiting for a slower one still checking the previous sum."""
        if self._work is None:
            self._work = torch.empty_like(tensor)
        self._work.copy_(tensor)
        self._sync()
        self.comm.barrier()
        start = time.perf_counter()
        dist.all_reduce(self._work)
        self._sync()
        return self._work, time.perf_counter() - start

    def error(self, out: torch.Tensor, expected: float) -> float:
        """The largest deviation from EXPECTED, computed in OUT itself (the work buffer, copied
        afresh before the next reduction): no second tensor of the size on the GPU. The sums
        are small integers, exact in float32."""
        return float(out.sub_(expected).abs_().max().item())

    def gather(self, row: np.ndarray) -> np.ndarray:
        return self.comm.gather(row)

    def hostnames(self) -> list[str]:
        return self.comm.hostnames()

    def close(self, ok: bool) -> None:
        self.comm.close(ok)
