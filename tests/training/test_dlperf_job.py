"""dlperf_job, run as Ansible runs it: one distributed training job over a host list."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

from ..conftest import process_alive

BIN = Path(sys.executable).parent
LOCAL = {
    "ansible_connection": "local",
    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
}
INVENTORY = {"all": {"hosts": {"localhost": LOCAL}}}
TRAIN = [
    "--model",
    "resnet18_v1.5",
    "--width-multiplier",
    "0.25",
    "--image-size",
    "32",
    "--batch-size",
    "16",
    "--classes",
    "10",
    "--iterations",
    "6",
    "--warmup-iterations",
    "2",
]


def job(run_playbook, output: Path, check: bool, **options):
    args = {
        "hosts": "localhost:2",
        "output": str(output),
        "dlperf": str(BIN / "dlperf"),
        "train_args": TRAIN,
        "timeout": 240,
        **options,
    }
    plays = [
        {
            "name": "Run one training job",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Run dlperf_job",
                    "dlperf.cluster.dlperf_job": args,
                    "environment": {"PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"},
                }
            ],
        }
    ]
    run = run_playbook(plays, INVENTORY, check=check)
    ((_, _, result),) = run.task_results()
    return run.rc, result


def test_check_mode_returns_the_command_and_starts_nothing(run_playbook, tmp_path):
    rc, result = job(run_playbook, tmp_path / "out", check=True, network_interface="eth1")
    assert rc == 0 and result["changed"] is True  # a job would run
    cmd = result["cmd"]
    assert cmd[:5] == ["horovodrun", "-np", "2", "-H", "localhost:2"]
    assert "--gloo" in cmd and cmd[cmd.index("--network-interface") + 1] == "eth1"
    assert cmd[-2:] == ["--output", str(tmp_path / "out")]
    assert not (tmp_path / "out").exists()


def test_mpirun_exports_the_jobs_environment_to_every_host(run_playbook, tmp_path):
    rc, result = job(
        run_playbook, tmp_path / "out", check=True, hosts="c1:4,c2:4", launcher="mpirun",
        network_interface="ib0", environment={"NCCL_IB_HCA": "mlx5_0", "NCCL_DEBUG": "WARN"},
    )  # fmt: skip
    assert rc == 0, result.get("msg")
    cmd = result["cmd"]
    exported = [cmd[i + 1] for i, arg in enumerate(cmd) if arg == "-x"]
    assert exported == [
        "PATH", "LD_LIBRARY_PATH", "MASTER_ADDR", "MASTER_PORT",  # then the job's, sorted
        "GLOO_SOCKET_IFNAME", "HOROVOD_GLOO_TIMEOUT_SECONDS", "NCCL_DEBUG", "NCCL_IB_HCA",
        "NCCL_SOCKET_IFNAME",
    ]  # fmt: skip


def test_two_rank_job_returns_its_parsed_result(run_playbook, tmp_path):
    rc, result = job(run_playbook, tmp_path / "out", check=False)
    assert rc == 0, result.get("msg")
    assert result["changed"] is True
    assert result["result"]["status"] == "ok" and result["result"]["world_size"] == 2
    assert result["result"]["throughput_img_per_s"] > 0
    assert Path(result["log"]).is_file() and Path(result["result_file"]).is_file()


def test_failed_job_reports_the_tail_of_its_log(run_playbook, tmp_path):
    rc, result = job(
        run_playbook, tmp_path / "out", check=False, train_args=[*TRAIN, "--batch-size", "0"]
    )
    assert rc != 0
    assert "dlperf job failed" in result["msg"]
    assert "--batch-size 0" in result["msg"]  # dlperf's own message, from the log tail


def test_more_processes_than_slots_is_refused(run_playbook, tmp_path):
    rc, result = job(run_playbook, tmp_path / "out", check=True, np=8)
    assert rc != 0 and "np=8 exceeds the 2 slots" in result["msg"]


@pytest.mark.parametrize(
    ("launcher", "launcher_args"),
    [("horovodrun", []), ("mpirun", ["--allow-run-as-root", "--oversubscribe"])],
)
def test_a_pytorch_job_meets_at_the_rendezvous_the_module_sets(
    run_playbook, tmp_path, launcher, launcher_args
):
    # No MASTER_ADDR/PORT given: the module derives them from the host list, and mpirun
    # exports them to every rank.
    rc, result = job(
        run_playbook,
        tmp_path / "out",
        check=False,
        train_args=["--backend", "pytorch", *TRAIN],
        launcher=launcher,
        launcher_args=launcher_args,
    )
    assert rc == 0, result.get("msg")
    assert result["result"]["status"] == "ok" and result["result"]["world_size"] == 2
    assert result["result"]["backend"] == "pytorch"
    assert result["result"]["precision"] == "float32"


def test_srun_takes_the_hosts_and_their_slots_and_refuses_uneven_ones(run_playbook, tmp_path):
    rc, result = job(
        run_playbook, tmp_path / "out", check=True, hosts="c1:2,c2:2", launcher="srun",
        train_args=["--backend", "pytorch", *TRAIN], launcher_args=["--partition=gpu"],
    )  # fmt: skip
    assert rc == 0, result.get("msg")
    assert result["cmd"][:9] == [
        "srun", "--nodes=2", "--nodelist=c1,c2", "--ntasks=4", "--ntasks-per-node=2",
        "--mpi=none", "--kill-on-bad-exit=1", "--partition=gpu", str(BIN / "dlperf"),
    ]  # fmt: skip
    rc, result = job(run_playbook, tmp_path / "out", check=True, hosts="c1:2,c2:1", launcher="srun")
    assert rc != 0 and "srun starts the same number of tasks on every node" in result["msg"]


def test_an_srun_job_runs_through_slurm_and_a_timeout_ends_its_job(run_playbook, slurm, tmp_path):
    through_slurm = {
        "hosts": f"{slurm.host}:2",
        "launcher": "srun",
        "launcher_args": ["--partition=test"],
        "environment": {"SLURM_CONF": slurm.env["SLURM_CONF"]},
    }
    rc, result = job(run_playbook, tmp_path / "ok", check=False, **through_slurm)
    assert rc == 0, result.get("msg")
    assert result["result"]["status"] == "ok" and result["result"]["world_size"] == 2
    assert "--mpi=pmix" in result["cmd"]  # Horovod (mxnet) over PMIx
    # The timeout is under test, not the framework: PyTorch ranks (MXNet 1.9.1's threaded
    # engine has a rare upstream race, apache/mxnet#16674, that once ended this job early).
    long = ["--backend", "pytorch", *TRAIN[:-4],
            "--iterations", "100000", "--warmup-iterations", "2"]  # fmt: skip
    rc, result = job(
        run_playbook, tmp_path / "long", check=False, timeout=8, train_args=long,
        **through_slurm,
    )  # fmt: skip
    assert rc != 0 and "exceeded timeout=8s" in result["msg"], result.get("msg")
    # srun ended its job on SIGTERM; slurmctld may show it COMPLETING for a moment
    assert slurm.drained(within=30) == []


def test_bad_timeouts_and_rank_counts_are_refused_before_a_job_starts(run_playbook, tmp_path):
    for option, value, says in [
        ("timeout", 0, "timeout 0: must be >= 1 (seconds)"),
        ("start_timeout", -5, "start_timeout -5: must be >= 1 (seconds)"),
        ("np", -2, "np -2: must be >= 1"),
    ]:
        rc, result = job(run_playbook, tmp_path / option, check=True, **{option: value})
        assert rc != 0 and result["msg"].startswith(says), result.get("msg")
        assert not (tmp_path / option).exists()


@pytest.mark.parametrize("detached", [False, True], ids=["child", "detached"])
def test_a_module_stopped_by_sigterm_stops_its_job(run_playbook, tmp_path, detached):
    """Ansible ends a module with SIGTERM (the controller going away, a timeout of its own):
    the launcher, in a session of its own, and its rank go with it. A detached rank stands for
    one horovodrun started over SSH, which no signal to the launcher reaches: the module stops
    it by its command line on the way out."""
    import signal
    import threading
    import time

    started = tmp_path / "rank.pid"
    rank = tmp_path / "dlperf"
    script = (
        f"#!{sys.executable}\nimport os, time\n\n"
        "def stand_in():\n"
        f"    open({str(started)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(600)\n\n"
    )
    if detached:  # a grandchild in a session of its own; the rank the launcher sees waits
        script += (
            "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        stand_in()\n"
            "    os._exit(0)\ntime.sleep(600)\n"
        )
    else:
        script += "stand_in()\n"
    rank.write_text(script)
    rank.chmod(0o755)
    outcome = {}

    def run_job() -> None:
        rc, result = job(
            run_playbook, tmp_path / "out", check=False, hosts="localhost:1", dlperf=str(rank)
        )
        outcome.update(rc=rc, result=result)

    runner = threading.Thread(target=run_job)
    runner.start()
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert started.exists(), "the stand-in rank never started"
    rank_pid = int(started.read_text())
    # this test's own module: a descendant of this process (other tests run beside it)
    modules = [
        child.pid
        for child in psutil.Process().children(recursive=True)
        if "AnsiballZ_dlperf_job" in " ".join(_cmdline(child))
    ]
    assert modules, "no dlperf_job module process"
    for pid in modules:
        os.kill(pid, signal.SIGTERM)
    runner.join(timeout=120)
    assert not runner.is_alive()
    assert outcome["rc"] != 0
    # gone, or a zombie its new parent has not reaped yet (a detached rank's parent is init)
    deadline = time.monotonic() + 15
    while process_alive(rank_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not process_alive(rank_pid), "the rank outlived its module"


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:  # ended meanwhile
        return []
