"""Learning-rate schedule: linear warm-up, then cosine decay to zero (Goyal et al. 2017 warm-up;
cosine as in NVIDIA's RN50 v1.5 recipe). The base rate scales linearly with the global batch."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class WarmupCosine:
    base_lr: float  # after scaling to the global batch
    warmup_steps: int
    total_steps: int

    @classmethod
    def for_batch(cls, lr_per_256: float, global_batch: int, warmup_steps: int, total_steps: int):
        return cls(lr_per_256 * global_batch / 256.0, warmup_steps, max(total_steps, 1))

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return self.base_lr * (step + 1) / self.warmup_steps
        span = max(self.total_steps - self.warmup_steps, 1)
        progress = min(max(step - self.warmup_steps, 0) / span, 1.0)
        return 0.5 * self.base_lr * (1.0 + math.cos(math.pi * progress))
