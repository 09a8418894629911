"""The PyTorch engine: ResNet v1.5 under DistributedDataParallel (NCCL on GPUs, Gloo on CPUs),
mixed precision by autocast (bf16 where the GPU has it, else fp16 with a gradient scaler),
channels_last on GPUs, optional torch.compile, .rec data through NVIDIA DALI or DataLoader
workers. One process per GPU."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

from dlperf.data.recordio import class_count
from dlperf.train.config import TrainConfig
from dlperf.train.engine import Datasets, decode_threads
from dlperf.train.pytorch import dali
from dlperf.train.pytorch.comm import TorchComm, select_device
from dlperf.train.pytorch.data import RecordData, SyntheticData, classes_in
from dlperf.train.pytorch.dist import placement
from dlperf.train.pytorch.model import build_model, decay_groups
from dlperf.train.schedule import WarmupCosine
from dlperf.usage import UsageError

AMP = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def _loader(cfg: TrainConfig, device: torch.device) -> str:
    """The input pipeline for .rec data: "dali" or "native" (synthetic data needs none)."""
    if cfg.synthetic:
        return "synthetic"
    installed = dali.version() is not None
    if cfg.loader == "dali" and not installed:
        raise UsageError(
            "--loader dali: NVIDIA DALI is not installed here (install dlperf[dali], or use "
            "--loader native)"
        )
    if cfg.loader == "auto":
        return "dali" if installed and device.type == "cuda" else "native"
    return cfg.loader


def _dtype(cfg: TrainConfig, device: torch.device) -> str:
    if cfg.dtype != "auto":
        return cfg.dtype
    if device.type != "cuda":
        return "float32"
    # bf16 Tensor Cores from Ampere (compute capability 8.0) on. torch.cuda.is_bf16_supported()
    # also says yes on a V100, where bf16 is only emulated, slowly.
    return "bfloat16" if torch.cuda.get_device_capability(device) >= (8, 0) else "float16"


class TorchEngine:
    name = "pytorch"

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.place = placement()
        self.rank, self.size = self.place.rank, self.place.size
        self.local_rank = self.place.local_rank
        self.dev = select_device(cfg.device, self.local_rank)
        self.device = "gpu" if self.dev.type == "cuda" else "cpu"
        self.dtype = _dtype(cfg, self.dev)
        self.amp = self.dtype in AMP
        self.precision = f"{self.dtype}-amp" if self.amp else self.dtype
        self.threads = decode_threads(cfg, self.place.local_size)
        self.scaler = None
        layout = (
            cfg.layout if cfg.layout != "auto" else ("NHWC" if self.device == "gpu" else "NCHW")
        )
        self.layout = layout
        self.memory_format = torch.channels_last if layout == "NHWC" else torch.contiguous_format
        self.loader = _loader(cfg, self.dev)
        torch.manual_seed(cfg.seed)  # the same initial weights on every rank before DDP's sync
        if self.device == "gpu":
            torch.backends.cudnn.benchmark = True
        self.comm = TorchComm(self.place, self.dev)

    # ---- collectives (world of one: no process group) ------------------------------------
    def sum(self, values: np.ndarray) -> np.ndarray:
        return self.comm.sum(values)

    def gather(self, row: np.ndarray) -> np.ndarray:
        return self.comm.gather(row)

    def barrier(self) -> None:
        self.comm.barrier()

    def hostnames(self) -> list[str]:
        return self.comm.hostnames()

    def versions(self) -> dict:
        cuda = self.device == "gpu"
        return {
            "framework": "pytorch",
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "cudnn": str(torch.backends.cudnn.version()) if cuda else None,
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
            "gpu_model": torch.cuda.get_device_name(self.dev) if cuda else None,
            "launcher": self.place.launcher,
            "layout": self.layout,
            "compiled": self.cfg.compile,
            "loader": f"dali {dali.version()}" if self.loader == "dali" else self.loader,
        }

    # ---- data --------------------------------------------------------------------------
    def datasets(self) -> Datasets:
        cfg = self.cfg
        if cfg.synthetic:
            classes = cfg.classes or 1000
            per_epoch = cfg.iterations if cfg.mode == "throughput" else 10
            train = SyntheticData(
                cfg.batch_size,
                cfg.image_size,
                classes,
                per_epoch,
                self.dev,
                self.memory_format,
                cfg.seed,
            )
            samples = per_epoch * cfg.batch_size * self.size
            return Datasets(train, None, classes, per_epoch, samples, 0)
        path = Path(cfg.data)
        classes = cfg.classes or class_count(path, classes_in)
        common = (self.rank, self.size, self.threads, cfg.seed, self.dev, self.memory_format)
        reader = dali.DaliData if self.loader == "dali" else RecordData
        train = reader(path, cfg.batch_size, cfg.image_size, True, *common)
        val = None
        if cfg.val_data:
            val = reader(Path(cfg.val_data), cfg.batch_size, cfg.image_size, False, *common)
        eval_samples = val.records if val is not None else 0
        return Datasets(train, val, classes, train.steps, train.records, eval_samples)

    # ---- model + optimiser -------------------------------------------------------------
    def build(self, classes: int, schedule: WarmupCosine) -> None:
        cfg = self.cfg
        self.schedule = schedule
        net = build_model(cfg.model, classes, cfg.width_multiplier)
        net = net.to(self.dev, memory_format=self.memory_format)
        self.net = net
        model: nn.Module = net
        if self.size > 1:
            model = nn.parallel.DistributedDataParallel(
                net,
                device_ids=[self.dev.index] if self.device == "gpu" else None,
                gradient_as_bucket_view=True,
            )
        if cfg.compile:
            model = torch.compile(model)
        self.model = model
        groups = decay_groups(net, cfg.weight_decay)
        extra = {"fused": True} if self.device == "gpu" else {"foreach": True}
        self.opt = torch.optim.SGD(groups, lr=schedule(0), momentum=cfg.momentum, **extra)
        self.scaler = torch.amp.GradScaler(self.dev.type, enabled=self.dtype == "float16")
        self._skipped = torch.zeros((), dtype=torch.int64, device=self.dev)
        self.loss_fn = nn.CrossEntropyLoss(label_smoothing=cfg.label_smoothing)

    # ---- steps -------------------------------------------------------------------------
    def _autocast(self):
        return torch.autocast(self.dev.type, dtype=AMP.get(self.dtype), enabled=self.amp)

    def step(self, batch, step: int) -> None:
        data, label, _ = batch
        lr = self.schedule(step)
        for group in self.opt.param_groups:
            group["lr"] = lr
        with self._autocast():
            logits = self.model(data)
        loss = self.loss_fn(logits.float(), label)  # the loss in fp32, as NVIDIA's recipe
        self.opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.opt)
        if self.scaler.is_enabled():
            # GradScaler halves its scale exactly when it skipped the step (inf/NaN gradients)
            # and keeps no count; comparing its scale tensor counts them on the device, without
            # a host synchronisation per step (fused SGD skips on the device too).
            before = self.scaler._scale.clone()
            self.scaler.update()
            self._skipped += self.scaler._scale < before
        else:
            self.scaler.update()

    def loss_scaling(self) -> dict | None:
        if self.scaler is None or not self.scaler.is_enabled():
            return None
        return {"scale": float(self.scaler.get_scale()), "skipped_steps": int(self._skipped)}

    def images(self, batch) -> int:
        return int(batch[1].shape[0])

    def synchronize(self) -> None:
        if self.device == "gpu":
            torch.cuda.synchronize(self.dev)

    def evaluate(self, val) -> float:
        self.model.eval()
        correct = torch.zeros((), dtype=torch.float64, device=self.dev)
        total = torch.zeros((), dtype=torch.float64, device=self.dev)
        with torch.no_grad(), self._autocast():
            for data, label, valid in val:
                pred = self.net(data).argmax(dim=1)
                correct += ((pred == label) & valid).sum()
                total += valid.sum()
        self.model.train()
        summed = self.sum(np.array([correct.item(), total.item()]))
        return float(summed[0] / max(summed[1], 1.0))

    def fingerprint(self) -> np.ndarray:
        """Sum and sum of squares of every trainable parameter, in a fixed order. Batch-norm
        running statistics are left out: each rank updates them from its own shard after DDP's
        last buffer broadcast, so they differ by design."""
        values = []
        for _, t in sorted(self.net.named_parameters()):
            a = t.detach().double().cpu().numpy()
            values += [a.sum(), (a * a).sum()]
        return np.array(values)

    def close(self, ok: bool) -> None:
        self.comm.close(ok)


def create(cfg: TrainConfig) -> TorchEngine:
    return TorchEngine(cfg)
