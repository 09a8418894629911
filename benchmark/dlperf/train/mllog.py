"""The MLPerf training log of a run, through mlperf_logging.mllog (rank 0 only).

It carries every key MLPerf's compliance checker requires of a closed-division ResNet log
(ruleset 0.7.0, the earliest that reads this JSON format): the submission keys, cache_clear,
init_start/init_stop around initialisation, run_start/run_stop, epoch and eval intervals with
their epoch numbers, train_samples/eval_samples, and the SGD hyperparameters with the keys of
the schedule in use. The driver passes the times it measures, so result.json's time to
accuracy and the log's run_start..run_stop are the same milliseconds.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from mlperf_logging import mllog
from mlperf_logging.mllog import constants as c

ORG = "dlperf-cluster"


def now_ms() -> int:
    return int(time.time() * 1000)


class MLLog:
    def __init__(self, path: Path, enabled: bool):
        self.enabled = enabled
        self.stopped = False
        if enabled:
            path.parent.mkdir(parents=True, exist_ok=True)
            # A logger of our own whose one handler replaces the file: mllog's `filename` appends
            # (a second run into the same output would hold two runs) and adds a handler to its
            # shared logger at each call (a second log in one process would also go to the first).
            own = logging.getLogger("dlperf.mllog")
            for handler in list(own.handlers):
                own.removeHandler(handler)
                handler.close()
            own.addHandler(logging.FileHandler(path, mode="w", encoding="utf-8"))
            own.addHandler(logging.StreamHandler(sys.stdout))  # and in the run's log, as mllog's
            own.setLevel(logging.INFO)
            own.propagate = False
            self.logger = mllog.get_mllogger()
            if self.logger.logger is not own:  # mllog refuses its own logger a second time
                mllog.config(logger=own)
            # stack offset: record the caller of MLLog, not this wrapper, as the event source.
            mllog.config(default_stack_offset=3)

    def _event(self, kind: str, key: str, value=None, metadata=None, time_ms=None) -> None:
        if self.enabled:
            getattr(self.logger, kind)(key=key, value=value, metadata=metadata, time_ms=time_ms)

    def init_start(self, time_ms: int, platform: str, cache_cleared: bool) -> None:
        self._event("event", c.SUBMISSION_ORG, ORG, time_ms=time_ms)
        self._event("event", c.SUBMISSION_PLATFORM, platform, time_ms=time_ms)
        self._event("event", c.SUBMISSION_DIVISION, "closed", time_ms=time_ms)
        self._event("event", c.SUBMISSION_STATUS, "onprem", time_ms=time_ms)
        self._event("event", c.SUBMISSION_BENCHMARK, c.RESNET, time_ms=time_ms)
        # MLPerf clears the page cache before a run; dlperf reports whether it did.
        self._event("event", c.CACHE_CLEAR, cache_cleared, time_ms=time_ms)
        self._event("start", c.INIT_START, time_ms=time_ms)

    def hyperparameters(self, cfg, world: int, schedule, steps_per_epoch: int) -> None:
        self._event("event", c.SEED, cfg.seed)
        self._event("event", c.GLOBAL_BATCH_SIZE, cfg.batch_size * world)
        self._event("event", c.OPT_NAME, c.SGD)
        self._event("event", "sgd_opt_base_learning_rate", schedule.base_lr)
        self._event("event", "sgd_opt_weight_decay", cfg.weight_decay)
        self._event("event", "sgd_opt_momentum", cfg.momentum)
        self._event("event", c.OPT_LR_WARMUP_EPOCHS, cfg.warmup_epochs)
        self._event("event", c.MODEL_BN_SPAN, cfg.batch_size)
        self._event("event", "label_smoothing", cfg.label_smoothing)
        self._event("event", c.OPT_LR_DECAY_SCHEDULE, schedule.name)
        if schedule.name == "poly":  # the keys MLPerf's ResNet rules check for SGD
            self._event("event", "sgd_opt_end_learning_rate", schedule.end_lr)
            self._event("event", "sgd_opt_learning_rate_decay_poly_power", schedule.power)
            self._event("event", "sgd_opt_learning_rate_decay_steps", schedule.decay_steps)

    def init_stop(self, time_ms: int, train_samples: int, eval_samples: int) -> None:
        self._event("event", c.TRAIN_SAMPLES, train_samples, time_ms=time_ms)
        self._event("event", c.EVAL_SAMPLES, eval_samples, time_ms=time_ms)
        self._event("end", c.INIT_STOP, time_ms=time_ms)

    def run_start(self, time_ms: int) -> None:
        self._event("start", c.RUN_START, time_ms=time_ms)

    def epoch_start(self, epoch: int) -> None:
        self._event("start", c.EPOCH_START, metadata={c.EPOCH_NUM: epoch})

    def epoch_stop(self, epoch: int) -> None:
        self._event("end", c.EPOCH_STOP, metadata={c.EPOCH_NUM: epoch})

    def eval_start(self, epoch: int) -> None:
        self._event("start", c.EVAL_START, metadata={c.EPOCH_NUM: epoch})

    def eval_stop(self, epoch: int) -> None:
        self._event("end", c.EVAL_STOP, metadata={c.EPOCH_NUM: epoch})

    def eval_accuracy(self, epoch: int, top1: float) -> None:
        self._event("event", c.EVAL_ACCURACY, top1, metadata={c.EPOCH_NUM: epoch})

    def run_stop(self, status: str, time_ms: int | None = None) -> None:
        """Once: at the target (success), or when the run ends without it (aborted)."""
        if self.stopped:
            return
        self.stopped = True
        status = "success" if status == "ok" else "aborted"
        self._event("end", c.RUN_STOP, metadata={"status": status}, time_ms=time_ms)
