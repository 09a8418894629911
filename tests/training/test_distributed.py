"""Horovod data parallelism across real processes: gloo and MPI controllers."""

from __future__ import annotations

import pytest

from .conftest import TINY, dlperf, read_result

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
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
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
