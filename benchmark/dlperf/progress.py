"""Progress of long work (epochs, sweep points): a rich display on a terminal, plain lines in
logs and CI (or always, with DLPERF_QUIET=1)."""

from __future__ import annotations

import os
import sys


def interactive() -> bool:
    return sys.stderr.isatty() and os.environ.get("DLPERF_QUIET", "") in ("", "0")


class EpochProgress:
    def __init__(self, total: int, enabled: bool, label: str = "epochs"):
        self.enabled = enabled
        self._bar = None
        if enabled and interactive():
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(label, total=total)

    def update(self, done: int, message: str) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(self._task, completed=done, description=message)
        else:
            print(message, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
