"""One training run, whatever the framework: initialise the engine, time it, write the result.

Throughput mode times ``iterations - warmup_iterations`` steps after a device synchronisation;
the first step (graph capture, torch.compile, cuDNN autotuning) is timed on its own and
recorded as ``first_step_s``. Time-to-accuracy mode trains epoch by epoch, evaluates after each,
and stops at the target; its clock starts after initialisation (data, model, process group),
which is recorded apart as ``init_time_s``; the clock stops when the target is reached (MLPerf's
run_start..run_stop, in the same milliseconds as the log).
"""

from __future__ import annotations

import itertools
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import numpy as np

from dlperf.data import recordio
from dlperf.progress import EpochProgress
from dlperf.results import Result, provenance, write_result
from dlperf.train import mllog
from dlperf.train.config import TrainConfig
from dlperf.train.engine import Engine, load_engine
from dlperf.train.schedule import WarmupCosine, make_schedule

THROUGHPUT_WINDOWS = 5  # timed windows per throughput run: median and spread


def schedule_for(cfg: TrainConfig, world: int, steps_per_epoch: int) -> WarmupCosine:
    global_batch = cfg.batch_size * world
    if cfg.mode == "throughput":
        total, warmup = cfg.iterations, cfg.warmup_iterations
    else:
        total = steps_per_epoch * cfg.max_epochs
        warmup = round(cfg.warmup_epochs * steps_per_epoch)
    return make_schedule(cfg.lr_schedule, cfg.lr_per_256, global_batch, warmup, total)


class Driver:
    def __init__(self, cfg: TrainConfig, engine_factory=load_engine):
        self.cfg, self.engine_factory = cfg, engine_factory

    def run(self) -> Result:
        cfg = self.cfg
        init_ms, t_init = mllog.now_ms(), time.perf_counter()
        eng: Engine = self.engine_factory(cfg)
        self.engine, self.is_root = eng, eng.rank == 0
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
            }
            | {"threads": eng.threads},
            provenance=provenance(hosts, eng.versions()),
        )
        if not cfg.synthetic:
            result.provenance["data"] = {
                "train": recordio.identity(Path(cfg.data)),
                "val": recordio.identity(Path(cfg.val_data)) if cfg.val_data else None,
            }
        # Only now: an engine that refuses the device leaves nothing behind.
        cfg.output.mkdir(parents=True, exist_ok=True)
        log = mllog.MLLog(cfg.output / "mllog.txt", enabled=self.is_root)
        platform = f"{len(set(hosts))}x{eng.versions().get('gpu_model') or eng.device}"
        log.init_start(init_ms, platform, cache_cleared=False)
        start = t_init
        try:
            data = eng.datasets()
            schedule = schedule_for(cfg, eng.size, data.steps_per_epoch)
            log.hyperparameters(cfg, eng.size, schedule, data.steps_per_epoch)
            eng.build(data.classes, schedule)
            eng.barrier()
            start_ms, start = mllog.now_ms(), time.perf_counter()
            result.init_time_s = start - t_init
            result.provenance["run_start_ms"] = start_ms  # epoch: a launcher's start-up cost
            log.init_stop(start_ms, data.train_samples, data.eval_samples)
            log.run_start(start_ms)
            if cfg.mode == "throughput":
                self._throughput(data, result)
            else:
                progress = EpochProgress(cfg.max_epochs, enabled=self.is_root)
                try:
                    self._epochs(data, (start_ms, start), log, result, progress)
                finally:
                    progress.close()
            result.param_fingerprints = eng.gather(eng.fingerprint()).tolist()
            result.loss_scaling = eng.loss_scaling()
            skipped = (result.loss_scaling or {}).get("skipped_steps")
            if skipped and self.is_root:
                print(
                    f"loss scaler: {skipped} step(s) skipped on overflowing gradients "
                    f"(scale now {result.loss_scaling['scale']:g})",
                    flush=True,
                )
            result.status = "ok"
        except Exception as exc:  # recorded in result.json, then re-raised for the exit code
            result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
            raise
        finally:
            result.wall_time_s = time.perf_counter() - start
            log.run_stop("ok" if result.status == "ok" and cfg.mode == "throughput" else "failed")
            if self.is_root:
                write_result(cfg.output / "result.json", result)
            eng.close(ok=result.status == "ok")
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
        """Warm-up untimed; then a barrier, and the timed steps in windows (each closed by a
        device synchronisation) whose per-rank rates every rank contributes."""
        cfg, eng = self.cfg, self.engine
        timed = cfg.iterations - cfg.warmup_iterations
        windows = min(THROUGHPUT_WINDOWS, timed)
        bounds = [cfg.warmup_iterations + round(i * timed / windows) for i in range(windows + 1)]
        marks: list[float] = []
        step = 0
        while step < cfg.iterations:
            for batch in data.train:
                if step == cfg.warmup_iterations:
                    eng.synchronize()
                    eng.barrier()  # every rank starts its clock together
                    marks.append(time.perf_counter())
                elif step in bounds:
                    eng.synchronize()
                    marks.append(time.perf_counter())
                self._timed_step(batch, step, result)
                step += 1
                if step >= cfg.iterations:
                    break
        eng.synchronize()
        marks.append(time.perf_counter())
        spans = [b - a for a, b in itertools.pairwise(marks)]
        steps = [b - a for a, b in itertools.pairwise(bounds)]
        # Per rank: the whole timed span, then each window's seconds.
        table = eng.gather(np.array([sum(spans), *spans]))
        slowest = table.max(axis=0)  # a data-parallel job goes at its slowest rank's pace
        images = cfg.batch_size * eng.size
        result.throughput_img_per_s = timed * images / slowest[0]
        result.throughput_img_per_s_per_worker = result.throughput_img_per_s / eng.size
        result.throughput_windows_img_per_s = [
            n * images / t for n, t in zip(steps, slowest[1:], strict=True)
        ]
        result.throughput_median_img_per_s = float(np.median(result.throughput_windows_img_per_s))
        result.throughput_per_rank_img_per_s = [timed * cfg.batch_size / t for t in table[:, 0]]
        if self.is_root:
            rates = result.throughput_windows_img_per_s
            print(
                f"throughput: {result.throughput_img_per_s:.1f} img/s "
                f"over {eng.size} worker(s) ({eng.name}, {eng.device}, {eng.precision}); "
                f"{len(rates)} windows: median {result.throughput_median_img_per_s:.1f}, "
                f"min {min(rates):.1f}, max {max(rates):.1f}",
                flush=True,
            )

    def _epochs(self, data, started: tuple[int, float], log, result: Result, progress) -> None:
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
            log.eval_start(epoch)
            top1 = eng.evaluate(data.val)
            log.eval_stop(epoch)
            log.eval_accuracy(epoch, top1)
            result.epochs, result.top1 = epoch, top1
            progress.update(epoch, f"epoch {epoch}: top-1 {top1:.4f} (target {cfg.target_top1})")
            if top1 >= cfg.target_top1:
                # MLPerf's clock stops at the target. Its time is run_start's plus the
                # monotonic clock's count: a step of the wall clock (NTP) during a run of hours
                # moves neither the result nor the log's run_start to run_stop.
                start_ms, start = started
                stop_ms = start_ms + round((time.perf_counter() - start) * 1000)
                log.run_stop("ok", stop_ms)
                result.reached_target = True
                result.time_to_accuracy_s = (stop_ms - start_ms) / 1000.0
                break
        else:
            result.reached_target = False
        result.throughput_img_per_s = images / train_time if train_time else None
        result.throughput_img_per_s_per_worker = (
            result.throughput_img_per_s / eng.size if result.throughput_img_per_s else None
        )


def train(cfg: TrainConfig) -> Result:
    return Driver(cfg).run()
