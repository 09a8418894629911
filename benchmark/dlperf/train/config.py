"""Training configuration: every flag of `dlperf train`, with the published defaults.

Defaults follow NVIDIA DeepLearningExamples' MXNet ResNet-50 v1.5 recipe (see docs/benchmark.md's
flag table): 192 images per GPU with AMP, SGD momentum 0.875, 0.256 per 256 images scaled
linearly with the global batch, 5 warm-up epochs then cosine, weight decay 1/32768 (not on
batch-norm or bias), label smoothing 0.1, 90 epochs at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class TrainConfig:
    output: Path
    backend: str = "mxnet"
    model: str = "resnet50_v1.5"
    width_multiplier: float = 1.0
    image_size: int = 224
    batch_size: int = 192  # per worker
    data: str = "synthetic"  # or a .rec path
    val_data: str | None = None
    classes: int | None = None  # synthetic: 1000; RecordIO: read from the file
    mode: str = "throughput"  # or "tta"
    target_top1: float = 0.749
    max_epochs: int = 90
    iterations: int = 100  # throughput mode: steps per worker, warm-up included
    warmup_iterations: int = 20  # throughput mode: steps excluded from the timing
    lr_per_256: float = 0.256
    momentum: float = 0.875
    weight_decay: float = 1.0 / 32768
    label_smoothing: float = 0.1
    warmup_epochs: float = 5.0
    lr_schedule: str = "cosine"  # cosine (DLE) | poly (MLPerf's closed ResNet rules)
    dtype: str = "auto"  # auto: float16 (MXNet) or bfloat16/float16 AMP (PyTorch) on GPU; CPU fp32
    layout: str = "auto"  # auto: NHWC (channels_last) for PyTorch on GPU, else NCHW
    compile: bool = False  # PyTorch: torch.compile the model (first step timed apart)
    device: str = "auto"  # auto | cpu | gpu
    seed: int = 0
    threads: int | None = None  # data decoding per worker; None: cores / local ranks
    loader: str = "auto"  # PyTorch: auto (DALI on GPU when installed) | native | dali

    @property
    def synthetic(self) -> bool:
        return self.data == "synthetic"
