"""Throughput and time-to-accuracy modes, and the bad inputs the CLI must refuse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import TINY, dlperf, read_result

AVX512 = "avx512f" in Path("/proc/cpuinfo").read_text()


def train_tta(digits, out, batch: str, target: str, epochs: str, *extra: str):
    return dlperf(
        "train",
        *TINY,
        "--batch-size",
        batch,
        "--mode",
        "tta",
        "--data",
        str(digits / "train.rec"),
        "--val-data",
        str(digits / "val.rec"),
        "--target-top1",
        target,
        "--max-epochs",
        epochs,
        *extra,
        "--output",
        str(out),
    )


def test_time_to_accuracy_on_digits_reaches_the_target_within_bounded_epochs(tmp_path, digits):
    out = tmp_path / "tta"
    proc = train_tta(digits, out, "32", "0.85", "15", "--warmup-epochs", "1", "--lr-per-256", "1.0")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = read_result(out)
    assert result["status"] == "ok" and result["reached_target"] is True
    assert result["top1"] >= 0.85
    # top-1 is a count over the 359 validation images, each counted once (padding excluded).
    correct = result["top1"] * 359
    assert abs(correct - round(correct)) < 1e-6
    assert 1 <= result["epochs"] <= 15
    assert 0 < result["time_to_accuracy_s"] <= result["wall_time_s"]
    events = [
        json.loads(line.split(":::MLLOG ", 1)[1])
        for line in (out / "mllog.txt").read_text().splitlines()
        if ":::MLLOG" in line
    ]
    keys = [e["key"] for e in events]
    assert keys.count("eval_accuracy") == result["epochs"]
    assert keys.count("epoch_start") == result["epochs"]
    assert keys[-1] == "run_stop" and events[-1]["metadata"]["status"] == "success"
    assert "run_start" in keys and "global_batch_size" in keys


def test_unreached_target_is_reported_and_exits_non_zero(tmp_path, digits):
    out = tmp_path / "miss"
    proc = train_tta(digits, out, "64", "1.0", "1")
    assert proc.returncode == 3
    result = read_result(out)
    assert result["reached_target"] is False and result["time_to_accuracy_s"] is None
    assert result["epochs"] == 1


def test_throughput_mode_on_synthetic_data(tmp_path):
    out = tmp_path / "tp"
    proc = dlperf(
        "train",
        *TINY,
        "--batch-size",
        "16",
        "--iterations",
        "6",
        "--warmup-iterations",
        "2",
        "--output",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = read_result(out)
    assert result["mode"] == "throughput" and result["world_size"] == 1
    assert result["throughput_img_per_s"] > 0
    assert result["hyperparameters"]["batch_size"] == 16
    assert result["provenance"]["mxnet"] == "1.9.1"
    assert result["schema_version"] == 2 and result["backend"] == "mxnet"


def test_corrupt_data_is_recorded_as_a_failed_run(tmp_path):
    bad = tmp_path / "bad.rec"
    bad.write_bytes(b"\x00not a record file" * 64)
    out = tmp_path / "failed"
    proc = dlperf(
        "train",
        *TINY,
        "--batch-size",
        "8",
        "--data",
        str(bad),
        "--classes",
        "10",
        "--iterations",
        "3",
        "--warmup-iterations",
        "1",
        "--output",
        str(out),
    )
    assert proc.returncode != 0
    result = read_result(out)
    assert result["status"] == "failed" and result["error"]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--model", "resnet51_v1.5"], "--model"),
        (["--batch-size", "0"], "--batch-size"),
        (["--batch-size", "-4"], "--batch-size"),
        (["--data", "/nonexistent/train.rec"], "--data"),
        (["--target-top1", "1.5"], "--target-top1"),
        (["--target-top1", "0"], "--target-top1"),
        (["--iterations", "0"], "--iterations"),
    ],
)
def test_bad_input_exits_non_zero_naming_the_flag_and_writes_nothing(tmp_path, args, flag):
    out = tmp_path / "out"
    proc = dlperf("train", *args, "--output", str(out))
    assert proc.returncode != 0
    assert flag in proc.stderr
    assert not (out / "result.json").exists()


@pytest.mark.skipif(not AVX512, reason="MXNet's bfloat16 kernels (oneDNN) need AVX-512")
def test_mixed_precision_with_amp_and_its_loss_scaler_learns_digits(tmp_path, digits):
    """MXNet's AMP, the path float16 takes on GPUs (amp.init, a dynamic loss scaler on the
    trainer, the loss scaled before backward), here in bfloat16 on the CPU: it must learn."""
    out = tmp_path / "amp"
    proc = train_tta(
        digits, out, "32", "0.85", "15", "--warmup-epochs", "1", "--lr-per-256", "1.0",
        "--dtype", "bfloat16", "--device", "cpu",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = read_result(out)
    assert result["status"] == "ok" and result["reached_target"] is True
    assert (result["backend"], result["precision"]) == ("mxnet", "bfloat16")
    assert result["provenance"]["mixed_precision"] == ("MXNet AMP (bfloat16), dynamic loss scaling")
    assert result["top1"] >= 0.85
    # bfloat16 has float32's range: nothing overflowed, and a scale grows only after 2000 steps
    assert result["loss_scaling"] == {"scale": 2.0**16, "skipped_steps": 0}


@pytest.mark.parametrize(
    ("backend", "dtype", "lags"),
    [
        pytest.param(
            "mxnet", "bfloat16", 1, marks=pytest.mark.skipif(not AVX512, reason="AVX-512")
        ),
        ("pytorch", "float16", 0),
    ],
)
def test_the_loss_scaler_skips_overflowing_steps_and_result_json_counts_them(
    tmp_path, backend, dtype, lags
):
    """A learning rate of 1e30 blows the weights up after the first step: from then on every
    gradient overflows, the scaler skips the step and halves its scale, and result.json says
    how often. MXNet's LossScaler applies a halving one step late, GradScaler at once."""
    out = tmp_path / "scaler"
    proc = dlperf(
        "train", "--backend", backend, "--dtype", dtype, "--device", "cpu", *TINY,
        "--batch-size", "8", "--classes", "10", "--iterations", "8", "--warmup-iterations", "2",
        "--lr-per-256", "1e30", "--output", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    scaling = read_result(out)["loss_scaling"]
    assert 1 <= scaling["skipped_steps"] <= 8
    assert scaling["scale"] == 2.0 ** (16 - scaling["skipped_steps"] + lags)
    assert f"loss scaler: {scaling['skipped_steps']} step(s) skipped" in proc.stdout
