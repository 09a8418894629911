"""Load a sweep's results and telemetry into plain series for the figures and the table."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from dlperf.results import upgrade
from dlperf.telemetry.sampler import read_samples

POINT = re.compile(r"^(\d+)nodes$")
ONE_SWEEP = (
    "give the directory of one sweep, which holds 1nodes/, 2nodes/ ..., "
    "e.g. results/RUN_ID/throughput"
)


class ReportError(Exception):
    """Unusable results directory; the message names the file."""


def reference() -> dict:
    """The published numbers the report and the model compare against (reference.yaml)."""
    return yaml.safe_load(resources.files("dlperf.report").joinpath("reference.yaml").read_text())


@dataclass
class Point:
    nodes: int
    result: dict
    telemetry: dict[str, tuple[dict, list[dict]]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.result.get("status") == "ok"


def load_points(results: Path) -> list[Point]:
    if not results.is_dir():
        raise ReportError(f"RESULTS {results}: no such directory ({ONE_SWEEP})")
    points = []
    for child in sorted(results.iterdir()):
        match = POINT.match(child.name)
        if not match or not child.is_dir():
            continue
        path = child / "result.json"
        try:
            result = json.loads(path.read_text())
            if not isinstance(result, dict):
                raise ValueError(f"a JSON {type(result).__name__}, not an object")
        except FileNotFoundError:
            result = {"status": "missing", "error": f"{path} does not exist"}
        except (OSError, ValueError) as exc:
            raise ReportError(
                f"RESULTS {results}: {path} is not a readable result file ({exc}); run that "
                "point again (`dlperf sweep` with the same --run-id redoes what is not complete) "
                "or move its directory away"
            ) from exc
        if result.get("status") != "missing":
            try:
                result = upgrade(result, path)
            except ValueError as exc:
                raise ReportError(str(exc)) from exc
        telemetry = {}
        for tfile in sorted((child / "telemetry").glob("*.jsonl")):
            telemetry[tfile.stem] = read_samples(tfile)
        points.append(Point(int(match.group(1)), result, telemetry))
    if not points:
        raise ReportError(f"RESULTS {results}: no <N>nodes/ result directories ({ONE_SWEEP})")
    points += planned_not_run(results, {p.nodes for p in points})
    return sorted(points, key=lambda p: p.nodes)


def planned_not_run(results: Path, present: set[int]) -> list[Point]:
    """The node counts the sweep's sweep.json plans that have no directory yet (a sweep
    stopped before them): missing points, so that a stopped sweep never reads as complete."""
    try:
        planned = json.loads((results / "sweep.json").read_text()).get("nodes", [])
    except FileNotFoundError:
        return []
    except (OSError, ValueError, AttributeError) as exc:
        raise ReportError(f"RESULTS {results}: sweep.json is not readable ({exc})") from exc
    return [
        Point(n, {"status": "missing", "error": "planned in sweep.json, not run"})
        for n in planned
        if isinstance(n, int) and n not in present
    ]


def counter_series(
    rows: list[dict], section: str, key: str, select=None
) -> tuple[list[float], list[float]]:
    """(sample times, bytes counted since the first sample) of one host, over the section's
    entries (ports, mounts).

    Summed as each entry's own differences: an entry the source could not read in one sample
    (None), or one that appears or goes away (a mount), adds nothing for the intervals it is
    missing from instead of its whole cumulative count; a counter that went backwards (a reset)
    adds nothing for that interval."""
    times, totals, last = [], [], {}
    for row in rows:
        entries = row.get(section)
        if not entries:  # source missing, or nothing of that kind on the node (no NFS mount)
            continue
        if times and row["t"] <= times[-1]:
            continue
        # A counter the source could not read is None: a sample without any is no sample,
        # not a zero (which would draw a flat line of no traffic).
        values = {name: v.get(key) for name, v in entries.items() if select is None or select(name)}
        values = {name: x for name, x in values.items() if x is not None}
        if not values:
            continue
        added = sum(max(0.0, x - last[name]) for name, x in values.items() if name in last)
        times.append(row["t"])
        totals.append((totals[-1] if totals else 0.0) + added)
        last.update(values)
    return times, totals


def cluster_rate(
    point: Point, section: str, key: str, select=None
) -> tuple[list[float], list[float]] | None:
    """Rate summed over the point's hosts, MB/s, against seconds since the first sample of any.

    The hosts' samplers start seconds apart (over SSH, or as srun reaches each node) and sample
    at their own instants, so their samples are not summed by number: each host's counter is
    interpolated at the times of one grid (the sampling interval apart), the hosts' counters are
    added, and the sum is differenced. Bytes are conserved; a host adds nothing before its first
    sample or after its last one."""
    import numpy as np

    counters = [counter_series(rows, section, key, select) for _, rows in point.telemetry.values()]
    counters = [c for c in counters if len(c[0]) >= 2]
    if not counters:
        return None
    step = float(np.median(np.concatenate([np.diff(times) for times, _ in counters])))
    start, end = min(c[0][0] for c in counters), max(c[0][-1] for c in counters)
    grid = start + step * np.arange(int(np.ceil((end - start) / step - 1e-9)) + 1)
    total = sum(np.interp(grid, times, values) for times, values in counters)
    rates = np.maximum(0.0, np.diff(total) / step / 1e6)  # never below 0 by rounding
    return (grid[1:] - start).tolist(), rates.tolist()


def missing_sources(point: Point, source: str) -> list[str]:
    reasons = []
    for host, (header, _) in point.telemetry.items():
        if source in header.get("missing", {}):
            reasons.append(f"{host}: {header['missing'][source]}")
        if header.get("truncated"):
            reasons.append(
                f"{host}: its file reached the sampler's --max-bytes, later samples lost"
            )
    return reasons


def gpu_model(result: dict) -> str | None:
    """The GPU a point trained on: the engine's device name, else NVML's list (x count)."""
    prov = result.get("provenance", {})
    if result.get("device") == "cpu":
        return "CPU"
    if prov.get("gpu_model"):
        return prov["gpu_model"]
    names = prov.get("gpus") or []
    return f"{len(names)}x {names[0]}" if names else None


def measure(result: dict, key: str) -> float | None:
    """A rate or a time the figures and speedups can use: a finite number above 0, else None
    (a zero, NaN or infinite value in a result is no measurement, not a base for speedups)."""
    value = result.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def summary_rows(points: list[Point]) -> list[dict]:
    """One row per point. Speedups are over the smallest point that has the measure: the
    smallest that reached the target for time to accuracy, the smallest that completed for
    throughput (a failed or unconverged 1-node point makes the next one the base)."""
    tta_base = next((p for p in points if p.ok and measure(p.result, "time_to_accuracy_s")), None)
    tput_base = next(
        (p for p in points if p.ok and measure(p.result, "throughput_img_per_s")), None
    )
    rows = []
    for p in points:
        r = p.result
        tta, tput = measure(r, "time_to_accuracy_s"), measure(r, "throughput_img_per_s")
        speedup = measure(tta_base.result, "time_to_accuracy_s") / tta if (p.ok and tta) else None
        tput_speedup = (
            tput / measure(tput_base.result, "throughput_img_per_s") if (p.ok and tput) else None
        )
        rows.append(
            {
                "nodes": p.nodes,
                "workers": r.get("world_size"),
                "status": r.get("status"),
                "epochs": r.get("epochs"),
                "time_to_accuracy_s": tta,
                "speedup": speedup,
                "speedup_base_nodes": tta_base.nodes if speedup else None,
                "scaling_efficiency": speedup * tta_base.nodes / p.nodes if speedup else None,
                "throughput_img_per_s": tput,
                "throughput_speedup": tput_speedup,
                "throughput_speedup_base_nodes": tput_base.nodes if tput_speedup else None,
                "throughput_efficiency": (
                    tput_speedup * tput_base.nodes / p.nodes if tput_speedup else None
                ),
                "backend": r.get("backend"),
                "precision": r.get("precision"),
                "gpu": gpu_model(r),
            }
        )
    return rows
