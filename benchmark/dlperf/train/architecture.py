"""ResNet v1.5 as data, shared by every engine's model (no framework imported here).

v1.5 differs from the original v1 only in the downsampling bottleneck: the stride sits on the
3x3 convolution instead of the first 1x1 (He et al. 2016 put it on the 1x1; the v1.5 variant is
the one NVIDIA's DeepLearningExamples and MLPerf train). BasicBlock depths (18, 34) are
unaffected by the distinction.
"""

from __future__ import annotations

# depth -> (block type, blocks per stage)
SPECS: dict[int, tuple[str, list[int]]] = {
    18: ("basic", [2, 2, 2, 2]),
    34: ("basic", [3, 4, 6, 3]),
    50: ("bottleneck", [3, 4, 6, 3]),
    101: ("bottleneck", [3, 4, 23, 3]),
}
MODELS = {f"resnet{d}_v1.5": d for d in SPECS}
BN_EPS = 1e-5
BN_MOMENTUM = 0.9  # weight of the running value (MXNet's convention)


def model_depth(name: str) -> int:
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(sorted(MODELS))}")
    return MODELS[name]


def channel_width(channels: int, width_multiplier: float) -> int:
    """Every engine's channel count at a width multiplier (at least 8)."""
    return max(8, round(channels * width_multiplier))


def parameter_count(name: str, classes: int = 1000, width_multiplier: float = 1.0) -> int:
    """Trainable parameters of the engines' ResNet v1.5 (convolutions without bias, two
    per batch-norm channel, the dense layer with its bias), without building it: what one
    allreduce of the gradients moves per step. 25,557,032 for resnet50_v1.5 at width 1."""
    kind, layers = SPECS[model_depth(name)]
    expansion = 4 if kind == "bottleneck" else 1

    def conv_bn(cin: int, cout: int, k: int) -> int:
        return cin * cout * k * k + 2 * cout

    stem = channel_width(64, width_multiplier)
    total, cin = conv_bn(3, stem, 7), stem
    for stage, blocks in enumerate(layers):
        cout = channel_width(64 * 2**stage, width_multiplier) * expansion
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            if kind == "bottleneck":
                mid = cout // expansion
                total += conv_bn(cin, mid, 1) + conv_bn(mid, mid, 3) + conv_bn(mid, cout, 1)
            else:
                total += conv_bn(cin, cout, 3) + conv_bn(cout, cout, 3)
            if i == 0 and (stride != 1 or cin != cout):
                total += conv_bn(cin, cout, 1)  # the projection shortcut
            cin = cout
    return total + cin * classes + classes
