"""`dlperf telemetry`: sample every source at a fixed interval into a JSON-lines file.

Line 1 is a header (host, interval, which sources are available and why others are missing);
every further line is one sample ``{"t": unix_time, "nfs": {...}, "fabric": {...}, ...}`` of
cumulative counters (the report turns them into rates). A source that fails during the run is
dropped and the sample says so (``"missing": {source: why}``). Sampling stops before a sample
would take the file past ``max_bytes``, and a last ``{"truncated": true}`` line says so.
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
            gpu = sources.Gpu()
        except sources.SourceMissing as exc:
            self.missing["gpu"] = str(exc)
        else:
            self.sources["gpu"] = gpu
            self.missing.update({f"gpu:{i}": reason for i, reason in gpu.lost.items()})
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
        dropped = {}
        for name, read in list(self.sources.items()):
            try:
                row[name] = read()
            except sources.SourceMissing as exc:
                dropped[name] = str(exc)
            except Exception as exc:  # a broken source is recorded, never fatal
                dropped[name] = f"{type(exc).__name__}: {exc}"
        for name in dropped:
            del self.sources[name]
        self.missing.update(dropped)
        if dropped:
            row["missing"] = dropped
        return row

    def _sleep_until(self, deadline: float) -> None:
        """Sleep in short slices: a stop signal does not cut time.sleep short (PEP 475), and
        whoever stops the sampler waits for its last sample."""
        while not self._stop and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.2))

    def run(self, duration: float | None = None) -> int:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        first = self.sample()
        first.pop("missing", None)  # what the first sample lacked, the header says
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
                self._sleep_until(next_t if end is None else min(next_t, end))
                if self._stop or (end is not None and time.monotonic() >= end):
                    break
                line = json.dumps(self.sample()) + "\n"
                # After a stall (the job suspended, a slow source) the next sample comes at
                # least half an interval on, not in a burst that catches up the missed ones.
                next_t = max(next_t + self.interval, time.monotonic() + self.interval / 2)
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
    # the caller's handlers back once sampling ends (a failed start included)
    previous = {s: signal.signal(s, sampler.stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        if stop_on_stdin_eof:
            stop_when_stdin_closes(sampler)
        return sampler.run(duration)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


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
            elif record.get("truncated"):
                header["truncated"] = True
            elif "t" in record:
                for name, why in record.get("missing", {}).items():
                    header.setdefault("missing", {})[name] = f"dropped during the run: {why}"
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
