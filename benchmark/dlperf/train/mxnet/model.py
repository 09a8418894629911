"""ResNet v1.5 in MXNet Gluon (the architecture is described in dlperf.train.architecture).

``width_multiplier`` scales every channel count (minimum 8) so tests can train the same
architecture at a fraction of the cost. ``layout`` "NHWC" puts channels last in every
convolution, batch-norm and pooling (NVIDIA's MXNet recipe's ``--conv-layout``,
``--batchnorm-layout`` and ``--pooling-layout NHWC``); the input still arrives as NCHW and is
transposed once. MXNet convolves NHWC only through cuDNN, so that network runs on GPUs only.
"""

from __future__ import annotations

from mxnet.gluon import nn

from dlperf.train.architecture import BN_EPS, BN_MOMENTUM, SPECS, model_depth

LAYOUTS = ("NCHW", "NHWC")


def _conv(layout: str, channels: int, kernel: int, stride: int = 1, padding: int = 0):
    return nn.Conv2D(channels, kernel, stride, padding, use_bias=False, layout=layout)


def _bn(layout: str, **kwargs) -> nn.BatchNorm:
    return nn.BatchNorm(axis=layout.index("C"), epsilon=BN_EPS, momentum=BN_MOMENTUM, **kwargs)


def _last_bn(layout: str) -> nn.BatchNorm:
    """The residual branch's last batch-norm starts at zero, so each block starts as the
    identity (NVIDIA's recipe zeroes its running variance as well)."""
    return _bn(layout, gamma_initializer="zeros", running_variance_initializer="zeros")


def initializer():
    """NVIDIA's MXNet RN50 recipe: He-normal weights over the fan-in (Xavier, Gaussian, 'in',
    magnitude 2) for convolutions and the dense layer; biases zero, batch-norm as above."""
    import mxnet as mx

    return mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2)


class BasicBlock(nn.HybridBlock):
    expansion = 1

    def __init__(
        self, channels: int, stride: int, downsample: bool, layout: str = "NCHW", **kwargs
    ):
        super().__init__(**kwargs)
        self.body = nn.HybridSequential()
        self.body.add(_conv(layout, channels, 3, stride, 1), _bn(layout), nn.Activation("relu"))
        self.body.add(_conv(layout, channels, 3, 1, 1), _last_bn(layout))
        self.downsample = _shortcut(channels, stride, layout) if downsample else None

    def hybrid_forward(self, F, x):
        residual = self.downsample(x) if self.downsample is not None else x
        return F.Activation(self.body(x) + residual, act_type="relu")


class Bottleneck(nn.HybridBlock):
    expansion = 4

    def __init__(
        self, channels: int, stride: int, downsample: bool, layout: str = "NCHW", **kwargs
    ):
        super().__init__(**kwargs)
        mid = channels // self.expansion
        self.body = nn.HybridSequential()
        self.body.add(_conv(layout, mid, 1), _bn(layout), nn.Activation("relu"))
        # v1.5: the stride is on the 3x3 convolution.
        self.body.add(_conv(layout, mid, 3, stride, 1), _bn(layout), nn.Activation("relu"))
        self.body.add(_conv(layout, channels, 1), _last_bn(layout))
        self.downsample = _shortcut(channels, stride, layout) if downsample else None

    def hybrid_forward(self, F, x):
        residual = self.downsample(x) if self.downsample is not None else x
        return F.Activation(self.body(x) + residual, act_type="relu")


def _shortcut(channels: int, stride: int, layout: str) -> nn.HybridSequential:
    seq = nn.HybridSequential()
    seq.add(_conv(layout, channels, 1, stride), _bn(layout))
    return seq


class ResNetV15(nn.HybridBlock):
    def __init__(
        self,
        depth: int,
        classes: int = 1000,
        width_multiplier: float = 1.0,
        layout: str = "NCHW",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if layout not in LAYOUTS:
            raise ValueError(f"layout {layout!r}: choose from {', '.join(LAYOUTS)}")
        self.layout = layout
        kind, layers = SPECS[depth]
        block = Bottleneck if kind == "bottleneck" else BasicBlock

        def width(c: int) -> int:
            return max(8, round(c * width_multiplier))

        stem = width(64)
        self.features = nn.HybridSequential()
        self.features.add(_conv(layout, stem, 7, 2, 3), _bn(layout), nn.Activation("relu"))
        self.features.add(nn.MaxPool2D(3, 2, 1, layout=layout))
        in_channels = stem
        for stage, blocks in enumerate(layers):
            channels = width(64 * 2**stage) * block.expansion
            for i in range(blocks):
                stride = 2 if i == 0 and stage > 0 else 1
                downsample = i == 0 and (stride != 1 or in_channels != channels)
                self.features.add(block(channels, stride, downsample, layout))
                in_channels = channels
        self.features.add(nn.GlobalAvgPool2D(layout=layout), nn.Flatten())
        self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        if self.layout == "NHWC":
            x = F.transpose(x, axes=(0, 2, 3, 1))  # the readers deliver NCHW
        return self.output(self.features(x))


def build_model(
    name: str, classes: int, width_multiplier: float, layout: str = "NCHW"
) -> ResNetV15:
    return ResNetV15(
        model_depth(name), classes=classes, width_multiplier=width_multiplier, layout=layout
    )
