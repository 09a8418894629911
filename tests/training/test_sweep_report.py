"""`dlperf sweep --launcher local` over 1 and 2 processes, resumption, and `dlperf report`."""

from __future__ import annotations

import html
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from dlperf.report.html import build_report

from tests.host import nfs_mounts, nvml_answers, rdma_devices

from .conftest import BIN, TINY, dlperf, sweep

TTA = [
    *TINY,
    "--batch-size",
    "32",
    "--mode",
    "tta",
    "--target-top1",
    "0.6",
    "--max-epochs",
    "8",
    "--warmup-epochs",
    "1",
    "--lr-per-256",
    "1.0",
]


@pytest.fixture(scope="module")
def swept(tmp_path_factory, digits) -> Path:
    results = tmp_path_factory.mktemp("results")
    proc = sweep(
        results,
        "tta",
        *TTA,
        "--data",
        str(digits / "train.rec"),
        "--val-data",
        str(digits / "val.rec"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return results / "tta"


def test_sweep_writes_one_complete_point_per_node_count(swept):
    for n in (1, 2):
        point = swept / f"{n}nodes"
        result = json.loads((point / "result.json").read_text())
        assert result["status"] == "ok" and result["world_size"] == n and result["reached_target"]
        assert (point / "mllog.txt").is_file() and (point / "train.log").is_file()
        (telemetry,) = (point / "telemetry").glob("*.jsonl")
        lines = [json.loads(line) for line in telemetry.read_text().splitlines()]
        assert lines[0]["header"]
        # sampled on a GPU node; without one (NVML not answering) recorded, and not fatal
        gpu = nvml_answers()
        assert ("gpu" in lines[0]["sources"]) == gpu and ("gpu" in lines[0]["missing"]) != gpu
        *rows, footer = lines[1:]  # samples, then the sampler's own cost
        assert len(rows) >= 2 and all("host" in row and "network" in row for row in rows)
        assert footer["footer"] and footer["samples"] == len(rows)
    assert not list(swept.glob(".*partial"))


def test_completed_points_are_skipped_on_rerun(swept, digits):
    before = {n: (swept / f"{n}nodes/result.json").stat().st_mtime_ns for n in (1, 2)}
    proc = sweep(
        swept.parent,
        "tta",
        *TTA,
        "--data",
        str(digits / "train.rec"),
        "--val-data",
        str(digits / "val.rec"),
    )
    assert proc.returncode == 0
    assert proc.stdout.count("skipped") == 2
    assert before == {n: (swept / f"{n}nodes/result.json").stat().st_mtime_ns for n in (1, 2)}


def test_failed_point_is_recorded_with_its_log_tail_and_the_sweep_goes_on(tmp_path):
    bad = tmp_path / "bad.rec"
    bad.write_bytes(b"\x00not a record file" * 64)
    proc = sweep(
        tmp_path,
        "bad",
        *TINY,
        "--batch-size",
        "8",
        "--classes",
        "10",
        "--iterations",
        "3",
        "--warmup-iterations",
        "1",
        "--data",
        str(bad),
    )
    assert proc.returncode == 1
    for n in (1, 2):
        result = json.loads((tmp_path / "bad" / f"{n}nodes" / "result.json").read_text())
        assert result["status"] == "failed" and "log tail" in result["error"]
    report = dlperf("report", str(tmp_path / "bad"), "--output", str(tmp_path / "report"))
    assert report.returncode == 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "Failed or missing points" in page and page.count("<td>failed</td>") == 2


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--nodes", "1,x"], "--nodes '1,x'"),
        (["--nodes", "0"], "must be >= 1"),
        (["--nodes", "1,1"], "appears twice"),
        (["--launcher", "hosts"], "--launcher hosts needs --hosts"),
        (["--launcher", "hosts", "--hosts", "a,b", "--nodes", "4"], "--nodes 4: only 2 hosts"),
        (["--output", "/tmp/x"], "--output is set by the sweep"),
    ],
)
def test_bad_sweep_input_is_refused_naming_the_flag(tmp_path, args, needle):
    proc = dlperf("sweep", "--quiet", "--results", str(tmp_path), "--run-id", "x", *args)
    assert proc.returncode == 2 and needle in proc.stderr
    assert not (tmp_path / "x" / "1nodes").exists()


def test_report_has_four_figures_a_table_and_the_speedups(swept, tmp_path):
    report = build_report(swept, tmp_path / "report")
    r1, r2 = (json.loads((swept / f"{n}nodes/result.json").read_text()) for n in (1, 2))
    speedup = r1["time_to_accuracy_s"] / r2["time_to_accuracy_s"]
    rows = {row["nodes"]: row for row in report["rows"]}
    assert rows[2]["speedup"] == pytest.approx(speedup)
    assert rows[2]["scaling_efficiency"] == pytest.approx(speedup / 2)
    fig3a, fig3b = report["figures"]["fig3_time_to_accuracy"].axes
    assert fig3a.get_xlabel() == "nodes" and "minutes" in fig3a.get_ylabel()
    assert [round(b.get_height(), 6) for b in fig3a.patches] == [
        round(r1["time_to_accuracy_s"] / 60, 6),
        round(r2["time_to_accuracy_s"] / 60, 6),
    ]
    labels = [t.get_text() for t in fig3a.texts]
    assert labels == [f"1.00x\n{r1['epochs']} ep", f"{speedup:.2f}x\n{r2['epochs']} ep"]
    assert {line.get_label() for line in fig3b.lines} >= {
        "this run",
        "seed (C4140-M, 4x V100/node)",
    }
    (fig4,) = report["figures"]["fig4_throughput"].axes
    assert [b.get_height() for b in fig4.patches] == [
        r1["throughput_img_per_s"],
        r2["throughput_img_per_s"],
    ]
    # Without NFS mounts or RDMA devices (the machines that run these tests) the figures say
    # so instead of drawing nothing.
    (fig5,) = report["figures"]["fig5_nas_read"].axes
    assert any("no NFS mounts" in t.get_text() for t in fig5.texts) is not bool(nfs_mounts())
    (fig6,) = report["figures"]["fig6_fabric"].axes
    assert any("no RDMA device" in t.get_text() for t in fig6.texts) is not bool(rdma_devices())
    page = report["html"].read_text()
    assert page.count('src="data:image/png;base64,') == 4
    # headings say what each figure is, captions say what was measured where, and what is not
    host = r1["provenance"]["hosts"][0]
    assert "<h2>Fig. 4: throughput</h2>" in page and "<h2>fig4_throughput</h2>" not in page
    assert page.count('<p class="caption">Measured: ') == 4
    assert f"training images/s per node count on {host}" in page
    assert "published, not measured here" in page
    # and where each point ran, from its provenance
    assert "<h2>Provenance</h2>" in page
    assert page.count(f"<td>{html.escape(host)}</td>") >= 2
    assert page.count("<td>mxnet ImageRecordIter</td><td>—</td>") == 2  # float32: no scaler
    assert all(
        (tmp_path / "report" / f"{name}.png").stat().st_size > 1000 for name in report["figures"]
    )


def test_a_model_prediction_is_drawn_and_tabulated_beside_the_measurement(swept, tmp_path):
    r1, r2 = (json.loads((swept / f"{n}nodes/result.json").read_text()) for n in (1, 2))
    model = tmp_path / "model.json"
    proc = subprocess.run(
        [str(BIN / "dlperf"), "model", "--node-throughput", str(r1["throughput_img_per_s"]),
         "--gpus-per-node", "1", "--batch-per-gpu", "32", "--nodes", "1,2", "--fabric", "10gbe",
         "--epochs", f"1={r1['epochs']},2={r2['epochs']}", "--train-images", "1437",
         "--json", str(model)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    predicted = {row["nodes"]: row for row in json.loads(model.read_text())["rows"]}
    report = build_report(swept, tmp_path / "report", model=model)
    (fig4,) = report["figures"]["fig4_throughput"].axes
    [line] = [ln for ln in fig4.lines if ln.get_label() == "predicted (dlperf model)"]
    assert list(line.get_ydata()) == [predicted[1]["throughput"], predicted[2]["throughput"]]
    rows = {row["nodes"]: row for row in report["rows"]}
    # the model starts from the 1-node measurement: no error there
    assert rows[1]["prediction_error"] == pytest.approx(0.0, abs=1e-9)
    assert rows[2]["prediction_error"] == pytest.approx(
        r2["throughput_img_per_s"] / predicted[2]["throughput"] - 1
    )
    assert rows[2]["largest_loss"] == predicted[2]["largest_loss"]
    assert "largest loss (model)" in report["html"].read_text()
    # Fig. 3: the model's time to accuracy (its epochs over its throughput) beside the measured
    fig3a, fig3b = report["figures"]["fig3_time_to_accuracy"].axes
    [cross] = [ln for ln in fig3a.lines if ln.get_label() == "predicted (dlperf model)"]
    assert list(cross.get_ydata()) == [predicted[n]["tta_s"] / 60 for n in (1, 2)]
    [sped] = [ln for ln in fig3b.lines if ln.get_label() == "predicted (dlperf model)"]
    assert list(sped.get_ydata()) == [predicted[n]["tta_speedup"] for n in (1, 2)]
    for n, r in ((1, r1), (2, r2)):
        assert rows[n]["predicted_tta_s"] == predicted[n]["tta_s"]
        assert rows[n]["tta_prediction_error"] == pytest.approx(
            r["time_to_accuracy_s"] / predicted[n]["tta_s"] - 1
        )
    assert html.escape("the crosses are dlperf model's prediction") in report["html"].read_text()


def test_nas_and_fabric_figures_draw_one_series_per_node_count(swept, tmp_path):
    # The same sweep with telemetry rewritten as if NFS and an RDMA port had carried traffic:
    # 10 MB/s of NFS reads per node and 5 MB/s sent on the fabric.

    copy = tmp_path / "copy"
    shutil.copytree(swept, copy)
    for n in (1, 2):
        path = next((copy / f"{n}nodes" / "telemetry").glob("*.jsonl"))
        header = json.loads(path.read_text().splitlines()[0])
        header["missing"] = {}
        rows = [json.dumps(header)]
        for i in range(5):
            rows.append(
                json.dumps(
                    {
                        "t": 1000.0 + i,
                        "nfs": {"/mnt/isilon": {"read_bytes": i * 10_000_000}},
                        "fabric": {"rxe0/1": {"xmit_bytes": i * 5_000_000, "rcv_bytes": 0}},
                    }
                )
            )
        path.write_text("\n".join(rows) + "\n")
    report = build_report(copy, tmp_path / "report")
    (fig5,) = report["figures"]["fig5_nas_read"].axes
    assert [line.get_label() for line in fig5.lines] == ["1 node(s)", "2 node(s)"]
    assert all(list(line.get_ydata()) == pytest.approx([10.0] * 4) for line in fig5.lines)
    assert fig5.get_ylabel().startswith("NFS read (MB/s")
    (fig6,) = report["figures"]["fig6_fabric"].axes
    assert len(fig6.lines) == 4 and list(fig6.lines[0].get_ydata()) == pytest.approx([5.0] * 4)


@pytest.mark.parametrize("case", ["empty", "corrupt"])
def test_report_refuses_unusable_results(tmp_path, case):
    target = tmp_path / "results"
    target.mkdir()
    if case == "corrupt":
        (target / "1nodes").mkdir()
        (target / "1nodes" / "result.json").write_text("{not json")
    proc = dlperf("report", str(target), "--output", str(tmp_path / "out"))
    assert proc.returncode == 2
    expected = "result.json is not a readable result file" if case == "corrupt" else "no <N>nodes/"
    assert expected in proc.stderr


def test_a_throughput_sweep_report_takes_fig3_from_a_tta_sweep_or_says_why_not(swept, tmp_path):
    proc = sweep(tmp_path, "tput", *TINY, "--batch-size", "16", "--classes", "10",
                 "--iterations", "6", "--warmup-iterations", "2")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    note = "TCG: time to accuracy is not run on the VMs"
    alone = build_report(tmp_path / "tput", tmp_path / "alone", notes=(note,))
    fig3a, fig3b = alone["figures"]["fig3_time_to_accuracy"].axes
    assert not fig3a.patches and not fig3b.lines
    assert any(note in t.get_text() for t in fig3a.texts)
    assert note in alone["html"].read_text()
    both = build_report(tmp_path / "tput", tmp_path / "both", tta=swept)
    rows = {row["nodes"]: row for row in both["rows"]}
    tta2 = json.loads((swept / "2nodes" / "result.json").read_text())
    tput2 = json.loads((tmp_path / "tput" / "2nodes" / "result.json").read_text())
    assert rows[2]["time_to_accuracy_s"] == tta2["time_to_accuracy_s"]
    assert rows[2]["throughput_img_per_s"] == tput2["throughput_img_per_s"]
    assert rows[2]["status"] == "ok"
    fig3a, _ = both["figures"]["fig3_time_to_accuracy"].axes
    assert [round(b.get_height(), 6) for b in fig3a.patches][1] == round(
        tta2["time_to_accuracy_s"] / 60, 6
    )


def test_a_run_that_ran_out_of_epochs_is_kept_as_it_ended_and_not_run_again(tmp_path, digits):
    # Target out of reach in one epoch: `dlperf train` exits 3 (horovodrun reports 1).
    unreachable = [*TINY, "--batch-size", "64", "--mode", "tta", "--target-top1", "0.999",
                   "--max-epochs", "1", "--data", str(digits / "train.rec"),
                   "--val-data", str(digits / "val.rec")]  # fmt: skip
    proc = sweep(tmp_path, "short", *unreachable, nodes="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "short/1nodes/result.json").read_text())
    assert result["status"] == "ok" and result["reached_target"] is False, result
    assert result["epochs"] == 1 and result["throughput_img_per_s"] > 0
    assert result["time_to_accuracy_s"] is None
    again = sweep(tmp_path, "short", *unreachable, nodes="1")
    assert again.returncode == 0 and "skipped" in again.stdout, again.stdout
