"""The batch script `dlperf sweep --launcher slurm` writes for a point, and its input checks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dlperf.launchers.slurm import batch_script
from dlperf.launchers.slurm_jobs import exit_status, parse_sacct
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
        "--no-requeue",
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
    assert '--output="/p q/train.log"' in directives(script)  # and for sbatch's #SBATCH lines
    # the rendezvous port is picked on the allocation's first node, where rank 0 listens
    assert re.search(r"^MASTER_PORT=\$\(python3 -c .*bind", script, re.M)
    assert "export MASTER_ADDR MASTER_PORT\n" in script


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"gpus_per_node": -1}, "--gpus-per-node -1"),
        ({"sbatch_args": ["partition=gpu"]}, "--sbatch-arg 'partition=gpu'"),
        ({"launcher": "pbs"}, "--launcher pbs"),
        ({"results": Path('/r/a "b" c')}, "--results '/r/a \"b\" c': a blank and a double quote"),
        ({"sbatch_args": ['--comment="x y"']}, "--sbatch-arg '--comment=\"x y\"'"),
        # a later #SBATCH line would silently win over the script's own
        (
            {"sbatch_args": ["--time=10"]},
            "--sbatch-arg '--time=10': the point's batch script sets --time itself",
        ),
        ({"gpus_per_node": 4, "sbatch_args": ["--gres=gpu:v100:4"]}, "sets --gres itself"),
        ({"sbatch_args": ["--error=e.log"]}, "it would undo train.log"),
        ({"sbatch_args": ["--requeue"]}, "a requeued point runs again into the same directory"),
        ({"sbatch_args": ["--clusters=gpu"]}, "cancels its jobs on the cluster it runs on"),
        ({"sbatch_args": ["--cluster=gpu"]}, "cancels its jobs on the cluster it runs on"),
        ({"sbatch_args": ["--req"]}, "sbatch would read it as --requeue, which cannot be given"),
        ({"sbatch_args": ["--tim=5"]}, "sbatch would read it as --time, which cannot be given"),
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


def test_sacct_records_of_ended_jobs_read_as_scontrol_fields():
    # `sacct --allocations --noheader --parsable2 --format=State,ExitCode,NodeList` as Slurm
    # prints it: who cancelled a job follows its state.
    assert parse_sacct("COMPLETED|0:0|c4140-[01-02]\n") == {
        "JobState": "COMPLETED", "ExitCode": "0:0", "NodeList": "c4140-[01-02]",
    }  # fmt: skip
    cancelled = parse_sacct("CANCELLED by 1000|0:15|c4140-01\n")
    assert cancelled["JobState"] == "CANCELLED"
    assert exit_status(cancelled) == 128 + 15
    assert parse_sacct("") == {}


def test_a_dry_run_prints_each_points_sbatch_and_ranks_and_writes_nothing(tmp_path, monkeypatch):
    from dlperf.sweep import plan_sweep

    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")  # sbatch "installed"
    lines = plan_sweep(config(results=tmp_path / "results", gpus_per_node=4))
    assert lines[0].startswith("sweep r1: slurm launcher, nodes 1,2,4,8, 4 process(es) per node")
    sbatch = [line for line in lines if " node(s): sbatch " in line]
    assert [line.split()[0] for line in sbatch] == ["1", "2", "4", "8"]
    assert "--nodes=8" in sbatch[-1].split() and "--gres=gpu:4" in sbatch[-1].split()
    assert sbatch[0].endswith(f"{tmp_path}/results/r1/.1nodes.partial/job.sh")
    ranks = [line for line in lines if line.startswith("  ranks: ")]
    assert len(ranks) == 4 and ranks[0].startswith("  ranks: srun --mpi=pmix --kill-on-bad-exit=1 ")
    assert not (tmp_path / "results").exists()


def test_a_dry_run_of_the_hosts_launcher_gives_each_host_its_slots_and_keeps_complete_points(
    tmp_path,
):
    from dlperf.sweep import plan_sweep

    done = tmp_path / "r1" / "1nodes"
    done.mkdir(parents=True)
    (done / "result.json").write_text('{"status": "ok"}')
    hosts = ["c4140-01", "c4140-02", "c4140-03"]
    cfg = config(
        launcher="hosts", hosts=hosts, nodes=[1, 3], results=tmp_path, network_interface="ib0"
    )
    lines = plan_sweep(cfg)
    assert lines[1] == "1 node(s): complete, kept"
    assert lines[2].startswith("3 node(s): horovodrun -np 12 -H c4140-01:4,c4140-02:4,c4140-03:4 ")
    assert "--network-interface ib0" in lines[2]
    assert sorted(p.name for p in (tmp_path / "r1").iterdir()) == ["1nodes"]


def test_a_dry_run_checks_its_input_as_a_run_does(tmp_path):
    from dlperf.sweep import plan_sweep

    with pytest.raises(SweepError, match="--nodes 4: only 2 hosts"):
        plan_sweep(config(launcher="hosts", hosts=["a", "b"], nodes=[4], results=tmp_path))


def test_a_dry_run_of_a_run_id_holding_other_settings_is_refused_as_the_run_would_be(tmp_path):
    import json

    from dlperf.sweep import plan_sweep, sweep_settings

    first = config(launcher="hosts", hosts=["a", "b"], nodes=[1, 2], results=tmp_path)
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "sweep.json").write_text(
        json.dumps({"settings": sweep_settings(first), "nodes": [1, 2]})
    )
    assert plan_sweep(first)[1].startswith("1 node(s): horovodrun")  # the same sweep: planned
    other = config(launcher="hosts", hosts=["a", "b"], nodes=[1, 2], results=tmp_path,
                   train_args=["--backend", "pytorch"])  # fmt: skip
    with pytest.raises(SweepError, match="holds a sweep with other settings"):
        plan_sweep(other)
    # one that is not a sweep's record at all is named, not a traceback
    for text in ("{not json", "[]"):
        (tmp_path / "r1" / "sweep.json").write_text(text)
        with pytest.raises(SweepError, match=r"r1/sweep\.json is not a sweep's record"):
            plan_sweep(first)


def test_a_sweep_resumed_under_another_launch_environment_says_so_and_keeps_the_first(
    tmp_path, monkeypatch, capsys
):
    import json

    from dlperf.sweep import plan_sweep, stored_sweep

    monkeypatch.delenv("NCCL_IB_DISABLE", raising=False)
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    cfg = config(launcher="hosts", hosts=["a", "b"], nodes=[1], results=tmp_path)
    (tmp_path / "r1").mkdir()
    first = stored_sweep(cfg, tmp_path / "r1")  # as the first sweep writes it
    (tmp_path / "r1" / "sweep.json").write_text(json.dumps(first))
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("NCCL_IB_DISABLE", "1")  # the fabric off: other numbers
    monkeypatch.delenv("NCCL_DEBUG")
    plan_sweep(config(launcher="hosts", hosts=["a", "b"], nodes=[1, 2], results=tmp_path))
    err = capsys.readouterr().err
    assert "the launch environment differs from its first sweep's" in err
    assert "NCCL_DEBUG=(unset) (was WARN), NCCL_IB_DISABLE=1 (was (unset))" in err
    again = stored_sweep(
        config(launcher="hosts", hosts=["a", "b"], nodes=[2], results=tmp_path), tmp_path / "r1"
    )
    assert again["environment"] == first["environment"] and again["nodes"] == [1, 2]


def test_a_typed_gres_is_the_users_own_when_the_sweep_asks_for_no_gpus():
    cfg = config(gpus_per_node=0, sbatch_args=["--gres=gpu:v100:4", "--partition=gpu"])
    validate(cfg)
    lines = directives(batch_script(cfg, 2, Path("/shared/results/r1/.2nodes.partial")))
    assert lines.count("--gres=gpu:v100:4") == 1 and "--partition=gpu" in lines
