"""Horovod data parallelism across real processes: gloo and MPI controllers."""

from __future__ import annotations

import json
import os

import pytest

from .conftest import BIN, ENV, TINY, dlperf, read_result, run

HOROVODRUN = {
    "gloo": ["horovodrun", "-np", "2", "-H", "localhost:2", "--gloo"],
    "mpi": [
        "horovodrun",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--mpi",
        "--mpi-args=--allow-run-as-root --oversubscribe",
    ],
}


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_two_ranks_train_and_end_with_identical_parameters(tmp_path, controller):
    out = tmp_path / controller
    proc = dlperf(
        "train",
        *TINY,
        "--batch-size",
        "16",
        "--classes",
        "10",
        "--iterations",
        "8",
        "--warmup-iterations",
        "3",
        "--output",
        str(out),
        launcher=HOROVODRUN[controller],
    )
    # All of stderr: a rank that aborts prints its cause before its backtrace.
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    result = read_result(out)
    assert result["status"] == "ok"
    assert result["world_size"] == 2 and result["nodes"] == 1
    assert result["throughput_img_per_s"] > 0
    assert result["throughput_img_per_s_per_worker"] == pytest.approx(
        result["throughput_img_per_s"] / 2
    )
    rank0, rank1 = result["param_fingerprints"]
    assert len(rank0) > 50
    # DistributedTrainer averages the same gradients everywhere: bitwise-equal weights.
    assert rank0 == rank1
    assert result["provenance"]["horovod"] == "0.28.1"


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_allreduce_check_sums_every_rank_and_reports_bandwidth(tmp_path, controller):
    out = tmp_path / "allreduce.json"
    proc = dlperf(
        "allreduce", "--megabytes", "1", "--iterations", "3", "--output", str(out),
        launcher=HOROVODRUN[controller],
    )  # fmt: skip
    # All of stderr: a rank that aborts prints its cause before its backtrace.
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    summary = json.loads(out.read_text())
    # ranks contribute 1 and 2: every element of the sum is 3, exactly
    assert summary["world_size"] == 2 and summary["expected"] == 3.0
    assert summary["correct"] is True and summary["max_abs_error"] == 0.0
    assert summary["controller"] == controller
    # no GPU here: host tensors, reduced by the controller itself (NCCL only with GPU tensors)
    assert summary["device"] == "cpu" and summary["transport"] == controller
    assert summary["bytes"] == 1_000_000 and summary["median_s"] > 0
    # nccl-tests' bus bandwidth: algbw * 2(n-1)/n, which is algbw itself for n = 2
    assert summary["busbw_MBps"] == pytest.approx(summary["algbw_MBps"])
    # algbw is the tensor's bytes over the slowest rank's median reduction time
    assert summary["algbw_MBps"] == pytest.approx(summary["bytes"] / summary["median_s"] / 1e6)
    assert "correct" in proc.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--megabytes", "0"], "--megabytes 0.0: must be in (0, 4096]"),
        (["--iterations", "0"], "--iterations 0: must be >= 1"),
        (["--warmup", "-1"], "--warmup -1: must be >= 0"),
    ],
)
def test_bad_allreduce_input_is_refused_naming_the_flag(tmp_path, args, needle):
    proc = dlperf("allreduce", "--output", str(tmp_path / "a.json"), *args)
    assert proc.returncode == 2 and needle in proc.stderr
    assert not (tmp_path / "a.json").exists()


# Rank 0 writes result.json after the last collective; a slow file system (NFS's fsync) stands
# in here as a 3 s fsync on rank 0 only.
SLOW_ROOT_FSYNC = """
import os, time
if os.environ.get("HOROVOD_RANK") == "0":
    _fsync = os.fsync
    def fsync(fd):
        time.sleep(3)
        _fsync(fd)
    os.fsync = fsync
"""


def test_three_mxnet_ranks_on_a_set_that_does_not_divide_finish_and_count_every_image_once(
    tmp_path, digits
):
    # 1,438 training and 359 validation images over 3 ranks: parts of 480, 480 and 478, cut to
    # the same 4 steps of 96 each; every validation image counted once. The target is out of
    # reach, so every rank exits 3 (not reached), and horovodrun stops the others as soon as
    # one exits non-zero: the ranks wait for rank 0's result.json, however slow its disk.
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SLOW_ROOT_FSYNC)
    paths = [str(tmp_path / "site"), *filter(None, [ENV.get("PYTHONPATH")])]
    out = tmp_path / "three"
    proc = run(
        ["horovodrun", "-np", "3", "-H", "localhost:3", "--gloo", str(BIN / "dlperf"),
         "train", *TINY, "--batch-size", "96", "--mode", "tta",
         "--data", str(digits / "train.rec"), "--val-data", str(digits / "val.rec"),
         "--target-top1", "1.0", "--max-epochs", "1", "--threads", "1", "--output", str(out)],
        env={**ENV, "PYTHONPATH": os.pathsep.join(paths)},
    )  # fmt: skip
    assert proc.returncode != 0 and "target top-1 1.0 not reached in 1 epochs" in proc.stderr
    assert (out / "result.json").exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    result = read_result(out)
    assert result["status"] == "ok" and result["reached_target"] is False
    assert result["world_size"] == 3 and result["epochs"] == 1
    correct = result["top1"] * 359
    assert abs(correct - round(correct)) < 1e-6


BROADCAST = """
import hashlib, json, sys
import mxnet as mx
from dlperf.train.mxnet.comm import HorovodComm

comm = HorovodComm()
params = mx.gluon.ParameterDict()
for name, shape in (("conv0_weight", (4, 3, 3, 3)), ("bn0_gamma", (4,)), ("fc_bias", (7,))):
    params.get(name, shape=shape)
params.initialize(mx.init.Uniform(comm.rank + 1.0), ctx=mx.cpu())  # apart on every rank
def digest(params):  # each parameter's bytes: equal digests, equal bits
    return {n: hashlib.sha256(p.data().asnumpy().tobytes()).hexdigest() for n, p in params.items()}
before = digest(params)
comm.broadcast_parameters(params)
after = digest(params)
with open(f"{sys.argv[1]}/rank{comm.rank}.json", "w") as out:  # stdout interleaves ranks
    json.dump({"rank": comm.rank, "before": before, "after": after}, out)
"""


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_every_rank_starts_from_rank_0s_parameters(tmp_path, controller):
    """The MXNet engine's parameter broadcast (an allreduce to which the other ranks add zeros,
    Horovod's own broadcast being racy in 0.28.1's MXNet path) gives every rank rank 0's
    values exactly. The training tests cannot show this: their ranks happen to initialise
    alike."""
    script = tmp_path / "broadcast.py"
    script.write_text(BROADCAST)
    proc = run([*HOROVODRUN[controller], str(BIN / "python"), str(script), str(tmp_path)])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r: json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)}
    assert rows[0]["before"] != rows[1]["before"]  # the ranks did start apart
    for name, values in rows[0]["before"].items():
        assert rows[0]["after"][name] == values, name  # rank 0 kept its own
        assert rows[1]["after"][name] == values, name  # rank 1 got them bit for bit
