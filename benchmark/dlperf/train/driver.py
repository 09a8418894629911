"""One training run, whatever the framework: initialise the engine, time it, write the result.

Throughput mode times ``iterations - warmup_iterations`` steps after a device synchronisation;
the first step (graph capture, torch.compile, cuDNN autotuning) is timed on its own and
recorded as ``first_step_s``. Time-to-accuracy mode trains epoch by epoch, evaluates after each,
and stops at the target; its clock starts after initialisation (data, model, process group),
which is recorded apart as ``init_time_s``.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import asdict
from pathlib import Path

from dlperf.progress import EpochProgress
from dlperf.results import Result, provenance, write_result
from dlperf.train import mllog
from dlperf.train.config import TrainConfig
from dlperf.train.engine import Engine, load_engine
from dlperf.train.schedule import WarmupCosine


def schedule_for(cfg: TrainConfig, world: int, steps_per_epoch: int) -> WarmupCosine:
    global_batch = cfg.batch_size * world
    if cfg.mode == "throughput":
        total, warmup = cfg.iterations, cfg.warmup_iterations
    else:
        total = steps_per_epoch * cfg.max_epochs
        warmup = round(cfg.warmup_epochs * steps_per_epoch)
    return WarmupCosine.for_batch(cfg.lr_per_256, global_batch, warmup, total)


class Driver:
    def __init__(self, cfg: TrainConfig, engine: Engine):
        self.cfg, self.engine = cfg, engine
        self.is_root = engine.rank == 0

    def run(self) -> Result:
        cfg, eng = self.cfg, self.engine
        t_init = time.perf_counter()
        hosts = eng.hostnames()
        result = Result(
            status="failed",
            mode=cfg.mode,
            world_size=eng.size,
            nodes=len(set(hosts)),
            backend=eng.name,
            precision=eng.precision,
            device=eng.device,
            target_top1=cfg.target_top1 if cfg.mode == "tta" else None,
            hyperparameters={
                k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()
            },
            provenance=provenance(hosts, eng.versions()),
        )
        log = mllog.MLLog(cfg.output / "mllog.txt", enabled=self.is_root)
        start = t_init
        try:
            data = eng.datasets()
            eng.build(data.classes, schedule_for(cfg, eng.size, data.steps_per_epoch))
            eng.barrier()
            result.init_time_s = time.perf_counter() - t_init
            log.run_start(cfg, eng.size)
            start = time.perf_counter()
            if cfg.mode == "throughput":
                self._throughput(data, result)
            else:
                progress = EpochProgress(cfg.max_epochs, enabled=self.is_root)
                try:
                    self._epochs(data, start, log, result, progress)
                finally:
                    progress.close()
            result.param_fingerprints = eng.gather(eng.fingerprint()).tolist()
            result.status = "ok"
        except Exception as exc:  # recorded in result.json, then re-raised for the exit code
            result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
            raise
        finally:
            result.wall_time_s = time.perf_counter() - start
            log.run_stop(result.status)
            if self.is_root:
                write_result(cfg.output / "result.json", result)
            eng.close()
        return result

    def _timed_step(self, batch, step: int, result: Result) -> None:
        eng = self.engine
        if step == 0:
            t0 = time.perf_counter()
            eng.step(batch, 0)
            eng.synchronize()
            result.first_step_s = time.perf_counter() - t0
        else:
            eng.step(batch, step)

    def _throughput(self, data, result: Result) -> None:
        cfg, eng = self.cfg, self.engine
        step, t0 = 0, None
        while step < cfg.iterations:
            for batch in data.train:
                if step == cfg.warmup_iterations:
                    eng.synchronize()
                    t0 = time.perf_counter()
                self._timed_step(batch, step, result)
                step += 1
                if step >= cfg.iterations:
                    break
        eng.synchronize()
        elapsed = time.perf_counter() - t0
        timed = cfg.iterations - cfg.warmup_iterations
        result.throughput_img_per_s = timed * cfg.batch_size * eng.size / elapsed
        result.throughput_img_per_s_per_worker = result.throughput_img_per_s / eng.size
        if self.is_root:
            print(
                f"throughput: {result.throughput_img_per_s:.1f} img/s "
                f"over {eng.size} worker(s) ({eng.name}, {eng.device}, {eng.precision})",
                flush=True,
            )

    def _epochs(self, data, start: float, log, result: Result, progress) -> None:
        cfg, eng = self.cfg, self.engine
        step = images = 0
        train_time = 0.0
        for epoch in range(1, cfg.max_epochs + 1):
            log.epoch_start(epoch)
            t_epoch = time.perf_counter()
            for batch in data.train:
                self._timed_step(batch, step, result)
                step += 1
                images += eng.images(batch) * eng.size
            eng.synchronize()
            train_time += time.perf_counter() - t_epoch
            log.epoch_stop(epoch)
            top1 = eng.evaluate(data.val)
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
            result.throughput_img_per_s / eng.size if result.throughput_img_per_s else None
        )


def train(cfg: TrainConfig) -> Result:
    cfg.output.mkdir(parents=True, exist_ok=True)
    return Driver(cfg, load_engine(cfg)).run()
