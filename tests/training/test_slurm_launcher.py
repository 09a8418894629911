"""`dlperf sweep --launcher slurm` against a real (one-node) Slurm: each point one batch job whose
ranks srun starts (Horovod over PMIx), telemetry from a sampler step, the job recorded in the
point; resume, a failed job and a SIGTERM to the sweep. The multi-node path runs on the VM
cluster (e2e) and in the slurm molecule scenario."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from dlperf.launchers import slurm as slurm_launcher
from dlperf.launchers import slurm_jobs
from dlperf.sweep import SweepConfig, run_point

from .conftest import BIN, ENV, TINY

THROUGHPUT = [*TINY, "--batch-size", "16", "--iterations", "8", "--warmup-iterations", "2"]


def sweep_cmd(results: Path, run_id: str, *train: str) -> list[str]:
    return [
        str(BIN / "dlperf"),
        "sweep",
        "--quiet",
        "--launcher",
        "slurm",
        "--nodes",
        "1",
        "--procs-per-node",
        "2",
        "--results",
        str(results),
        "--run-id",
        run_id,
        "--telemetry-interval",
        "0.5",
        "--sbatch-arg=--partition=test",
        *train,
    ]


def sweep(slurm, results: Path, run_id: str, *train: str, env: dict | None = None):
    return subprocess.run(
        sweep_cmd(results, run_id, *train),
        env=dict(ENV, SLURM_CONF=slurm.env["SLURM_CONF"], **(env or {})),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def point(results: Path, run_id: str) -> dict:
    return json.loads((results / run_id / "1nodes" / "result.json").read_text())


def test_a_point_is_one_batch_job_whose_ranks_srun_starts(slurm, tmp_path):
    tmp_path = tmp_path / "results with spaces"  # paths in #SBATCH lines and the script, quoted
    # sbatch's input variables override #SBATCH lines: not the options the point sets itself
    proc = sweep(slurm, tmp_path, "ok", *THROUGHPUT, env={"SBATCH_REQUEUE": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = point(tmp_path, "ok")
    assert result["status"] == "ok", result.get("error")
    assert result["world_size"] == 2 and result["throughput_img_per_s"] > 0
    fingerprints = result["param_fingerprints"]
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1]
    launch = result["provenance"]["launch"]
    assert launch["launcher"] == "slurm" and launch["job_id"].isdigit()
    assert launch["job_state"] == "COMPLETED" and launch["exit_code"] == "0:0"
    assert launch["nodelist"] == slurm.host
    assert 0 < launch["launch_to_run_start_s"] < 120
    # a node failure fails the point rather than running it again into the same directory
    assert (
        " Requeue=0 " in slurm.run("scontrol", "show", "job", "--oneliner", launch["job_id"]).stdout
    )
    directory = tmp_path / "ok" / "1nodes"
    script = (directory / "job.sh").read_text()
    assert "#SBATCH --nodes=1" in script and "#SBATCH --ntasks-per-node=2" in script
    assert "#SBATCH --partition=test" in script and "srun --mpi=pmix" in script
    log = (directory / "train.log").read_text()
    assert f"slurm job {launch['job_id']} on {slurm.host} (2 tasks)" in log
    lines = [json.loads(x) for x in (directory / "telemetry" / f"{slurm.host}.jsonl").open()]
    assert lines[0]["header"] and sum("t" in line for line in lines) >= 2
    # the sampler stopped on end-of-input (it writes its footer then), not by a kill
    assert "footer" in lines[-1]
    assert "CANCELLED" not in (directory / "telemetry" / f"telemetry-{slurm.host}.log").read_text()

    again = sweep(slurm, tmp_path, "ok", *THROUGHPUT)
    assert again.returncode == 0 and "skipped (already complete)" in again.stdout
    assert point(tmp_path, "ok")["provenance"]["launch"]["job_id"] == launch["job_id"]


def test_a_failed_job_is_recorded_with_its_state_and_log_tail(slurm, tmp_path):
    broken = tmp_path / "broken.rec"
    broken.write_bytes(b"not a record file" * 64)
    proc = sweep(slurm, tmp_path, "bad", *THROUGHPUT, "--data", str(broken))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 node(s): failed" in proc.stdout
    result = point(tmp_path, "bad")
    assert result["status"] == "failed"
    assert result["provenance"]["launch"]["job_state"] == "FAILED"
    # the batch script's status is srun's: 1 from the rank that failed, or 128 + 15 where
    # --kill-on-bad-exit terminated the other rank before it failed on its own (a loaded machine)
    launched = re.search(r"launcher rc=(\d+); log tail", result["error"])
    assert launched and launched[1] in ("1", "137", "143"), result["error"]
    assert "Exited with exit code 1" in result["error"], result["error"]
    assert "MXNetError" in result["error"]  # the engine's own error, read from the data
    assert slurm.drained(within=30) == []


@pytest.mark.parametrize(
    "sbatch_answers",
    [
        "at once",
        "after the job started",
        "after the job started, with the progress display",
        "after the job started, to the whole process group (Ctrl-C)",
    ],
)
def test_sigterm_to_the_sweep_cancels_its_job_and_leaves_the_point_to_rerun(
    slurm, tmp_path, sbatch_answers
):
    env = dict(ENV, SLURM_CONF=slurm.env["SLURM_CONF"])
    if sbatch_answers != "at once":
        # An sbatch slow to answer (a loaded machine): the job is running before the sweep
        # knows its id, and the SIGTERM arrives then.
        slow = tmp_path / "slow-sbatch"
        slow.mkdir()
        (slow / "sbatch").write_text(
            "#!/bin/sh\n"
            f'out=$({shutil.which("sbatch")} "$@") || exit $?\n'
            'until squeue -h -t RUNNING -j "${out%%;*}" | grep -q .; do sleep 0.2; done\n'
            'sleep 3\necho "$out"\n'
        )
        (slow / "sbatch").chmod(0o755)
        env["PATH"] = f"{slow}:{env['PATH']}"
    long = [*TINY, "--batch-size", "16", "--iterations", "100000", "--warmup-iterations", "2"]
    cmd = sweep_cmd(tmp_path, "term", *long)
    if sbatch_answers.endswith("progress display"):
        # rich's refresh thread runs beside the main one: the signal may reach either
        cmd.remove("--quiet")
    # at a terminal, Ctrl-C reaches the sweep and every process it started (sbatch too)
    group = sbatch_answers.endswith("(Ctrl-C)")
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=group,
    )
    deadline = time.monotonic() + 120
    while not slurm.run("squeue", "--noheader", "--states=RUNNING").stdout.strip():
        assert time.monotonic() < deadline and proc.poll() is None, "the job never started"
        time.sleep(0.5)
    signum = signal.SIGINT if group else signal.SIGTERM
    if group:
        os.killpg(proc.pid, signum)
    else:
        proc.send_signal(signum)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, output
    assert f"dlperf sweep: stopped by {signum.name}" in output, output
    assert slurm.drained(within=60) == [], "jobs left after the signal"
    assert not (tmp_path / "term" / "1nodes").exists()  # no half-finished point in place


def test_a_job_a_killed_sweep_left_running_is_cancelled_before_its_point_runs_again(
    slurm, tmp_path, monkeypatch, capsys
):
    # SIGKILL (the OOM killer, a lost launch node) gives the sweep no clean-up: its job runs on
    # in Slurm. The next attempt at the point finds the job by the id the first one kept and
    # cancels it before it submits its own.
    long = [*TINY, "--batch-size", "16", "--iterations", "100000", "--warmup-iterations", "2"]
    proc = subprocess.Popen(
        sweep_cmd(tmp_path, "killed", *long),
        env=dict(ENV, SLURM_CONF=slurm.env["SLURM_CONF"]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while not (running := slurm.run("squeue", "-h", "-t", "RUNNING", "-o", "%i").stdout.split()):
        assert time.monotonic() < deadline and proc.poll() is None, "the job never started"
        time.sleep(0.5)
    # the ranks' step (the second srun, after the samplers') launched
    while f"{running[0]}.1" not in slurm.run("squeue", "-h", "-s", "-o", "%i").stdout.split():
        assert time.monotonic() < deadline and proc.poll() is None, "the ranks never started"
        time.sleep(0.5)
    proc.kill()
    proc.wait(timeout=30)
    partial = tmp_path / "killed" / ".1nodes.partial"
    assert (partial / slurm_launcher.JOB_ID_FILE).read_text().split() == running
    time.sleep(2)
    assert slurm.run("squeue", "-h", "-o", "%i").stdout.split() == running  # left running

    for name, value in {**ENV, "SLURM_CONF": slurm.env["SLURM_CONF"]}.items():
        monkeypatch.setenv(name, value)
    cfg = SweepConfig(
        nodes=[1], procs_per_node=1, launcher="slurm", results=tmp_path, run_id="killed",
        train_args=["--model", "nope"], timeout=120, sbatch_args=["--partition=test"],
    )  # fmt: skip
    # Left running, the job would hold the node (--exclusive) and the new one wait behind it.
    rerun: list[dict] = []
    worker = threading.Thread(
        target=lambda: rerun.append(run_point(cfg, tmp_path / "killed", 1)), daemon=True
    )
    worker.start()
    worker.join(timeout=120)
    assert rerun, "the rerun is still queued behind the job the killed sweep left running"
    stored = rerun[0]
    assert (
        f"1 node(s): stopped ranks of an earlier attempt still running on slurm job {running[0]}"
        in capsys.readouterr().err
    )
    ended = slurm.run("scontrol", "show", "job", "--oneliner", running[0]).stdout
    assert "JobState=CANCELLED" in ended or not ended.strip(), ended  # or already purged
    assert stored["status"] == "failed" and stored["provenance"]["launch"]["job_id"] != running[0]
    assert slurm.drained(within=60) == []

    # an id kept from before a controller's state was reset names another job now: left alone
    other = slurm.run("sbatch", "--parsable", "--job-name=other", "--partition=test",
                      "--wrap=sleep 120").stdout.strip()  # fmt: skip
    partial.mkdir()
    (partial / slurm_launcher.JOB_ID_FILE).write_text(f"{other}\n")
    assert slurm_launcher.stop_leftovers(cfg, 1, partial) == []
    assert slurm.run("squeue", "-h", "-o", "%i").stdout.split() == [other]
    slurm.run("scancel", other)
    assert slurm.drained(within=60) == []


def test_pytorch_ranks_meet_at_a_port_the_first_allocated_node_picked(slurm, tmp_path):
    """PyTorch ranks take their place from SLURM_PROCID/SLURM_NTASKS and meet at MASTER_ADDR:
    the batch script picks MASTER_PORT on that node (where rank 0 listens), not the submitter."""
    proc = sweep(slurm, tmp_path, "torch", *THROUGHPUT, "--backend", "pytorch")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = point(tmp_path, "torch")
    assert result["status"] == "ok", result.get("error")
    assert result["backend"] == "pytorch" and result["world_size"] == 2
    fingerprints = result["param_fingerprints"]
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1]
    assert "srun --mpi=none" in (tmp_path / "torch" / "1nodes" / "job.sh").read_text()


def run_point_job(
    slurm, tmp_path, monkeypatch, *, timeout: int, sbatch: list[str], train: list[str]
):
    """The slurm launcher's run for one 1-rank point, in this process (as the sweep calls it),
    with the sweep's environment."""
    for name, value in {**ENV, "SLURM_CONF": slurm.env["SLURM_CONF"]}.items():
        monkeypatch.setenv(name, value)
    cfg = SweepConfig(
        nodes=[1], procs_per_node=1, launcher="slurm", results=tmp_path, run_id="q",
        train_args=train, timeout=timeout, sbatch_args=["--partition=test", *sbatch],
    )  # fmt: skip
    partial = tmp_path / "point"
    (partial / "telemetry").mkdir(parents=True)
    log = partial / "train.log"
    return slurm_launcher.run(cfg, 1, partial, log), log


def test_time_in_the_queue_is_not_counted_against_the_points_timeout(slurm, tmp_path, monkeypatch):
    # A busy partition: the job waits (held here) longer than --timeout plus the grace the sweep
    # gives a running job, then runs and completes.
    monkeypatch.setattr(slurm_launcher, "GRACE_S", 5.0)
    held_s = 25  # > timeout 15 + grace 5

    def release_later():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            ids = slurm.run(
                "squeue", "--noheader", "--states=PENDING", "--format=%i"
            ).stdout.split()
            if ids:
                time.sleep(held_s)
                slurm.run("scontrol", "release", *ids)
                return
            time.sleep(0.2)

    releaser = threading.Thread(target=release_later, daemon=True)
    releaser.start()
    launch, log = run_point_job(
        slurm, tmp_path, monkeypatch, timeout=15, sbatch=["--hold"], train=THROUGHPUT
    )
    releaser.join()
    text = log.read_text()
    assert launch.rc == 0, text[-3000:]
    assert launch.details["job_state"] == "COMPLETED"
    assert launch.details["queued_s"] >= held_s
    assert f"slurm job {launch.details['job_id']} PENDING (JobHeld" in text  # why it waited
    assert (tmp_path / "point" / "result.json").exists()


def test_a_job_running_past_its_time_and_the_grace_is_cancelled_and_said_so(
    slurm, tmp_path, monkeypatch
):
    # Slurm would end it at its --time (1 minute at the least); with the grace shortened, the
    # sweep's own limit comes first, as it does on a cluster whose controller stopped answering.
    monkeypatch.setattr(slurm_launcher, "GRACE_S", 2.0)
    long = [*TINY, "--batch-size", "16", "--iterations", "100000", "--warmup-iterations", "2"]
    t0 = time.monotonic()
    launch, log = run_point_job(slurm, tmp_path, monkeypatch, timeout=3, sbatch=[], train=long)
    assert time.monotonic() - t0 < 55  # before Slurm's own limit
    assert launch.rc != 0
    assert launch.details["job_state"] == "CANCELLED"
    assert "had not ended" in log.read_text() and "cancelled it" in log.read_text()
    assert slurm.drained(within=60) == []


def test_a_job_that_can_never_start_is_cancelled_at_once_naming_the_reason(
    slurm, tmp_path, monkeypatch
):
    # The partition allows 1 minute; the point asks for more (--time from --timeout). Slurm
    # accepts it (EnforcePartLimits=NO) and would keep it pending as PartitionTimeLimit for ever.
    slurm.run("scontrol", "update", "PartitionName=test", "MaxTime=1")
    try:
        t0 = time.monotonic()
        launch, log = run_point_job(
            slurm, tmp_path, monkeypatch, timeout=600, sbatch=[], train=THROUGHPUT
        )
    finally:
        slurm.run("scontrol", "update", "PartitionName=test", "MaxTime=INFINITE")
    text = log.read_text()
    assert time.monotonic() - t0 < 60, text
    assert launch.rc != 0 and launch.details["job_state"] == "CANCELLED", text
    assert "cannot start: PartitionTimeLimit does not clear" in text, text
    assert slurm.drained(within=60) == []


@pytest.fixture(scope="module")
def forgetful_slurm(tmp_path_factory):
    """A Slurm of its own, whose controller the tests restart with its state cleared."""
    from .slurm import LocalSlurm

    cluster = LocalSlurm(tmp_path_factory.mktemp("forgetful")).start()
    yield cluster
    cluster.stop()


@pytest.mark.parametrize("ranks", ["finished", "failed"])
def test_a_job_slurm_forgot_before_the_sweep_saw_it_end_is_judged_by_its_result(
    forgetful_slurm, tmp_path, monkeypatch, ranks
):
    """slurmctld purges an ended job MinJobAge (300 s) after its end: a sweep that could not ask
    in that time (a controller out of reach, a launch node stalled) then hears "Invalid job id"
    and, without accounting, nothing of how it ended. It does not wait out --timeout and the
    grace for a job that no longer exists: the point's result file decides."""
    real_follow = slurm_launcher.follow_job
    followed_s = []

    def follow_once_forgotten(job_id, limit_s, log, details):
        assert forgetful_slurm.drained(within=60) == []  # the job ended, unseen by the sweep
        forgetful_slurm.restart_controller()  # and its record is gone
        t0 = time.monotonic()
        try:
            return real_follow(job_id, limit_s, log, details)
        finally:
            followed_s.append(time.monotonic() - t0)

    monkeypatch.setattr(slurm_launcher, "follow_job", follow_once_forgotten)
    monkeypatch.setattr(slurm_launcher, "GRACE_S", 60.0)  # a wait for it would end in 90 s
    # ranks that fail: refused at their command line, before any training
    train = THROUGHPUT if ranks == "finished" else [*THROUGHPUT, "--batch-size", "0"]
    launch, log = run_point_job(
        forgetful_slurm, tmp_path, monkeypatch, timeout=30, sbatch=[], train=train
    )
    text = log.read_text()
    assert followed_s[0] < 30, text  # not --timeout + GRACE_S (90 s), waiting for nothing
    assert launch.details["job_state"] == "PURGED", text
    assert f"slurm job {launch.details['job_id']} is no longer known to Slurm" in text, text
    # sacct refuses without accounting: the result file decided
    assert slurm_jobs.accounted_state(launch.details["job_id"]) == {}
    if ranks == "finished":
        assert launch.rc == 0 and "its result file decides, a finished run" in text, text
    else:
        assert launch.rc == 1 and "none of a finished run" in text, text
