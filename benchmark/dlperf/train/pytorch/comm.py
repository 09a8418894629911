"""The rank's device and the job's process group: NCCL where the ranks hold GPU tensors, Gloo
for host tensors, met at rank 0's address (dist.placement), with the few collectives the driver
needs. A world of one has no group unless one is asked for (`dlperf allreduce` on one GPU still
goes through NCCL)."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from dlperf_module_utils.dlperf_gpu import cuda_build_runs

from dlperf.train.pytorch.dist import Placement
from dlperf.usage import UsageError


def select_device(device: str, local_rank: int) -> torch.device:
    """The rank's GPU for "gpu" (or "auto" where there is one), else the CPU."""
    gpus = torch.cuda.device_count()
    if device == "gpu" and gpus == 0 and torch.version.cuda:
        raise UsageError(
            f"--device gpu: PyTorch sees no GPU here: torch {torch.__version__} is built for "
            f"CUDA {torch.version.cuda}, which needs an NVIDIA driver that runs it (nvidia-smi's "
            "'CUDA Version' at least that); none is loaded, or it is older. Use a torch built "
            "for the driver's CUDA, or --device auto or cpu"
        )
    if device == "gpu" and gpus == 0:
        raise UsageError(
            "--device gpu: PyTorch sees no GPU here (a CPU build of torch, or no NVIDIA "
            "driver); use --device auto or cpu"
        )
    if device == "gpu" or (device == "auto" and gpus > 0):
        dev = torch.device("cuda", local_rank % gpus)
        _check_kernels(dev)
        torch.cuda.set_device(dev)
        return dev
    return torch.device("cpu")


def _check_kernels(dev: torch.device) -> None:
    """Refuse a GPU this build of torch has no code for (a CUDA 13 build on a V100, say): torch
    itself only warns, and the first kernel launch then fails deep inside the step."""
    capability, archs = torch.cuda.get_device_capability(dev), torch.cuda.get_arch_list()
    if archs and not cuda_build_runs(capability, archs):
        raise UsageError(
            f"--backend pytorch: torch {torch.__version__} (CUDA {torch.version.cuda}) has no "
            f"code for this GPU ({torch.cuda.get_device_name(dev)}, compute capability "
            f"{capability[0]}.{capability[1]}; the build has {' '.join(archs)}): install a torch "
            f"build whose CUDA release still supports it, or use --backend mxnet"
        )


class TorchComm:
    def __init__(self, place: Placement, device: torch.device, group: bool | None = None):
        self.place, self.device = place, device
        self.rank, self.size = place.rank, place.size
        self.backend = "nccl" if device.type == "cuda" else "gloo"
        self.grouped = place.size > 1 if group is None else group
        if self.grouped:
            dist.init_process_group(
                self.backend,
                init_method=f"tcp://{place.master_addr}:{place.master_port}",
                rank=place.rank,
                world_size=place.size,
                timeout=timedelta(seconds=int(os.environ.get("DLPERF_DIST_TIMEOUT", "600"))),
            )

    def tensor(self, values) -> torch.Tensor:
        """VALUES as float64 where this backend reduces them (NCCL: the GPU)."""
        return torch.tensor(values, dtype=torch.float64, device=self.device)

    def sum(self, values: np.ndarray) -> np.ndarray:
        t = self.tensor(values)
        if self.grouped:
            dist.all_reduce(t)
        return t.cpu().numpy()

    def gather(self, row: np.ndarray) -> np.ndarray:
        t = self.tensor(row)
        if not self.grouped:
            return t.cpu().numpy().reshape(1, -1)
        out = [torch.empty_like(t) for _ in range(self.size)]
        dist.all_gather(out, t)
        return torch.stack(out).cpu().numpy()

    def barrier(self) -> None:
        self.sum(np.zeros(1))

    def hostnames(self) -> list[str]:
        name = socket.gethostname()
        if not self.grouped:
            return [name]
        names: list = [None] * self.size
        dist.all_gather_object(names, name)
        return names

    def close(self, ok: bool) -> None:
        if self.grouped and dist.is_initialized():
            # Every rank past its last collective before any tears its connections down: a
            # rank that destroyed the group while a peer was still in the final gather aborted
            # ("terminate called without an active exception"). After a failure, no barrier:
            # the peers may never reach it.
            if ok:
                dist.barrier()
            dist.destroy_process_group()
