#!/usr/bin/env python3
"""Harness overhead of `dlperf train`: its step rate against a bare Gluon loop on the same model,
batch and synthetic data, in the same process. Prints img/s of both and the ratio.

    .venv/bin/python benchmarks/train_overhead.py --model resnet50_v1.5 --image-size 224 \
        --batch-size 32 --iterations 30 --warmup-iterations 5

Goal: dlperf within 2 % of the bare loop (ratio >= 0.98). Both run the same MXNet settings
(same environment), alternating twice to average out drift.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")
os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))

import mxnet as mx
from dlperf.train.config import TrainConfig
from dlperf.train.driver import train
from dlperf.train.mxnet.model import build_model, initializer
from mxnet import autograd, gluon


def bare_loop(args) -> float:
    ctx = mx.cpu()
    net = build_model(args.model, args.classes, args.width_multiplier)
    net.initialize(initializer(), ctx=ctx)
    net.hybridize(static_alloc=True, static_shape=True)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.875})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    data = mx.nd.random.normal(
        shape=(args.batch_size, 3, args.image_size, args.image_size), ctx=ctx
    )
    label = mx.nd.random.randint(0, args.classes, shape=(args.batch_size,), ctx=ctx).astype(
        "float32"
    )
    for step in range(args.iterations):
        if step == args.warmup_iterations:
            mx.nd.waitall()
            t0 = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(args.batch_size)
    mx.nd.waitall()
    return (args.iterations - args.warmup_iterations) * args.batch_size / (time.perf_counter() - t0)


def dlperf_loop(args) -> float:
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(
            output=Path(out),
            model=args.model,
            width_multiplier=args.width_multiplier,
            image_size=args.image_size,
            batch_size=args.batch_size,
            classes=args.classes,
            iterations=args.iterations,
            warmup_iterations=args.warmup_iterations,
            device="cpu",
        )
        return train(cfg).throughput_img_per_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet50_v1.5")
    p.add_argument("--width-multiplier", type=float, default=1.0)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--warmup-iterations", type=int, default=5)
    p.add_argument("--repeats", type=int, default=2)
    args = p.parse_args()
    bare, harness = [], []
    for _ in range(args.repeats):
        bare.append(bare_loop(args))
        harness.append(dlperf_loop(args))
    b, h = sum(bare) / len(bare), sum(harness) / len(harness)
    print(
        f"model {args.model} width {args.width_multiplier} "
        f"{args.image_size}px batch {args.batch_size}"
    )
    print(f"bare gluon loop : {b:8.2f} img/s  (runs: {', '.join(f'{x:.2f}' for x in bare)})")
    print(f"dlperf train    : {h:8.2f} img/s  (runs: {', '.join(f'{x:.2f}' for x in harness)})")
    print(f"ratio dlperf/bare: {h / b:.4f}  (overhead {100 * (1 - h / b):+.2f} %)")


if __name__ == "__main__":
    main()
