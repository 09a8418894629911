"""`dlperf sweep --stop` refusing what it must not stop; the real stop of a running sweep and
its ranks is in tests/training/test_sweep_stop.py."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from dlperf.cli import main


def stop(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["sweep", "--stop", *argv])
    out = capsys.readouterr()
    return rc, out.out.strip(), out.err.strip()


@pytest.fixture
def held(tmp_path):
    """RESULTS/r1/sweep.lock held by this process, as a running sweep holds it; write the
    holder line with .write()."""
    run = tmp_path / "r1"
    run.mkdir()
    with (run / "sweep.lock").open("a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)

        class Holder:
            def write(self, text: str) -> None:
                fh.seek(0)
                fh.truncate()
                fh.write(text)
                fh.flush()

        yield Holder()


def test_nothing_to_stop_is_said_and_not_an_error(tmp_path, capsys):
    assert stop(capsys, "--results", str(tmp_path), "--run-id", "r1") == (
        0, f"--run-id r1: no sweep of it under {tmp_path}: nothing to stop", ""
    )  # fmt: skip
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "sweep.lock").write_text("pid 1 on elsewhere\n")  # its sweep ended
    assert stop(capsys, "--results", str(tmp_path), "--run-id", "r1")[:2] == (
        0, "--run-id r1: its sweep is not running: nothing to stop"
    )  # fmt: skip


def test_a_sweep_on_another_host_is_left_to_be_stopped_there(tmp_path, capsys, held):
    held.write("pid 4242 on node9\n")
    rc, _, err = stop(capsys, "--results", str(tmp_path), "--run-id", "r1")
    assert rc == 2
    assert err.startswith(
        f"dlperf sweep: error: --run-id r1: its sweep runs on node9 (pid 4242), not on "
        f"{socket.gethostname()}: stop it there"
    )


def test_a_lock_naming_a_process_that_is_no_sweep_stops_nothing(tmp_path, capsys, held):
    held.write(f"pid {os.getpid()} on {socket.gethostname()}\n")  # this test: no dlperf sweep
    rc, _, err = stop(capsys, "--results", str(tmp_path), "--run-id", "r1")
    assert rc == 2
    assert f"sweep.lock: pid {os.getpid()} is not a dlperf sweep (" in err
    assert err.splitlines()[0].endswith("); nothing stopped")
    held.write("garbage\n")
    rc, _, err = stop(capsys, "--results", str(tmp_path), "--run-id", "r1")
    assert rc == 2 and "sweep.lock: held, but it names no sweep ('garbage')" in err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ([], "--stop: give the --run-id of the sweep to stop"),
        (["--run-id", "r1", "--epochs", "3"], "--stop takes --results and --run-id only, not "
         "--epochs 3"),
        (["--run-id", "../x"], "--run-id '../x'"),
        (["--run-id", "r1", "--dry-run"], "--stop and --dry-run: a stop is never a dry run"),
    ],
)  # fmt: skip
def test_stop_input_is_checked(tmp_path, capsys, argv, needle):
    rc, _, err = stop(capsys, "--results", str(tmp_path), *argv)
    assert rc == 2 and needle in err, err


def test_a_sweep_that_has_not_taken_its_lock_yet_is_found_by_its_command_line(tmp_path, capsys):
    # Ctrl-C in the first moments of benchmark.yml's sweep task: the sweep is starting (Python
    # importing) and holds no lock yet. It is found by `--results` (relative to its working
    # directory) and `--run-id`, and stopped; one of another run id, or a plan, is left alone.
    fake = tmp_path / "bin" / "dlperf"
    fake.parent.mkdir()
    fake.write_text("import time\ntime.sleep(60)\n")  # as python runs the dlperf script
    starting = subprocess.Popen(
        [sys.executable, str(fake), "sweep", "--results", "res", "--run-id", "r1"], cwd=tmp_path
    )
    other = subprocess.Popen(
        [sys.executable, str(fake), "sweep", "--results", "res", "--run-id=r2"], cwd=tmp_path
    )
    plan = subprocess.Popen(  # a --dry-run starts nothing and holds nothing: left alone
        [sys.executable, str(fake), "sweep", "--results", "res", "--run-id", "r1", "--dry-run"],
        cwd=tmp_path,
    )
    try:
        time.sleep(0.3)
        rc, out, _ = stop(capsys, "--results", str(tmp_path / "res"), "--run-id", "r1")
        assert (rc, out) == (
            0, f"--run-id r1: stopped its sweep (pid {starting.pid}), which had not started a point"
        )  # fmt: skip
        assert starting.wait(timeout=10) == -signal.SIGTERM
        assert other.poll() is None and plan.poll() is None
    finally:
        for proc in (starting, other, plan):
            proc.kill()
            proc.wait()


def test_a_resumed_sweeps_lock_names_its_own_holder_alone(tmp_path, capsys):
    # Every resume takes the lock of a run id a sweep held before: its line replaces the last
    # holder's (a file of two lines names no sweep, and --stop could not stop the resume).
    from dlperf.sweep import hold_run

    run = tmp_path / "r1"
    run.mkdir()
    (run / "sweep.lock").write_text("pid 1 on elsewhere\n")
    with hold_run(run, "r1"):
        assert (run / "sweep.lock").read_text() == f"pid {os.getpid()} on {socket.gethostname()}\n"
        rc, _, err = stop(capsys, "--results", str(tmp_path), "--run-id", "r1")
    assert rc == 2 and f"pid {os.getpid()} is not a dlperf sweep (" in err, err


def test_a_lock_naming_a_sweep_of_another_run_id_stops_nothing(tmp_path, capsys, held):
    # The line of a holder that has ended, whose pid now belongs to another run id's sweep
    # (a new holder has the lock and has not written its line yet): that sweep is left alone.
    fake = tmp_path / "bin" / "dlperf"
    fake.parent.mkdir()
    fake.write_text("import time\ntime.sleep(60)\n")
    other = subprocess.Popen(
        [sys.executable, str(fake), "sweep", "--results", str(tmp_path), "--run-id", "r2"]
    )
    try:
        held.write(f"pid {other.pid} on {socket.gethostname()}\n")
        time.sleep(0.3)
        rc, _, err = stop(capsys, "--results", str(tmp_path), "--run-id", "r1")
        assert rc == 2 and f"pid {other.pid} is a sweep of --run-id r2" in err, err
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
