"""The MXNet engine: Gluon ResNet v1.5, Horovod's DistributedTrainer, MXNet's record iterator.

Mixed precision is MXNet's AMP (NVIDIA's MXNet recipe offers it as `--amp`; its default casts
the network to float16 with multi-precision SGD and no loss scaling): the weights stay float32,
AMP casts each operator's inputs to float16 (GPU) or bfloat16 (CPU, oneDNN) where that is safe
and keeps the rest in float32, and a dynamic loss scaler scales the loss before the backward
pass, skips a step whose gradients overflowed and lowers the scale (float16 needs it; bfloat16
runs it too, harmlessly). The loss and its softmax are computed in float32."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from dlperf.data.recordio import class_count
from dlperf.train.config import TrainConfig
from dlperf.train.engine import Datasets, decode_threads
from dlperf.train.mxnet import (
    BFLOAT16_ON_GPU,
    FLOAT16_ON_CPU,
    NHWC_ON_CPU,
    device_context,
    installed_dist,
)
from dlperf.train.mxnet.comm import make_comm
from dlperf.train.mxnet.data import (
    RecordData,
    SyntheticData,
    classes_in,
    count_records,
    partition_steps,
)
from dlperf.train.mxnet.model import build_model, initializer
from dlperf.train.schedule import WarmupCosine
from dlperf.usage import UsageError


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


class MXNetEngine:
    name = "mxnet"

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.comm = make_comm()
        self.rank, self.size, self.local_rank = self.comm.rank, self.comm.size, self.comm.local_rank
        self.ctx = device_context(cfg.device, self.local_rank)
        self.device = "gpu" if self.ctx.device_type == "gpu" else "cpu"
        on_gpu = self.device == "gpu"
        self.dtype = ("float16" if on_gpu else "float32") if cfg.dtype == "auto" else cfg.dtype
        if self.dtype == "float16" and not on_gpu:
            raise UsageError(FLOAT16_ON_CPU)
        if self.dtype == "bfloat16" and on_gpu:
            raise UsageError(BFLOAT16_ON_GPU)
        # NCHW unless asked: NHWC is cuDNN's (MXNet has no NHWC convolution on CPU), and pays off
        # with float16 on Tensor Cores, as NVIDIA's recipe runs it.
        self.layout = "NCHW" if cfg.layout == "auto" else cfg.layout
        if self.layout == "NHWC" and not on_gpu:
            raise UsageError(NHWC_ON_CPU)
        self.precision = self.dtype
        self.amp = None
        if self.dtype != "float32":
            from mxnet.contrib import amp

            amp.init(target_dtype=self.dtype)  # before the network exists: it patches the ops
            self.amp = amp
        self.trainer, self.skipped_steps = None, 0
        self.threads = decode_threads(cfg, self.comm.local_size)
        mx.random.seed(cfg.seed + self.rank)
        np.random.seed(cfg.seed + self.rank)

    def hostnames(self) -> list[str]:
        return self.comm.hostnames()

    def versions(self) -> dict:
        return {
            "framework": "mxnet",
            "mxnet": _version(installed_dist()),
            "horovod": _version("horovod"),
            "mixed_precision": (
                f"MXNet AMP ({self.dtype}), dynamic loss scaling" if self.amp else None
            ),
            "layout": self.layout,
            "loader": "synthetic" if self.cfg.synthetic else "mxnet ImageRecordIter",
        }

    # ---- data --------------------------------------------------------------------------
    def datasets(self) -> Datasets:
        cfg, world = self.cfg, self.size
        if cfg.synthetic:
            classes = cfg.classes or 1000
            per_epoch = cfg.iterations if cfg.mode == "throughput" else 10
            train = SyntheticData(
                cfg.batch_size, cfg.image_size, classes, per_epoch, self.ctx, cfg.seed
            )
            return Datasets(train, None, classes, per_epoch, per_epoch * cfg.batch_size * world, 0)
        path = Path(cfg.data)
        classes = cfg.classes or class_count(path, classes_in)
        samples = count_records(path)
        steps = partition_steps(path, samples, cfg.batch_size, world)
        train = RecordData(
            path, cfg.batch_size, cfg.image_size, True, self.rank, world, self.threads, cfg.seed,
            steps=steps,
        )  # fmt: skip
        val = None
        if cfg.val_data:
            val = RecordData(
                Path(cfg.val_data),
                cfg.batch_size,
                cfg.image_size,
                False,
                self.rank,
                world,
                self.threads,
            )
        eval_samples = count_records(Path(cfg.val_data)) if cfg.val_data else 0
        return Datasets(train, val, classes, steps, samples, eval_samples)

    # ---- model + optimiser -------------------------------------------------------------
    def build(self, classes: int, schedule: WarmupCosine) -> None:
        cfg = self.cfg
        self.classes, self.schedule = classes, schedule
        net = build_model(cfg.model, classes, cfg.width_multiplier, self.layout)
        net.initialize(initializer(), ctx=self.ctx)
        net.hybridize(static_alloc=True, static_shape=True)
        # No weight decay on batch-norm parameters and biases (NVIDIA's recipe).
        for _, p in net.collect_params(".*gamma|.*beta|.*bias").items():
            p.wd_mult = 0.0
        opt = {
            "learning_rate": schedule(0),
            "momentum": cfg.momentum,
            "wd": cfg.weight_decay,
        }
        # Initialise the deferred shapes, then make every rank start from rank 0's weights.
        net(mx.nd.zeros((1, 3, cfg.image_size, cfg.image_size), ctx=self.ctx))
        params = net.collect_params()
        self.comm.broadcast_parameters(params)
        if self.comm.horovod is not None:
            hvd = self.comm.horovod
            # float16: gradients travel in float16 (Horovod's compression), the volume the
            # seed's runs and dlperf model's float16 assume; AMP's weights and grads are float32.
            compression = hvd.Compression.fp16 if self.dtype == "float16" else hvd.Compression.none
            trainer = hvd.DistributedTrainer(params, "sgd", opt, compression=compression)
        else:
            trainer = gluon.Trainer(params, "sgd", opt)
        if self.amp:
            # The loss scaler checks the gradients after Horovod's allreduce: every rank sees
            # the same sums, so all of them skip (or take) the same steps.
            self.amp.init_trainer(trainer)
            self._count_skipped_steps(trainer._amp_loss_scaler)
        self.net, self.trainer = net, trainer
        self.loss_fn = gluon.loss.SoftmaxCrossEntropyLoss(sparse_label=False)

    def _count_skipped_steps(self, scaler) -> None:
        """MXNet's LossScaler decides in has_overflow whether the trainer skips the step (and
        halves the scale); it keeps no count, so this wraps that one call."""
        check = scaler.has_overflow

        def has_overflow(params):
            overflow = check(params)
            self.skipped_steps += int(overflow)
            return overflow

        scaler.has_overflow = has_overflow

    def loss_scaling(self) -> dict | None:
        if not self.amp or self.trainer is None:
            return None
        scale = float(self.trainer._amp_loss_scaler.loss_scale)
        return {"scale": scale, "skipped_steps": self.skipped_steps}

    # ---- steps -------------------------------------------------------------------------
    def step(self, batch, step: int) -> None:
        cfg, classes = self.cfg, self.classes
        data = batch.data.as_in_context(self.ctx)
        label = batch.label.as_in_context(self.ctx)
        smooth = mx.nd.one_hot(
            label,
            classes,
            on_value=1 - cfg.label_smoothing + cfg.label_smoothing / classes,
            off_value=cfg.label_smoothing / classes,
        )
        self.trainer.set_learning_rate(self.schedule(step))
        with autograd.record():
            # softmax and the loss in fp32, whatever the network computes in
            loss = self.loss_fn(self.net(data).astype("float32", copy=False), smooth)
            if self.amp:
                with self.amp.scale_loss(loss, self.trainer) as scaled:
                    autograd.backward(scaled)
        if not self.amp:
            loss.backward()
        self.trainer.step(data.shape[0])

    def images(self, batch) -> int:
        return batch.data.shape[0]

    def synchronize(self) -> None:
        mx.nd.waitall()

    def barrier(self) -> None:
        self.comm.sum(np.zeros(1))

    def evaluate(self, val) -> float:
        correct = total = 0.0
        for batch in val:
            data = batch.data.as_in_context(self.ctx)
            n = batch.valid
            # float32 before argmax: its indices come in the input's type, and float16 holds
            # whole numbers exactly only up to 2048 (AMP leaves the logits in float16)
            pred = self.net(data).astype("float32").argmax(axis=1)[:n]
            label = batch.label.as_in_context(self.ctx)[:n]
            correct += float((pred == label).sum().asscalar())
            total += n
        summed = self.comm.sum(np.array([correct, total]))
        return float(summed[0] / max(summed[1], 1.0))

    def fingerprint(self) -> np.ndarray:
        """Sum and sum of squares of every parameter, in a fixed order (bitwise-comparable)."""
        values = []
        for _, p in sorted(self.net.collect_params().items()):
            a = p.data().asnumpy().astype(np.float64)
            values += [a.sum(), (a * a).sum()]
        return np.array(values)

    def gather(self, row: np.ndarray) -> np.ndarray:
        return self.comm.gather(row)

    def close(self, ok: bool) -> None:
        # Called after rank 0 has written result.json. Every rank waits for it: a run that
        # missed its target exits 3 on every rank, and launchers (horovodrun, mpirun, srun
        # --kill-on-bad-exit) stop the other ranks when the first exits non-zero. After a
        # failure, no barrier: the peers may never reach it.
        if ok:
            self.barrier()


def create(cfg: TrainConfig) -> MXNetEngine:
    return MXNetEngine(cfg)
