"""Progress of long work (epochs, sweep points): a rich display on a terminal, plain lines in
logs and CI (or always, with DLPERF_QUIET=1)."""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def point_progress(run_id: str, quiet: bool):
    """A callback (node count, state) for a sweep's points: a line per change when QUIET, or a
    status line on the terminal with a line kept for each point that ends."""
    if quiet:
        yield lambda n, state: print(f"sweep {run_id}: {n} node(s): {state}", flush=True)
        return
    from rich.console import Console

    console = Console(stderr=True)
    with console.status(f"sweep {run_id}") as status:

        def progress(n, state):
            status.update(f"sweep {run_id}: {n} node(s): {state}")
            if state != "running":
                console.log(f"{n} node(s): {state}")

        yield progress
