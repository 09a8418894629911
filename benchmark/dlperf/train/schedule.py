"""Learning-rate schedules: linear warm-up (Goyal et al. 2017), then either cosine decay to zero
(NVIDIA's RN50 v1.5 recipe, the default) or polynomial decay to an end rate (the schedule
MLPerf's closed-division ResNet rules check: power 2, end rate 0.0001). The base rate scales
linearly with the global batch."""

from __future__ import annotations

import math
from dataclasses import dataclass

SCHEDULES = ("cosine", "poly")
POLY_POWER = 2.0
POLY_END_LR = 1e-4


@dataclass(frozen=True)
class WarmupCosine:
    base_lr: float  # after scaling to the global batch
    warmup_steps: int
    total_steps: int

    name = "cosine"

    @classmethod
    def for_batch(cls, lr_per_256: float, global_batch: int, warmup_steps: int, total_steps: int):
        return cls(lr_per_256 * global_batch / 256.0, warmup_steps, max(total_steps, 1))

    @property
    def decay_steps(self) -> int:
        return max(self.total_steps - self.warmup_steps, 1)

    def _decay(self, progress: float) -> float:
        return 0.5 * self.base_lr * (1.0 + math.cos(math.pi * progress))

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.base_lr * (step + 1) / self.warmup_steps
        progress = min(max(step - self.warmup_steps, 0) / self.decay_steps, 1.0)
        return self._decay(progress)


@dataclass(frozen=True)
class WarmupPoly(WarmupCosine):
    end_lr: float = POLY_END_LR
    power: float = POLY_POWER

    name = "poly"

    def _decay(self, progress: float) -> float:
        return (self.base_lr - self.end_lr) * (1.0 - progress) ** self.power + self.end_lr


def make_schedule(
    kind: str, lr_per_256: float, global_batch: int, warmup_steps: int, total_steps: int
) -> WarmupCosine:
    if kind not in SCHEDULES:
        raise ValueError(f"--lr-schedule {kind!r}: choose from {', '.join(SCHEDULES)}")
    cls = WarmupPoly if kind == "poly" else WarmupCosine
    return cls.for_batch(lr_per_256, global_batch, warmup_steps, total_steps)
