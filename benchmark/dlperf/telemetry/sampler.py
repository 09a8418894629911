"""`dlperf telemetry`: sample every source at a fixed interval into a JSON-lines file.

Line 1 is a header (host, interval, which sources are available and why others are missing);
every further line is one sample ``{"t": unix_time, "nfs": {...}, "fabric": {...}, ...}`` of
cumulative counters (the report turns them into rates). The file never grows past
``max_bytes``: sampling stops there and a final ``{"truncated": true}`` line says so.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from dlperf.telemetry import sources

SOURCES: dict[str, Callable[[], dict]] = {
    "nfs": sources.nfs,
    "block": sources.block,
    "network": sources.network,
    "fabric": sources.fabric,
    "host": sources.host,
}


class Sampler:
    def __init__(self, output: Path, interval: float, max_bytes: int = 64 * 1024 * 1024):
        self.output, self.interval, self.max_bytes = output, interval, max_bytes
        self.sources = dict(SOURCES)
        self.missing: dict[str, str] = {}
        try:
            self.sources["gpu"] = sources.Gpu()
        except sources.SourceMissing as exc:
            self.missing["gpu"] = str(exc)
        self._stop = False
        self.cost_s = 0.0  # this process's CPU time spent sampling
        self.samples = 0

    def stop(self, *_args) -> None:
        self._stop = True

    def sample(self) -> dict:
        cpu0 = time.process_time()
        try:
            return self._sample()
        finally:
            self.cost_s += time.process_time() - cpu0
            self.samples += 1

    def footer(self) -> dict:
        """The sampler's own cost: CPU seconds per sample, and as a share of one core."""
        per = self.cost_s / max(self.samples, 1)
        return {
            "footer": True,
            "samples": self.samples,
            "cpu_s_per_sample": per,
            "cpu_percent_of_core": 100.0 * per / self.interval,
        }

    def _sample(self) -> dict:
        row: dict = {"t": time.time()}
        for name, read in list(self.sources.items()):
            try:
                row[name] = read()
            except sources.SourceMissing as exc:
                self.missing[name] = str(exc)
                del self.sources[name]
            except Exception as exc:  # a broken source is recorded, never fatal
                self.missing[name] = f"{type(exc).__name__}: {exc}"
                del self.sources[name]
        return row

    def run(self, duration: float | None = None) -> int:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        first = self.sample()
        header = {
            "header": True,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "interval_s": self.interval,
            "sources": sorted(self.sources),
            "missing": self.missing,
        }
        written = rows = 0
        end = time.monotonic() + duration if duration is not None else None
        with self.output.open("w") as fh:
            for record in (header, first):
                line = json.dumps(record) + "\n"
                fh.write(line)
                written += len(line)
            rows = 1
            fh.flush()
            next_t = time.monotonic() + self.interval
            truncated = False
            while not self._stop and (end is None or time.monotonic() < end):
                time.sleep(max(0.0, next_t - time.monotonic()))
                next_t += self.interval
                line = json.dumps(self.sample()) + "\n"
                if written + len(line) > self.max_bytes:
                    fh.write(json.dumps({"truncated": True, "t": time.time()}) + "\n")
                    truncated = True
                    break
                fh.write(line)
                fh.flush()
                written += len(line)
                rows += 1
            if not truncated:  # one last sample at stop: the counters cover the whole run
                fh.write(json.dumps(self.sample()) + "\n")
                rows += 1
                fh.write(json.dumps(self.footer()) + "\n")
        return rows


def stop_when_stdin_closes(sampler: Sampler) -> None:
    """Stop when standard input reaches EOF: a sampler started over SSH ends with its
    connection, even when whoever started it was killed (SSH forwards no signal)."""

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        sampler.stop()

    threading.Thread(target=watch, name="stdin-eof", daemon=True).start()


def run_sampler(
    output: Path,
    interval: float,
    duration: float | None,
    max_bytes: int,
    stop_on_stdin_eof: bool = False,
) -> int:
    sampler = Sampler(output, interval, max_bytes)
    signal.signal(signal.SIGTERM, sampler.stop)
    signal.signal(signal.SIGINT, sampler.stop)
    if stop_on_stdin_eof:
        stop_when_stdin_closes(sampler)
    return sampler.run(duration)


def read_samples(path: Path) -> tuple[dict, list[dict]]:
    """Header and samples of a telemetry file; a torn last line (killed writer) is ignored, and
    so is the footer with the sampler's own cost (read_footer)."""
    header: dict = {}
    rows: list[dict] = []
    with path.open() as fh:
        for line in fh:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("header"):
                header = record
            elif "t" in record and not record.get("truncated"):
                rows.append(record)
    return header, rows


def read_footer(path: Path) -> dict | None:
    """The sampler's cost record, written when it stopped normally (not when it was killed)."""
    footer = None
    with path.open() as fh:
        for line in fh:
            if '"footer"' in line:
                try:
                    footer = json.loads(line)
                except json.JSONDecodeError:
                    continue
    return footer
