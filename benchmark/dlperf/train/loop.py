"""One training run: build the model, shard the data, train with Horovod, measure, report."""

from __future__ import annotations

import math
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from dlperf.progress import EpochProgress
from dlperf.results import Result, provenance, write_result
from dlperf.train import mllog
from dlperf.train.comm import make_comm
from dlperf.train.config import TrainConfig
from dlperf.train.data import RecordData, SyntheticData, classes_in, count_records
from dlperf.train.model import build_model
from dlperf.train.schedule import WarmupCosine


def _context(cfg: TrainConfig, local_rank: int):
    gpus = mx.context.num_gpus()
    if cfg.device == "gpu" and gpus == 0:
        raise RuntimeError("--device gpu but MXNet sees no GPU (CPU build or no driver)")
    if cfg.device == "gpu" or (cfg.device == "auto" and gpus > 0):
        return mx.gpu(local_rank % gpus)
    return mx.cpu()


def _fingerprint(net) -> np.ndarray:
    """Sum and sum of squares of every parameter, in a fixed order (bitwise-comparable)."""
    values = []
    for _, p in sorted(net.collect_params().items()):
        a = p.data().asnumpy().astype(np.float64)
        values += [a.sum(), (a * a).sum()]
    return np.array(values)


class Trainer:
    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.comm = make_comm()
        self.ctx = _context(cfg, self.comm.local_rank)
        on_gpu = self.ctx.device_type == "gpu"
        self.dtype = ("float16" if on_gpu else "float32") if cfg.dtype == "auto" else cfg.dtype
        self.is_root = self.comm.rank == 0
        mx.random.seed(cfg.seed + self.comm.rank)
        np.random.seed(cfg.seed + self.comm.rank)

    # ---- data --------------------------------------------------------------------------
    def _datasets(self):
        cfg, world = self.cfg, self.comm.size
        if cfg.synthetic:
            classes = cfg.classes or 1000
            per_epoch = cfg.iterations if cfg.mode == "throughput" else 10
            train = SyntheticData(cfg.batch_size, cfg.image_size, classes, per_epoch, self.ctx)
            return train, None, classes, per_epoch
        path = Path(cfg.data)
        classes = cfg.classes or classes_in(path)
        steps = max(1, math.ceil(count_records(path) / (cfg.batch_size * world)))
        train = RecordData(
            path, cfg.batch_size, cfg.image_size, True, self.comm.rank, world, cfg.threads, cfg.seed
        )
        val = None
        if cfg.val_data:
            val = RecordData(
                Path(cfg.val_data),
                cfg.batch_size,
                cfg.image_size,
                False,
                self.comm.rank,
                world,
                cfg.threads,
            )
        return train, val, classes, steps

    # ---- model + optimiser -------------------------------------------------------------
    def _build(self, classes: int, steps_per_epoch: int):
        cfg = self.cfg
        net = build_model(cfg.model, classes, cfg.width_multiplier)
        net.initialize(mx.init.MSRAPrelu(), ctx=self.ctx)
        if self.dtype == "float16":
            net.cast("float16")
        net.hybridize(static_alloc=True, static_shape=True)
        # No weight decay on batch-norm parameters and biases (NVIDIA's recipe).
        for _, p in net.collect_params(".*gamma|.*beta|.*bias").items():
            p.wd_mult = 0.0
        global_batch = cfg.batch_size * self.comm.size
        if cfg.mode == "throughput":
            total, warmup = cfg.iterations, cfg.warmup_iterations
        else:
            total = steps_per_epoch * cfg.max_epochs
            warmup = round(cfg.warmup_epochs * steps_per_epoch)
        self.schedule = WarmupCosine.for_batch(cfg.lr_per_256, global_batch, warmup, total)
        opt = {
            "learning_rate": self.schedule(0),
            "momentum": cfg.momentum,
            "wd": cfg.weight_decay,
            "multi_precision": self.dtype == "float16",
        }
        # Initialise the deferred shapes, then make every rank start from rank 0's weights.
        net(mx.nd.zeros((1, 3, cfg.image_size, cfg.image_size), ctx=self.ctx, dtype=self.dtype))
        params = net.collect_params()
        self.comm.broadcast_parameters(params)
        if self.comm.horovod is not None:
            trainer = self.comm.horovod.DistributedTrainer(params, "sgd", opt)
        else:
            trainer = gluon.Trainer(params, "sgd", opt)
        return net, trainer, global_batch

    # ---- steps -------------------------------------------------------------------------
    def _step(self, net, trainer, loss_fn, batch, classes: int, step: int) -> None:
        cfg = self.cfg
        data = batch.data.as_in_context(self.ctx).astype(self.dtype, copy=False)
        label = batch.label.as_in_context(self.ctx)
        smooth = mx.nd.one_hot(
            label,
            classes,
            on_value=1 - cfg.label_smoothing + cfg.label_smoothing / classes,
            off_value=cfg.label_smoothing / classes,
        ).astype(self.dtype, copy=False)
        trainer.set_learning_rate(self.schedule(step))
        with autograd.record():
            loss = loss_fn(net(data), smooth)
        loss.backward()
        trainer.step(data.shape[0])

    def _evaluate(self, net, val) -> float:
        correct = total = 0.0
        for batch in val:
            data = batch.data.as_in_context(self.ctx).astype(self.dtype, copy=False)
            n = batch.valid
            pred = net(data).argmax(axis=1).astype("float32")[:n]
            label = batch.label.as_in_context(self.ctx)[:n]
            correct += float((pred == label).sum().asscalar())
            total += n
        summed = self.comm.sum(np.array([correct, total]))
        return float(summed[0] / max(summed[1], 1.0))

    # ---- modes -------------------------------------------------------------------------
    def run(self) -> Result:
        cfg = self.cfg
        hosts = self.comm.hostnames()
        result = Result(
            status="failed",
            mode=cfg.mode,
            world_size=self.comm.size,
            nodes=len(set(hosts)),
            target_top1=cfg.target_top1 if cfg.mode == "tta" else None,
            hyperparameters={
                k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()
            },
            provenance=provenance(hosts),
        )
        log = mllog.MLLog(cfg.output / "mllog.txt", enabled=self.is_root)
        start = time.perf_counter()
        try:
            train, val, classes, steps_per_epoch = self._datasets()
            log.run_start(cfg, self.comm.size)
            net, trainer, global_batch = self._build(classes, steps_per_epoch)
            loss_fn = gluon.loss.SoftmaxCrossEntropyLoss(sparse_label=False)
            if cfg.mode == "throughput":
                self._throughput(net, trainer, loss_fn, train, classes, global_batch, result)
            else:
                progress = EpochProgress(cfg.max_epochs, enabled=self.is_root)
                try:
                    self._epochs(
                        net, trainer, loss_fn, train, val, classes, start, log, result, progress
                    )
                finally:
                    progress.close()
            result.param_fingerprints = self.comm.gather(_fingerprint(net)).tolist()
            result.status = "ok"
        except Exception as exc:  # recorded in result.json, then re-raised for the exit code
            result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
            raise
        finally:
            result.wall_time_s = time.perf_counter() - start
            log.run_stop(result.status)
            if self.is_root:
                write_result(cfg.output / "result.json", result)
        return result

    def _throughput(
        self, net, trainer, loss_fn, train, classes, global_batch, result: Result
    ) -> None:
        cfg = self.cfg
        step, t0 = 0, None
        while step < cfg.iterations:
            for batch in train:
                if step == cfg.warmup_iterations:
                    mx.nd.waitall()
                    t0 = time.perf_counter()
                self._step(net, trainer, loss_fn, batch, classes, step)
                step += 1
                if step >= cfg.iterations:
                    break
        mx.nd.waitall()
        elapsed = time.perf_counter() - t0
        timed = cfg.iterations - cfg.warmup_iterations
        result.throughput_img_per_s = timed * global_batch / elapsed
        result.throughput_img_per_s_per_worker = result.throughput_img_per_s / self.comm.size
        if self.is_root:
            print(
                f"throughput: {result.throughput_img_per_s:.1f} img/s "
                f"over {self.comm.size} worker(s)",
                flush=True,
            )

    def _epochs(
        self, net, trainer, loss_fn, train, val, classes, start, log, result, progress
    ) -> None:
        cfg = self.cfg
        step = images = 0
        train_time = 0.0
        for epoch in range(1, cfg.max_epochs + 1):
            log.epoch_start(epoch)
            t_epoch = time.perf_counter()
            for batch in train:
                self._step(net, trainer, loss_fn, batch, classes, step)
                step += 1
                images += batch.data.shape[0] * self.comm.size
            mx.nd.waitall()
            train_time += time.perf_counter() - t_epoch
            log.epoch_stop(epoch)
            top1 = self._evaluate(net, val)
            log.eval_accuracy(epoch, top1)
            result.epochs, result.top1 = epoch, top1
            progress.update(epoch, f"epoch {epoch}: top-1 {top1:.4f} (target {cfg.target_top1})")
            if top1 >= cfg.target_top1:
                result.reached_target = True
                result.time_to_accuracy_s = time.perf_counter() - start
                break
        else:
            result.reached_target = False
        result.throughput_img_per_s = images / train_time if train_time else None
        result.throughput_img_per_s_per_worker = (
            result.throughput_img_per_s / self.comm.size if result.throughput_img_per_s else None
        )


def train(cfg: TrainConfig) -> Result:
    cfg.output.mkdir(parents=True, exist_ok=True)
    return Trainer(cfg).run()
