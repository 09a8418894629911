"""The report's summary table: both speedups over their own base, named in the header, and a
time-to-accuracy sweep merged beside a throughput sweep."""

from __future__ import annotations

import json
import re

import pytest
from dlperf.report.data import Point, ReportError, load_points, summary_rows
from dlperf.report.html import captions, merge_tta, summary_table


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


def test_node_counts_the_sweep_planned_but_never_reached_are_reported_missing(tmp_path):
    # A sweep of 1,2,4,8 nodes stopped during its 4-node point: only 1nodes/ and 2nodes/ exist
    # (a point is renamed into place when it ends), sweep.json still plans all four.
    (tmp_path / "sweep.json").write_text(json.dumps({"settings": {}, "nodes": [1, 2, 4, 8]}))
    for n in (1, 2):
        (tmp_path / f"{n}nodes").mkdir()
        (tmp_path / f"{n}nodes" / "result.json").write_text(
            json.dumps({"schema_version": 2, "status": "ok", "world_size": n})
        )
    (tmp_path / ".4nodes.partial").mkdir()
    points = load_points(tmp_path)
    assert [(p.nodes, p.result["status"]) for p in points] == [
        (1, "ok"), (2, "ok"), (4, "missing"), (8, "missing")
    ]  # fmt: skip
    assert column(summary_table(summary_rows(points)), "status")[2:] == ["missing", "missing"]


def test_an_unreadable_sweep_json_is_named(tmp_path):
    (tmp_path / "1nodes").mkdir()
    (tmp_path / "1nodes" / "result.json").write_text('{"schema_version": 2, "status": "ok"}')
    (tmp_path / "sweep.json").write_text("{not json")
    with pytest.raises(ReportError, match=r"sweep\.json is not readable"):
        load_points(tmp_path)


def test_a_tta_sweep_of_another_backend_or_precision_says_so_in_its_row():
    throughput = [Point(1, {"status": "ok", "world_size": 4, "throughput_img_per_s": 500.0,
                            "backend": "mxnet", "precision": "float16"})]  # fmt: skip
    tta = [Point(1, {"status": "ok", "world_size": 4, "time_to_accuracy_s": 900.0, "epochs": 3,
                     "backend": "pytorch", "precision": "bfloat16-amp"})]  # fmt: skip
    table = summary_table(merge_tta(summary_rows(throughput), summary_rows(tta)))
    assert column(table, "backend") == ["mxnet (time to accuracy: pytorch)"]
    assert column(table, "precision") == ["float16 (time to accuracy: bfloat16-amp)"]
    assert column(table, "workers") == ["4"]


def test_a_rate_that_is_zero_or_not_a_number_is_no_measurement_and_no_base():
    points = [
        Point(1, {"status": "ok", "world_size": 4, "throughput_img_per_s": float("nan")}),
        Point(2, {"status": "ok", "world_size": 8, "throughput_img_per_s": 0.0}),
        Point(4, {"status": "ok", "world_size": 16, "throughput_img_per_s": 1800.0}),
        Point(8, {"status": "ok", "world_size": 32, "throughput_img_per_s": float("inf")}),
    ]
    rows = summary_rows(points)
    assert [r["throughput_img_per_s"] for r in rows] == [None, None, 1800.0, None]
    assert [r["throughput_speedup"] for r in rows] == [None, None, 1.0, None]
    assert column(summary_table(rows), "img/s speedup over 4 node(s)") == ["—", "—", "1.00", "—"]


def test_a_throughput_report_does_not_caption_fig3_as_a_measured_time_to_accuracy():
    prov = {"provenance": {"hosts": ["c01", "c02"]}}
    points = [Point(1, {"status": "ok", "mode": "throughput", "throughput_img_per_s": 9.0, **prov})]
    text = captions(points, points, None, {})["fig3_time_to_accuracy"]
    assert text.startswith("No time-to-accuracy measurement") and "c01" not in text
    tta = [Point(1, {"status": "ok", "mode": "tta", "time_to_accuracy_s": 60.0, **prov})]
    assert captions(points, tta, None, {})["fig3_time_to_accuracy"].startswith(
        "Measured: time to the target top-1 per node count on c01, c02"
    )


def test_a_prediction_for_another_number_of_gpus_is_no_error_of_the_measurement():
    # `dlperf model` at its default 4 GPUs per node against a sweep of one rank per node: the
    # rows meet by node count, but a prediction for 8 GPUs says nothing of 2 workers' rate.
    from dlperf.report.html import add_prediction

    points = [
        Point(1, {"status": "ok", "world_size": 1, "throughput_img_per_s": 40.0}),
        Point(2, {"status": "ok", "world_size": 2, "throughput_img_per_s": 70.0}),
    ]
    prediction = {
        1: {"nodes": 1, "gpus": 1, "throughput": 40.0, "largest_loss": "none"},
        2: {"nodes": 2, "gpus": 8, "throughput": 300.0, "tta_s": 50.0, "largest_loss": "none"},
    }
    rows = add_prediction(summary_rows(points), prediction)
    assert rows[0]["prediction_error"] == 0.0
    assert rows[1]["prediction_error"] is None and rows[1]["tta_prediction_error"] is None
    errors = column(summary_table(rows), "error")  # the img/s error column
    assert errors[1] == "— (predicted for 8 GPUs, 2 workers ran)", errors


def test_the_model_column_says_its_time_to_accuracy_is_training_time_only():
    head, _ = cells(summary_table(summary_rows([Point(1, {"status": "ok", "world_size": 1})])))
    assert "predicted time to accuracy (s, training only)" in head


def test_fig3s_caption_names_the_seeds_curve_only_where_the_figure_draws_it():
    prov = {"provenance": {"hosts": ["c01"]}}

    def caption(*nodes):
        tta = [Point(n, {"status": "ok", "mode": "tta", "world_size": n,
                         "time_to_accuracy_s": 600.0 / n, **prov}) for n in nodes]  # fmt: skip
        return captions(tta, tta, None, {})["fig3_time_to_accuracy"]

    assert "the seed's published 1.8x/3.3x/4.9x over one node" in caption(1, 2, 4)
    assert "drawn from 2 nodes on" in caption(2, 4, 8)
    # from 3 nodes on there is no published curve to draw: the caption says so
    text = caption(3, 6)
    assert "1.8x" not in text and "not drawn" in text, text


def test_a_result_file_that_is_json_but_not_an_object_is_named(tmp_path):
    (tmp_path / "1nodes").mkdir()
    (tmp_path / "1nodes" / "result.json").write_text("[]")
    with pytest.raises(ReportError, match=r"1nodes/result\.json is not a readable result file"):
        load_points(tmp_path)
