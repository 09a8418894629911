"""How the hosts launcher starts each node's telemetry sampler: here, or over SSH."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from dlperf.launchers import dlperf_binary, sampler_command


def test_the_remote_shell_gets_the_samplers_arguments_back_whole():
    directory = Path("/shared/my runs/$HOME;x/1nodes/telemetry")  # blanks, $ and ; kept
    cmd = sampler_command("c4140-02", directory, 0.5)
    assert cmd[:4] == ["ssh", "-o", "BatchMode=yes", "c4140-02"] and len(cmd) == 5
    # What sshd's shell on the node makes of the one command line: a real sh splits it.
    words = subprocess.run(
        ["sh", "-c", f'set -- {cmd[4]}; printf "%s\\n" "$@"'],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert words == [
        dlperf_binary(), "telemetry", "--output", f"{directory}/c4140-02.jsonl",
        "--interval", "0.5", "--stop-on-stdin-eof",
    ]  # fmt: skip


def test_here_the_sampler_is_started_without_a_shell():
    cmd = sampler_command("localhost", Path("/r/with blank"), 1.0)
    assert cmd[:2] == [dlperf_binary(), "telemetry"] and cmd[3].startswith("/r/with blank/")


def test_a_relative_results_directory_reaches_the_hosts_as_an_absolute_path(tmp_path):
    # Remote samplers start in the benchmark user's home, not here: a relative path would put
    # their telemetry (or nothing) elsewhere.
    proc = subprocess.run(
        [dlperf_binary(), "sweep", "--dry-run", "--launcher", "hosts", "--hosts", "a,b",
         "--nodes", "2", "--results", "rel", "--run-id", "x"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"results in {tmp_path / 'rel' / 'x'}" in proc.stdout, proc.stdout
    assert f"--output {tmp_path / 'rel' / 'x' / '.2nodes.partial'}" in proc.stdout, proc.stdout


def test_a_second_sweep_of_a_running_run_id_is_refused_naming_the_first(tmp_path):
    from dlperf.sweep import hold_run

    root = tmp_path / "results" / "r1"
    root.mkdir(parents=True)
    with hold_run(root, "r1"):  # the first sweep, still running
        proc = subprocess.run(
            [dlperf_binary(), "sweep", "--results", str(tmp_path / "results"), "--run-id", "r1"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert f"--run-id r1: another sweep of it is running (pid {os.getpid()} on" in proc.stderr
    assert sorted(p.name for p in root.iterdir()) == ["sweep.lock"]  # it started nothing


def test_a_sampler_that_cannot_start_says_why_in_its_hosts_log(tmp_path):
    from dlperf.launchers import Telemetry

    # A host SSH cannot reach (BatchMode: no prompt): the refusal is kept, not thrown away.
    telemetry = Telemetry(["localhost", "nohost.invalid"], tmp_path, 0.2)
    time.sleep(1.0)
    telemetry.stop()
    assert (tmp_path / "nohost.invalid.log").read_text().strip(), "ssh said nothing?"
    assert not (tmp_path / "localhost.log").exists()  # nothing to say: no file
    assert list(tmp_path.glob("*.jsonl"))  # the local sampler sampled


def test_train_flags_are_read_in_both_of_argparses_forms():
    from dlperf_module_utils.dlperf_job import train_flag

    assert train_flag(["--mode", "tta", "--data", "x"], "--mode", "throughput") == "tta"
    assert train_flag(["--mode=tta"], "--mode", "throughput") == "tta"
    assert train_flag(["--backend=pytorch", "--backend", "mxnet"], "--backend", "x") == "mxnet"
    assert train_flag(["--mode"], "--mode", "throughput") == "throughput"
    assert train_flag(["--model", "resnet50_v1.5"], "--mode", "throughput") == "throughput"


def test_a_file_system_that_cannot_lock_runs_the_sweep_unguarded_and_says_so(
    tmp_path, monkeypatch, capsys
):
    import errno
    import fcntl

    from dlperf.sweep import hold_run

    def no_lock_manager(*_args):  # what flock meets on an NFSv3 mount without lockd/statd
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_lock_manager)
    with hold_run(tmp_path, "r1"):
        pass
    assert "cannot be locked (No locks available); going on without" in capsys.readouterr().err
