"""The PyTorch engine on CPU: real DDP runs over Gloo across processes, TTA on the digits set,
throughput mode, and a sweep through horovodrun that the report renders."""

from __future__ import annotations

import json

import pytest

from .conftest import BIN, TINY, dlperf, read_result

PYTORCH = ["--backend", "pytorch"]
TORCHRUN = [str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", "--no-python"]


def test_two_ddp_ranks_train_and_end_with_identical_parameters(tmp_path):
    out = tmp_path / "ddp"
    proc = dlperf(
        "train", *PYTORCH, *TINY, "--batch-size", "16", "--classes", "10",
        "--iterations", "8", "--warmup-iterations", "3", "--output", str(out),
        launcher=TORCHRUN,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    result = read_result(out)
    assert result["status"] == "ok" and result["world_size"] == 2 and result["nodes"] == 1
    assert result["backend"] == "pytorch" and result["device"] == "cpu"
    assert result["precision"] == "float32"
    assert result["provenance"]["launcher"] == "torchrun"
    assert result["provenance"]["framework"] == "pytorch"
    rank0, rank1 = result["param_fingerprints"]
    assert len(rank0) > 50
    # DDP averages the same gradients on every rank and starts from rank 0's weights.
    assert rank0 == rank1
    assert result["first_step_s"] > 0 and result["init_time_s"] > 0
    # the job goes at its slowest rank's pace: never faster than the ranks' rates added up
    per_rank = result["throughput_per_rank_img_per_s"]
    assert len(per_rank) == 2 and result["throughput_img_per_s"] <= sum(per_rank) * (1 + 1e-9)


@pytest.mark.parametrize(("loader", "recorded"), [("native", "native"), ("dali", "dali 2.4.0")])
def test_time_to_accuracy_on_digits_reaches_the_target(tmp_path, digits, loader, recorded):
    out = tmp_path / "tta"
    proc = dlperf(
        "train", *PYTORCH, *TINY, "--batch-size", "32", "--mode", "tta",
        "--data", str(digits / "train.rec"), "--val-data", str(digits / "val.rec"),
        "--target-top1", "0.85", "--max-epochs", "15", "--warmup-epochs", "1",
        "--lr-per-256", "1.0", "--threads", "1", "--loader", loader, "--output", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = read_result(out)
    assert result["provenance"]["loader"] == recorded
    assert result["status"] == "ok" and result["reached_target"] is True
    assert result["top1"] >= 0.85 and 1 <= result["epochs"] <= 15
    correct = result["top1"] * 359  # each of the 359 validation images counted once
    assert abs(correct - round(correct)) < 1e-6
    assert 0 < result["time_to_accuracy_s"] <= result["wall_time_s"]
    keys = [
        json.loads(line.split(":::MLLOG ", 1)[1])["key"]
        for line in (out / "mllog.txt").read_text().splitlines()
        if ":::MLLOG" in line
    ]
    assert keys.count("eval_accuracy") == result["epochs"] and keys[-1] == "run_stop"


@pytest.mark.parametrize(("loader", "threads"), [("native", "0"), ("dali", "1")])
def test_three_ranks_on_a_set_that_does_not_divide_finish_and_count_every_image_once(
    tmp_path, digits, loader, threads
):
    # 1,438 training images over 3 ranks of 32 and 359 validation images over 3 ranks: the
    # shards differ in length, yet every rank takes the same steps and nobody hangs.
    out = tmp_path / "three"
    launcher = [*TORCHRUN[:3], "3", TORCHRUN[-1]]
    proc = dlperf(
        "train", *PYTORCH, *TINY, "--batch-size", "32", "--mode", "tta",
        "--data", str(digits / "train.rec"), "--val-data", str(digits / "val.rec"),
        "--target-top1", "0.05", "--max-epochs", "1", "--threads", threads, "--loader", loader,
        "--output", str(out), launcher=launcher, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    result = read_result(out)
    assert result["world_size"] == 3 and result["epochs"] == 1
    correct = result["top1"] * 359
    assert abs(correct - round(correct)) < 1e-6
    fingerprints = result["param_fingerprints"]
    assert fingerprints[0] == fingerprints[1] == fingerprints[2]


def test_throughput_mode_records_backend_precision_and_the_first_step_apart(tmp_path):
    out = tmp_path / "tput"
    proc = dlperf(
        "train", *PYTORCH, *TINY, "--batch-size", "16", "--classes", "10",
        "--iterations", "6", "--warmup-iterations", "2", "--output", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = read_result(out)
    assert result["mode"] == "throughput" and result["throughput_img_per_s"] > 0
    windows = result["throughput_windows_img_per_s"]  # 4 timed steps: 4 windows of one
    assert len(windows) == 4 and min(windows) <= result["throughput_median_img_per_s"]
    assert result["throughput_median_img_per_s"] <= max(windows)
    assert result["hyperparameters"]["threads"] >= 1  # resolved from the cores
    assert (result["backend"], result["device"], result["precision"]) == (
        "pytorch",
        "cpu",
        "float32",
    )
    assert result["provenance"]["torch"].startswith("2.")
    assert result["provenance"]["layout"] == "NCHW"
    assert result["loss_scaling"] is None  # float32: no scaler
    assert result["schema_version"] == 2
    assert "(pytorch, cpu, float32)" in proc.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--backend", "mxnet", "--compile"], "--compile: only the pytorch backend compiles"),
        (["--backend", "mxnet", "--loader", "dali"], "--loader dali: DALI feeds the pytorch"),
        (
            ["--backend", "mxnet", "--layout", "NHWC", "--device", "cpu"],
            "--layout NHWC: MXNet convolves NHWC only through cuDNN, on GPUs",
        ),
        # --device auto: the engine finds the CPU (the test machines' MXNet is a CPU build)
        # and refuses before it builds anything.
        (["--backend", "mxnet", "--layout", "NHWC"], "--layout NHWC: MXNet convolves NHWC"),
        (
            ["--backend", "mxnet", "--dtype", "bfloat16", "--device", "gpu"],
            "--dtype bfloat16: MXNet computes bfloat16 on CPU (oneDNN) only",
        ),
        (
            ["--backend", "mxnet", "--dtype", "float16", "--device", "cpu"],
            "--dtype float16: MXNet has no float16 kernels on CPU",
        ),
        (["--backend", "tensorflow"], "argument --backend: invalid choice: 'tensorflow'"),
    ],
)
def test_options_a_backend_lacks_are_refused_before_anything_runs(tmp_path, args, needle):
    proc = dlperf("train", *args, "--output", str(tmp_path / "o"))
    assert proc.returncode == 2 and needle in proc.stderr
    assert not (tmp_path / "o").exists()


def test_pytorch_sweep_over_one_and_two_processes_renders_the_report(tmp_path):
    results = tmp_path / "results"
    proc = dlperf(
        "sweep", "--quiet", "--nodes", "1,2", "--results", str(results), "--run-id", "pt",
        "--telemetry-interval", "0.5",
        *PYTORCH, *TINY, "--batch-size", "16", "--classes", "10",
        "--iterations", "6", "--warmup-iterations", "2",
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for n in (1, 2):
        result = read_result(results / "pt" / f"{n}nodes")
        assert result["status"] == "ok" and result["world_size"] == n
        assert result["backend"] == "pytorch"
        # horovodrun launched the ranks; the engine took its place from HOROVOD_* variables.
        assert result["provenance"]["launcher"] == ("horovodrun")
    report = tmp_path / "report"
    proc = dlperf("report", str(results / "pt"), "--output", str(report))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((report / "summary.json").read_text())["rows"]
    assert [(r["nodes"], r["backend"], r["precision"], r["gpu"]) for r in rows] == [
        (1, "pytorch", "float32", "CPU"),
        (2, "pytorch", "float32", "CPU"),
    ]
    page = (report / "index.html").read_text()
    assert "<th>backend</th>" in page and "<td>pytorch</td>" in page


@pytest.mark.parametrize(
    "launcher",
    [
        ["horovodrun", "-np", "3", "-H", "localhost:3", "--gloo"],
        [str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "3", "--no-python"],
    ],
    ids=["horovodrun", "torchrun"],
)
def test_torch_distributed_allreduce_sums_every_rank_and_reports_bandwidth(tmp_path, launcher):
    out = tmp_path / "allreduce.json"
    proc = dlperf(
        "allreduce", *PYTORCH, "--megabytes", "1", "--iterations", "3", "--output", str(out),
        launcher=launcher,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    summary = json.loads(out.read_text())
    # ranks contribute 1, 2 and 3: every element of the sum is 6, exactly, in every iteration
    # (all_reduce works in place: each one gets a fresh copy of the rank's tensor)
    assert summary["world_size"] == 3 and summary["expected"] == 6.0
    assert summary["correct"] is True and summary["max_abs_error"] == 0.0
    assert summary["backend"] == "pytorch" and summary["controller"] == "torch.distributed"
    # no GPU here: host tensors through Gloo (NCCL takes the GPU tensors where there are GPUs)
    assert summary["device"] == "cpu" and summary["transport"] == "gloo"
    assert summary["bytes"] == 1_000_000 and summary["median_s"] > 0
    # nccl-tests' bus bandwidth: algbw * 2(n-1)/n, 4/3 of algbw for n = 3
    assert summary["busbw_MBps"] == pytest.approx(summary["algbw_MBps"] * 4 / 3)
    assert summary["algbw_MBps"] == pytest.approx(summary["bytes"] / summary["median_s"] / 1e6)
    assert "(pytorch, gloo, cpu tensors): correct" in proc.stdout
