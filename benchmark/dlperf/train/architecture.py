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
