"""The report's summary table: both speedups over their own base, named in the header, and a
time-to-accuracy sweep merged beside a throughput sweep."""

from __future__ import annotations

import re

from dlperf.report.data import Point, summary_rows
from dlperf.report.html import merge_tta, summary_table


def cells(table: str) -> tuple[list[str], list[list[str]]]:
    head = re.findall(r"<th>(.*?)</th>", table)
    rows = [re.findall(r"<td>(.*?)</td>", tr) for tr in re.findall(r"<tr>(<td>.*?)</tr>", table)]
    return head, rows


def column(table: str, name: str) -> list[str]:
    head, rows = cells(table)
    return [row[head.index(name)] for row in rows]


def test_throughput_speedup_and_efficiency_are_columns_over_the_smallest_measured_point():
    points = [
        Point(1, {"status": "failed", "world_size": 4}),
        Point(2, {"status": "ok", "world_size": 8, "throughput_img_per_s": 1000.0}),
        Point(4, {"status": "ok", "world_size": 16, "throughput_img_per_s": 1800.0}),
    ]
    table = summary_table(summary_rows(points))
    assert column(table, "img/s") == ["—", "1000.0", "1800.0"]
    assert column(table, "img/s speedup over 2 node(s)") == ["—", "1.00", "1.80"]
    assert column(table, "img/s efficiency") == ["—", "100%", "90%"]
    assert column(table, "speedup") == ["—", "—", "—"]  # no time to accuracy: no base named


def test_a_tta_sweep_fills_its_columns_and_says_when_it_ran_other_workers():
    throughput = [
        Point(1, {"status": "ok", "world_size": 4, "throughput_img_per_s": 500.0}),
        Point(2, {"status": "ok", "world_size": 8, "throughput_img_per_s": 950.0}),
    ]
    tta = [
        Point(1, {"status": "ok", "world_size": 4, "time_to_accuracy_s": 900.0, "epochs": 3}),
        Point(2, {"status": "ok", "world_size": 4, "time_to_accuracy_s": 500.0, "epochs": 3}),
        Point(4, {"status": "failed", "world_size": 16}),
    ]
    rows = merge_tta(summary_rows(throughput), summary_rows(tta))
    table = summary_table(rows)
    assert column(table, "nodes") == ["1", "2", "4"]
    assert column(table, "workers") == ["4", "8 (time to accuracy: 4)", "16"]
    assert column(table, "speedup over 1 node(s)") == ["1.00", "1.80", "—"]
    assert column(table, "img/s speedup over 1 node(s)") == ["1.00", "1.90", "—"]
    assert column(table, "status") == ["ok", "ok", "tta failed"]
