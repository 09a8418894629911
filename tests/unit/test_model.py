"""ResNet v1.5 architecture facts."""

from __future__ import annotations

import math

import mxnet as mx
import pytest
from dlperf.train.mxnet.model import Bottleneck, build_model
from dlperf.train.schedule import WarmupCosine


def trainable_parameters(net) -> int:
    net.initialize(ctx=mx.cpu())
    net(mx.nd.zeros((1, 3, 64, 64)))
    return sum(p.data().size for p in net.collect_params().values() if p.grad_req != "null")


def test_resnet50_v1_5_has_the_published_parameter_count():
    # 25,557,032 trainable parameters (the count published for ResNet-50 v1/v1.5).
    assert trainable_parameters(build_model("resnet50_v1.5", 1000, 1.0)) == 25_557_032


def test_downsampling_bottleneck_strides_on_the_3x3_convolution():
    block = Bottleneck(512, stride=2, downsample=True)
    convs = [layer for layer in block.body if isinstance(layer, mx.gluon.nn.Conv2D)]
    assert [c._kwargs["stride"] for c in convs] == [(1, 1), (2, 2), (1, 1)]
    assert [c._kwargs["kernel"] for c in convs] == [(1, 1), (3, 3), (1, 1)]


def test_width_multiplier_shrinks_the_model():
    full = trainable_parameters(build_model("resnet18_v1.5", 10, 1.0))
    tiny = trainable_parameters(build_model("resnet18_v1.5", 10, 0.25))
    assert tiny < full / 10


def test_unknown_model_is_refused():
    with pytest.raises(ValueError, match=r"resnet51_v1\.5"):
        build_model("resnet51_v1.5", 10, 1.0)


def test_learning_rate_warms_up_linearly_then_decays_by_cosine():
    sched = WarmupCosine.for_batch(0.256, global_batch=1024, warmup_steps=10, total_steps=110)
    assert sched.base_lr == pytest.approx(1.024)
    assert sched(0) == pytest.approx(1.024 / 10)
    assert sched(9) == pytest.approx(1.024)
    assert sched(60) == pytest.approx(1.024 / 2)
    assert sched(110) == pytest.approx(0.0)


def test_weights_start_as_nvidias_recipe_he_normal_over_the_fan_in():
    from dlperf.train.mxnet.model import initializer

    mx.random.seed(3)
    net = build_model("resnet50_v1.5", 1000, 1.0)
    net.initialize(initializer())
    net(mx.nd.zeros((1, 3, 64, 64)))
    stem = net.features[0].weight.data().asnumpy()
    # 3 x 7 x 7 inputs per output: std sqrt(2 / 147)
    assert stem.std() == pytest.approx((2 / 147) ** 0.5, rel=0.05)
    blocks = [b for b in net.features if isinstance(b, Bottleneck)]
    assert len(blocks) == 16
    for block in blocks:  # each block starts as the identity
        last = block.body[-1]
        assert not last.gamma.data().asnumpy().any()
        assert not last.running_var.data().asnumpy().any()


def symbolic_shapes(net, image_size: int = 224) -> tuple[list[tuple], tuple]:
    """Parameter and output shapes by MXNet's shape inference: nothing is computed, so a
    network whose kernels this machine lacks (NHWC convolution is cuDNN's) can still be read."""
    out = net(mx.sym.var("data"))
    args, outs, _ = out.infer_shape(data=(2, 3, image_size, image_size))
    names = out.list_arguments()
    return [s for n, s in zip(names, args, strict=True) if n != "data"], outs[0]


def test_nhwc_network_is_the_same_network_with_channels_last():
    nchw, nchw_out = symbolic_shapes(build_model("resnet50_v1.5", 1000, 1.0))
    nhwc, nhwc_out = symbolic_shapes(build_model("resnet50_v1.5", 1000, 1.0, layout="NHWC"))
    assert nchw_out == nhwc_out == (2, 1000)  # the input stays NCHW; the network transposes it
    assert sum(math.prod(s) for s in nhwc) == 25_557_032
    assert len(nchw) == len(nhwc)
    convs = 0
    for a, b in zip(nchw, nhwc, strict=True):
        if len(a) == 4:  # convolution weights: OIHW against OHWI
            assert b == (a[0], a[2], a[3], a[1])
            convs += 1
        else:  # batch-norm gamma/beta and the dense layer
            assert a == b
    assert convs == 53


def test_nhwc_batch_norms_normalise_the_last_axis():
    net = build_model("resnet18_v1.5", 10, 0.25, layout="NHWC")
    axes = []
    net.apply(
        lambda b: axes.append(b._kwargs["axis"]) if isinstance(b, mx.gluon.nn.BatchNorm) else 0
    )
    assert len(axes) == 20 and set(axes) == {3}  # stem, 2 per block, 3 shortcuts
    with pytest.raises(ValueError, match="layout 'CHWN'"):
        build_model("resnet18_v1.5", 10, 0.25, layout="CHWN")


def test_synthetic_data_is_one_batch_per_seed_and_leaves_the_ranks_seeds_alone():
    from dlperf.train.mxnet.data import SyntheticData

    def batch(seed):
        b = next(iter(SyntheticData(4, 8, 10, 1, mx.cpu(), seed=seed)))
        return b.data.asnumpy(), b.label.asnumpy()

    # every rank builds the same batch from the run's seed; another seed, another batch
    assert all((a == b).all() for a, b in zip(batch(5), batch(5), strict=True))
    assert not (batch(5)[0] == batch(6)[0]).all()
    labels = batch(5)[1]
    assert labels.min() >= 0 and labels.max() < 10 and (labels == labels.round()).all()
    # what the engine seeded per rank (seed + rank) still decides the weights drawn afterwards
    draws = []
    for with_data in (False, True):
        mx.random.seed(5 + 1)  # rank 1's seed
        if with_data:
            batch(5)
        draws.append(mx.nd.random.normal(shape=(16,)).asnumpy())
    assert (draws[0] == draws[1]).all()
