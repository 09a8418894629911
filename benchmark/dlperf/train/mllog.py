"""MLPerf-style log of a run through mlperf_logging.mllog (rank 0 only)."""

from __future__ import annotations

from pathlib import Path

from mlperf_logging import mllog
from mlperf_logging.mllog import constants as c


class MLLog:
    def __init__(self, path: Path, enabled: bool):
        self.enabled = enabled
        if enabled:
            path.parent.mkdir(parents=True, exist_ok=True)
            # stack offset: record the caller of MLLog, not this wrapper, as the event source.
            mllog.config(filename=str(path), default_stack_offset=3)
            self.logger = mllog.get_mllogger()

    def _event(self, kind: str, key: str, value=None, metadata=None) -> None:
        if self.enabled:
            getattr(self.logger, kind)(key=key, value=value, metadata=metadata)

    def run_start(self, cfg, world: int) -> None:
        self._event("event", c.SUBMISSION_BENCHMARK, c.RESNET)
        self._event("event", c.GLOBAL_BATCH_SIZE, cfg.batch_size * world)
        self._event("event", c.OPT_NAME, "sgd")
        self._event("event", c.OPT_BASE_LR, cfg.lr_per_256 * cfg.batch_size * world / 256)
        self._event("event", c.OPT_WEIGHT_DECAY, cfg.weight_decay)
        self._event("event", "opt_momentum", cfg.momentum)  # mllog has no SGD momentum key
        self._event("event", c.OPT_LR_WARMUP_EPOCHS, cfg.warmup_epochs)
        self._event("event", c.MODEL_BN_SPAN, cfg.batch_size)
        self._event("event", "label_smoothing", cfg.label_smoothing)
        self._event("start", c.RUN_START)

    def epoch_start(self, epoch: int) -> None:
        self._event("start", c.EPOCH_START, metadata={c.EPOCH_NUM: epoch})

    def epoch_stop(self, epoch: int) -> None:
        self._event("end", c.EPOCH_STOP, metadata={c.EPOCH_NUM: epoch})

    def eval_accuracy(self, epoch: int, top1: float) -> None:
        self._event("event", c.EVAL_ACCURACY, top1, metadata={c.EPOCH_NUM: epoch})

    def run_stop(self, status: str) -> None:
        self._event(
            "end", c.RUN_STOP, metadata={"status": "success" if status == "ok" else "aborted"}
        )
