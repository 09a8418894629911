"""ResNet v1.5 in PyTorch: the same architecture as the MXNet engine's (dlperf.train.mxnet.model).

The downsampling bottleneck strides on its 3x3 convolution (v1.5), the last batch-norm of every
residual branch starts at zero, convolutions use He initialisation (fan-out, ReLU gain) as in
NVIDIA's PyTorch RN50 recipe. ``width_multiplier`` scales every channel count (minimum 8).
At width 1.0 ResNet-50 has 25,557,032 trainable parameters, as published.
"""

from __future__ import annotations

import torch
from torch import nn

from dlperf.train.architecture import BN_EPS, BN_MOMENTUM, SPECS, model_depth


def _bn(channels: int, zero: bool = False) -> nn.BatchNorm2d:
    # PyTorch's momentum weighs the new batch; MXNet's weighs the running value.
    bn = nn.BatchNorm2d(channels, eps=BN_EPS, momentum=1.0 - BN_MOMENTUM)
    if zero:
        nn.init.zeros_(bn.weight)
    return bn


def _shortcut(in_ch: int, out_ch: int, stride: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), _bn(out_ch))


class _Residual(nn.Module):
    """relu(body(x) + shortcut(x)), the shortcut a 1x1 projection where the shape changes."""

    def __init__(self, body: nn.Sequential, in_ch: int, channels: int, stride: int, downsample):
        super().__init__()
        self.body = body
        self.downsample = _shortcut(in_ch, channels, stride) if downsample else None
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = self.downsample(x) if self.downsample is not None else x
        return self.relu(self.body(x) + residual)


class BasicBlock(_Residual):
    expansion = 1

    def __init__(self, in_ch: int, channels: int, stride: int, downsample: bool):
        body = nn.Sequential(
            nn.Conv2d(in_ch, channels, 3, stride, 1, bias=False),
            _bn(channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(channels, channels, 3, 1, 1, bias=False),
            _bn(channels, zero=True),
        )
        super().__init__(body, in_ch, channels, stride, downsample)


class Bottleneck(_Residual):
    expansion = 4

    def __init__(self, in_ch: int, channels: int, stride: int, downsample: bool):
        mid = channels // self.expansion
        body = nn.Sequential(
            nn.Conv2d(in_ch, mid, 1, 1, 0, bias=False),
            _bn(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, mid, 3, stride, 1, bias=False),  # v1.5: the stride is here
            _bn(mid),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, channels, 1, 1, 0, bias=False),
            _bn(channels, zero=True),
        )
        super().__init__(body, in_ch, channels, stride, downsample)


class ResNetV15(nn.Module):
    def __init__(self, depth: int, classes: int = 1000, width_multiplier: float = 1.0):
        super().__init__()
        kind, layers = SPECS[depth]
        block = Bottleneck if kind == "bottleneck" else BasicBlock

        def width(c: int) -> int:
            return max(8, round(c * width_multiplier))

        stem = width(64)
        features: list[nn.Module] = [
            nn.Conv2d(3, stem, 7, 2, 3, bias=False),
            _bn(stem),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        ]
        in_ch = stem
        for stage, blocks in enumerate(layers):
            channels = width(64 * 2**stage) * block.expansion
            for i in range(blocks):
                stride = 2 if i == 0 and stage > 0 else 1
                downsample = i == 0 and (stride != 1 or in_ch != channels)
                features.append(block(in_ch, channels, stride, downsample))
                in_ch = channels
        features += [nn.AdaptiveAvgPool2d(1), nn.Flatten()]
        self.features = nn.Sequential(*features)
        self.output = nn.Linear(in_ch, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.features(x))


def build_model(name: str, classes: int, width_multiplier: float) -> ResNetV15:
    return ResNetV15(model_depth(name), classes=classes, width_multiplier=width_multiplier)


def decay_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Weight decay on convolution and dense weights only, not on batch-norm or biases."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        is_bn_or_bias = p.ndim <= 1 or name.endswith(".bias")
        (no_decay if is_bn_or_bias else decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
