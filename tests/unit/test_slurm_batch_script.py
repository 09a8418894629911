"""The batch script `dlperf sweep --launcher slurm` writes for a point, and its input checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from dlperf.launchers import batch_script, exit_status
from dlperf.sweep import SweepConfig, SweepError, validate


def config(**kw) -> SweepConfig:
    base = dict(
        nodes=[1, 2, 4, 8],
        procs_per_node=4,
        launcher="slurm",
        results=Path("/shared/results"),
        run_id="r1",
        train_args=["--backend", "mxnet", "--dtype", "float16"],
        timeout=3601,
    )
    return SweepConfig(**(base | kw))


def directives(script: str) -> list[str]:
    return [
        line.removeprefix("#SBATCH ") for line in script.splitlines() if line.startswith("#SBATCH")
    ]


def test_a_gpu_point_asks_for_its_nodes_tasks_gpus_and_time():
    script = batch_script(config(gpus_per_node=4, sbatch_args=["--partition=gpu"]), 8, Path("/p"))
    assert directives(script) == [
        "--job-name=dlperf-r1-8n",
        "--nodes=8",
        "--ntasks-per-node=4",
        "--exclusive",
        "--time=61",  # minutes, rounded up from --timeout 3601 s
        "--output=/p/train.log",
        "--open-mode=append",
        "--gres=gpu:4",
        "--partition=gpu",
    ]
    # Horovod (mxnet) ranks get their place over PMIx
    assert "srun --mpi=pmix --kill-on-bad-exit=1 " in script
    assert "train --backend mxnet --dtype float16 --output /p" in script


def test_a_cpu_point_asks_for_no_gres_and_pytorch_ranks_need_no_pmi():
    script = batch_script(config(train_args=["--backend", "pytorch"]), 2, Path("/p q"))
    assert not [d for d in directives(script) if d.startswith("--gres")]
    assert "srun --mpi=none --kill-on-bad-exit=1 " in script
    assert "--output '/p q'" in script  # paths are quoted for the shell


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"gpus_per_node": -1}, "--gpus-per-node -1"),
        ({"sbatch_args": ["partition=gpu"]}, "--sbatch-arg 'partition=gpu'"),
        ({"launcher": "pbs"}, "--launcher pbs"),
    ],
)
def test_bad_slurm_input_is_refused_naming_the_flag(change, needle):
    with pytest.raises(SweepError, match=needle.replace("(", r"\(")):
        validate(config(**change))


@pytest.mark.parametrize(
    ("state", "rc"),
    [
        ({"JobState": "COMPLETED", "ExitCode": "0:0"}, 0),
        ({"JobState": "FAILED", "ExitCode": "3:0"}, 3),
        ({"JobState": "CANCELLED", "ExitCode": "0:15"}, 143),
        ({"JobState": "TIMEOUT", "ExitCode": "0:0"}, 1),  # ended by Slurm, not by the script
        ({"JobState": "NODE_FAIL"}, 1),
    ],
)
def test_a_jobs_end_becomes_the_points_exit_status(state, rc):
    assert exit_status(state) == rc
