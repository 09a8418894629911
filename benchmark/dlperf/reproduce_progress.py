"""What `dlperf reproduce` shows while it runs: each phase's current task, the hosts through it,
the elapsed time and an ETA from an earlier run, and at the end the sweep's summary table."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path


def clock(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 3600:
        return f"{seconds // 60}:{seconds % 60:02d}"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}"


class PhaseProgress:
    """What a phase does now: its current task, how many hosts are through it, the elapsed
    time and, where an earlier run finished the same phase, about how long is left."""

    def __init__(
        self, phase: str, expected_s: float | None = None, steps: Path | None = None
    ) -> None:
        self.phase, self.expected_s, self.steps = phase, expected_s, steps
        self.t0 = time.monotonic()
        self.started = time.time()
        self.task = "starting"
        self.hosts: set[str] = set()
        self.done: set[str] = set()
        self.failed: set[str] = set()

    def start_task(self, name: str) -> None:
        self.task, self.done = name, set()

    def host_done(self, host: str, outcome: str) -> None:
        self.hosts.add(host)
        self.done.add(host)
        if outcome in ("failed", "unreachable"):
            self.failed.add(host)

    def step(self) -> str:
        """The latest line a long task wrote to the steps file during this phase ("EPOCH TEXT"),
        with how long ago it began; scripts/build-vm-image.sh writes one per build step."""
        try:
            stamp, text = self.steps.read_text().splitlines()[-1].split(" ", 1)
        except (AttributeError, OSError, IndexError, ValueError):
            return ""
        if not stamp.isdigit() or int(stamp) < self.started - 1:
            return ""
        return f"{text} ({clock(time.time() - int(stamp))})"

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        parts = [self.task]
        step = self.step()
        if step:
            parts.append(step)
        if self.hosts:
            parts.append(f"{len(self.done)}/{len(self.hosts)} hosts")
        if self.failed:
            parts.append(f"{len(self.failed)} failed")
        parts.append(clock(elapsed))
        if self.expected_s:
            left = self.expected_s - elapsed
            parts.append(f"~{clock(left)} left" if left > 0 else "longer than the last run")
        return " | ".join(parts)


def follow(
    state: PhaseProgress,
    show: Callable[[PhaseProgress], None],
    say: Callable[[str, str], None] | None = None,
) -> dict:
    """run_playbook's on_task and on_host_done, keeping STATE current and showing it after each
    event; say(phase, task) also hears every task's name as it starts."""

    def on_task(task: str) -> None:
        state.start_task(task)
        if say:
            say(state.phase, task)
        show(state)

    def on_host_done(host: str, outcome: str) -> None:
        state.host_done(host, outcome)
        show(state)

    return {"on_task": on_task, "on_host_done": on_host_done}


def previous_durations(results: Path, run_id: str) -> dict[str, float]:
    """Per phase, its wall time in the latest other run that finished it: the ETA's basis."""
    latest: dict[str, tuple[str, float]] = {}
    for path in results.glob("*/reproduce.json"):
        if path.parent.name == run_id:
            continue
        try:
            phases = json.loads(path.read_text()).get("phases", {})
        except (OSError, ValueError):
            continue
        for name, p in phases.items():
            finished = p.get("status") == "ok" and not p.get("resumed") and p.get("finished")
            if finished and (name not in latest or finished > latest[name][0]):
                latest[name] = (finished, float(p["duration_s"]))
    return {name: duration for name, (_, duration) in latest.items()}


def milestone(text: str) -> bool:
    """Whether a progress text is a phase's start, skip or end (not a task's name)."""
    return (
        bool(re.match(r"\S+\.yml: starting", text))
        or text.endswith(": skipped")  # not a task named "... is skipped"
        or (text.startswith("done in "))
    )


def results_table(run_dir: Path) -> list[str]:
    """The sweep's summary as the report computed it (report/summary.json), one row per point:
    throughput, its speedup and scaling efficiency over the smallest point, then time to accuracy
    and its speedup."""
    try:
        rows = json.loads((run_dir / "report" / "summary.json").read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return []

    def num(value, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    lines = [f"{'nodes':>5} {'workers':>7} {'img/s':>9} {'speedup':>7} {'efficiency':>10}  "
             f"{'time to accuracy':>16} {'speedup':>7}"]  # fmt: skip
    for r in rows:
        tta = r.get("time_to_accuracy_s")
        cells = [
            f"{r['nodes']:>5}",
            f"{r.get('workers') or '-':>7}",
            f"{num(r.get('throughput_img_per_s'), '.1f'):>9}",
            f"{num(r.get('throughput_speedup'), '.2f'):>7}",
            f"{num(r.get('throughput_efficiency'), '.0%'):>10} ",
            f"{clock(tta) if tta is not None else '-':>16}",
            f"{num(r.get('speedup'), '.2f'):>7}",
        ]
        if r.get("status") != "ok":
            cells.append(f"({r.get('status')})")
        lines.append(" ".join(cells))
    return lines


def with_display(
    run: Callable[[Callable[[str, str], None], Callable[[PhaseProgress], None]], dict],
    title: str,
    quiet: bool = False,
    line_every_s: float = 60,
) -> dict:
    """Call run(progress, live) with a live display on a terminal (rich, refreshed every 2 s)
    or plain timestamped lines (milestones, and the current line every LINE_EVERY_S); its
    result."""
    from dlperf.progress import interactive

    t0 = time.monotonic()

    def stamp() -> str:
        return f"[{time.strftime('%H:%M:%S')} +{time.monotonic() - t0:5.0f}s]"

    # The phase now running; a thread refreshes its line (a long task sends no events).
    current: list[PhaseProgress] = []
    stop = threading.Event()

    def track(state: PhaseProgress) -> None:
        current[:] = [state]

    def every(seconds: float, show: Callable[[PhaseProgress], None]) -> threading.Thread:
        def loop() -> None:
            while not stop.wait(seconds):
                if current:
                    show(current[0])

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread

    try:
        if not quiet and interactive():
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            console = Console(stderr=True)
            with Progress(SpinnerColumn(), TimeElapsedColumn(), TextColumn("{task.description}"),
                          console=console, transient=True) as bar:  # fmt: skip
                shown = bar.add_task(title, total=None)

                def live(state: PhaseProgress) -> None:
                    track(state)
                    bar.update(shown, description=f"{state.phase}: {state.line()}")

                def log(phase: str, text: str) -> None:
                    if milestone(text):
                        console.log(f"{phase}: {text}")

                every(2, live)
                return run(log, live)
        else:

            def line(phase: str, text: str) -> None:
                print(f"{stamp()} {phase}: {text}", flush=True)

            def plain(phase: str, text: str) -> None:
                if milestone(text):
                    line(phase, text)

            every(line_every_s, lambda state: line(state.phase, state.line()))
            return run(plain, track)
    finally:
        stop.set()
