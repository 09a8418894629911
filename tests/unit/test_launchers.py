"""How the hosts launcher starts each node's telemetry sampler: here, or over SSH."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from dlperf.launchers.common import dlperf_binary
from dlperf.launchers.horovod import sampler_command

from ..conftest import process_alive


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
    from dlperf.launchers.horovod import Telemetry

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


def _rank_like(output: str, *, ignore_term: bool = False) -> subprocess.Popen:
    """A process whose command line is a `dlperf train` rank's writing to OUTPUT, once it has
    set its handlers."""
    code = "import signal, sys, time\n"
    if ignore_term:
        code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    code += "print('ready', flush=True)\ntime.sleep(600)"
    proc = subprocess.Popen(
        ["python3", "-c", code, "dlperf", "train", "--model", "x", "--output", output],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_stray_ranks_of_a_point_are_stopped_and_no_other_processes(tmp_path):
    from dlperf_module_utils.dlperf_job import stop_stray_ranks

    point = str(tmp_path / "r (1)" / ".2nodes.partial")  # blanks and ERE specials kept literal
    ranks = [_rank_like(point), _rank_like(point, ignore_term=True)]
    others = [_rank_like(point + "2"), _rank_like(point.replace(".2nodes", "x2nodes"))]
    try:
        assert stop_stray_ranks(["localhost", "localhost"], point, grace=2) == ["localhost"]
        for rank in ranks:  # SIGTERM, then SIGKILL for the one that ignores it
            assert rank.wait(timeout=10) in (-15, -9)
        assert ranks[1].returncode == -9
        assert [p.poll() for p in others] == [None, None]
        assert stop_stray_ranks(["localhost"], point, grace=2) == []  # none left
    finally:
        for proc in ranks + others:
            proc.kill()
            proc.wait()


def test_an_interrupt_while_a_job_runs_stops_its_whole_process_group(tmp_path):
    import _thread
    import threading

    import pytest
    from dlperf_module_utils.dlperf_job import run_logged

    # The job in a session of its own gets no Ctrl-C from the terminal: run_logged passes it on.
    pidfile = tmp_path / "child.pid"
    cmd = ["bash", "-c", f"sleep 600 & echo $! > {pidfile}; wait"]
    threading.Timer(1.5, _thread.interrupt_main).start()
    with pytest.raises(KeyboardInterrupt):
        run_logged(cmd, str(tmp_path / "job.log"), dict(os.environ), None, timeout=60, grace=5)
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while process_alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_alive(child), "the job's child outlived the interrupt"


def test_this_machine_is_known_by_any_of_its_names_in_any_case():
    import socket

    from dlperf_module_utils.dlperf_job import is_this_machine

    assert all(map(is_this_machine, ["localhost", "LocalHost", "127.0.0.1", socket.gethostname()]))
    assert not is_this_machine("c4140-01.invalid")


def test_a_resumed_point_first_stops_ranks_its_earlier_attempt_left_running(tmp_path, capsys):
    """A sweep killed without its cleanup (SIGKILL, the OOM killer) leaves its ranks training
    into .Nnodes.partial; the next run of that point stops them before reusing the directory,
    then runs the point (here with a model the ranks refuse: it fails, quickly)."""
    from dlperf.sweep import SweepConfig, run_point

    root = tmp_path / "r1"
    partial = root / ".1nodes.partial"
    (partial / "telemetry").mkdir(parents=True)
    ended = tmp_path / "ended"  # when the left-over rank got its SIGTERM
    code = (
        "import signal, sys, time\n"
        f"def stop(*_):\n    open({str(ended)!r}, 'w').write(repr(time.time()))\n    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\nprint('ready', flush=True)\ntime.sleep(600)"
    )
    left = subprocess.Popen(
        ["python3", "-c", code, "dlperf", "train", "--output", str(partial)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert left.stdout.readline() == "ready\n"
    cfg = SweepConfig([1], 1, "local", tmp_path, "r1", ["--model", "nope"], timeout=120)
    try:
        stored = run_point(cfg, root, 1)
        assert left.wait(timeout=30) == 0
    finally:
        left.kill()
        left.wait()
    # stopped before the point was launched again, not by the failed launch's own clean-up
    assert float(ended.read_text()) < stored["provenance"]["launch"]["requested_at"]
    assert "1 node(s): stopped ranks of an earlier attempt still running on localhost" in (
        capsys.readouterr().err
    )
    assert stored["status"] == "failed" and "--model 'nope'" in stored["error"]
    assert (root / "1nodes" / "result.json").exists() and not partial.exists()
    # run again: the failed record is replaced by the new one, nothing else left beside it
    before = (root / "1nodes" / "result.json").read_text()
    assert run_point(cfg, root, 1)["status"] == "failed"
    assert sorted(p.name for p in root.iterdir()) == ["1nodes"]
    assert (root / "1nodes" / "result.json").read_text() != before


def test_a_run_that_finished_before_its_sweep_was_interrupted_is_kept_not_run_again(
    tmp_path, capsys
):
    """An interrupt after the ranks finished (while the samplers stop, or before the rename)
    leaves a complete result in .Nnodes.partial: the next run of the point puts it in place
    instead of training again (a time-to-accuracy point is hours)."""
    from dlperf.sweep import SweepConfig, run_point

    root = tmp_path / "r1"
    partial = root / ".1nodes.partial"
    (partial / "telemetry").mkdir(parents=True)
    (partial / "telemetry" / "node1.jsonl").write_text('{"t": 1.0}\n')
    finished = {"schema_version": 2, "status": "ok", "mode": "tta", "world_size": 1,
                "time_to_accuracy_s": 3600.0, "provenance": {"hosts": ["node1"]}}  # fmt: skip
    (partial / "result.json").write_text(json.dumps(finished))
    # a model the ranks refuse: were the point launched again, it would fail
    cfg = SweepConfig([1], 1, "local", tmp_path, "r1", ["--model", "nope"], timeout=120)
    stored = run_point(cfg, root, 1)
    assert stored["status"] == "ok" and stored["time_to_accuracy_s"] == 3600.0
    assert "interrupted after this run had finished" in stored["provenance"]["launch"]["note"]
    assert json.loads((root / "1nodes" / "result.json").read_text()) == stored
    assert (root / "1nodes" / "telemetry" / "node1.jsonl").exists() and not partial.exists()
    assert "1 node(s): the earlier attempt had finished: kept, not run again" in (
        capsys.readouterr().err
    )
