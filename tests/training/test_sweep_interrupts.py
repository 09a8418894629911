"""`dlperf sweep --launcher local` interrupted: the whole sweep SIGKILLed mid-point and resumed,
a rank killed mid-point, and SIGTERM to the sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .conftest import BIN, ENV, TINY, sweep


def test_sweep_resumes_after_interrupted_point(tmp_path):
    train = [
        *TINY,
        "--batch-size",
        "16",
        "--classes",
        "10",
        "--iterations",
        "400",
        "--warmup-iterations",
        "2",
    ]
    cmd = [
        str(BIN / "dlperf"),
        "sweep",
        "--quiet",
        "--nodes",
        "1,2",
        "--results",
        str(tmp_path),
        "--run-id",
        "cut",
        "--telemetry-interval",
        "0.5",
        *train,
    ]
    proc = subprocess.Popen(
        cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    partial = tmp_path / "cut" / ".2nodes.partial"
    deadline = time.monotonic() + 300
    while not partial.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert partial.exists(), "the sweep never reached its second point"
    time.sleep(2)
    os.killpg(proc.pid, signal.SIGKILL)  # the whole sweep dies mid-point
    proc.wait()
    assert not (tmp_path / "cut" / "2nodes").exists(), "an interrupted point must not look finished"
    # its samplers (own sessions, so not in the killed group) end with the sweep's pipe
    deadline = time.monotonic() + 30
    while (
        time.monotonic() < deadline
        and subprocess.run(
            ["pgrep", "-f", f"dlperf telemetry --output {partial}"], capture_output=True
        ).returncode
        == 0
    ):
        time.sleep(0.5)
    assert subprocess.run(["pgrep", "-f", f"dlperf telemetry --output {partial}"]).returncode == 1
    # horovodrun was in the killed group: its ranks went with it
    deadline = time.monotonic() + 30
    while (
        subprocess.run(["pgrep", "-f", rank_pattern(partial)], capture_output=True).returncode == 0
    ):
        assert time.monotonic() < deadline, "ranks left running after the sweep's group died"
        time.sleep(0.5)
    first = (tmp_path / "cut" / "1nodes" / "result.json").read_text()

    short = [a if a != "400" else "6" for a in train]
    # Resuming takes the same settings; other train flags under the same run id are refused.
    rerun = sweep(tmp_path, "cut", *train)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "1 node(s): skipped" in rerun.stdout and "2 node(s): ok" in rerun.stdout
    assert (tmp_path / "cut" / "1nodes" / "result.json").read_text() == first
    assert json.loads((tmp_path / "cut" / "2nodes" / "result.json").read_text())["world_size"] == 2
    assert not partial.exists()
    other = sweep(tmp_path, "cut", *short)
    assert other.returncode == 2 and "other settings" in other.stderr


def rank_pattern(partial: Path) -> str:
    """The ranks of a point: python running dlperf (not horovodrun's line, nor a shell)."""
    return rf"python[0-9.]* \S+/dlperf train .*--output {partial}"


def two_ranks(sweep_proc, pattern: str) -> list[str]:
    """The pids of a 2-rank point's ranks once both run (within 300 s)."""
    deadline, ranks = time.monotonic() + 300, []
    while len(ranks) < 2 and time.monotonic() < deadline and sweep_proc.poll() is None:
        out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
        ranks = out.stdout.split()
        time.sleep(0.5)
    assert len(ranks) == 2, "the 2-rank point never started"
    return ranks


def test_a_rank_killed_mid_point_fails_that_point_only_and_a_rerun_repeats_just_it(tmp_path):
    train = [*TINY, "--batch-size", "16", "--classes", "10", "--iterations", "150",
             "--warmup-iterations", "2"]  # fmt: skip
    first = sweep(tmp_path, "kill", *train, nodes="1")
    assert first.returncode == 0, first.stdout + first.stderr
    one = (tmp_path / "kill" / "1nodes" / "result.json").read_text()
    proc = subprocess.Popen(
        [str(BIN / "dlperf"), "sweep", "--quiet", "--nodes", "1,2", "--results", str(tmp_path),
         "--run-id", "kill", "--telemetry-interval", "0.5", *train],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    ranks = two_ranks(proc, rank_pattern(tmp_path / "kill" / ".2nodes.partial"))
    time.sleep(3)
    os.kill(int(ranks[1]), signal.SIGKILL)  # one rank dies; the launcher must not hang
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, output
    assert "1 node(s): skipped" in output and "2 node(s): failed" in output
    failed = json.loads((tmp_path / "kill" / "2nodes" / "result.json").read_text())
    assert failed["status"] == "failed" and "log tail" in failed["error"]
    assert (tmp_path / "kill" / "1nodes" / "result.json").read_text() == one
    rerun = sweep(tmp_path, "kill", *train)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "1 node(s): skipped" in rerun.stdout and "2 node(s): ok" in rerun.stdout
    assert (tmp_path / "kill" / "1nodes" / "result.json").read_text() == one


def test_sigterm_stops_a_local_sweep_its_ranks_and_says_how_to_resume(tmp_path):
    train = [*TINY, "--batch-size", "16", "--classes", "10", "--iterations", "100000",
             "--warmup-iterations", "2"]  # fmt: skip
    proc = subprocess.Popen(
        [str(BIN / "dlperf"), "sweep", "--quiet", "--nodes", "1", "--procs-per-node", "2",
         "--results", str(tmp_path), "--run-id", "term", *train],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    pattern = rank_pattern(tmp_path / "term" / ".1nodes.partial")
    two_ranks(proc, pattern)
    proc.send_signal(signal.SIGTERM)  # as systemd's or a batch system's stop sends it
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert "dlperf sweep: stopped by SIGTERM" in output and "--run-id term runs it again" in output
    assert "Traceback" not in output
    deadline = time.monotonic() + 30  # horovodrun's ranks go with it
    while subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "ranks left running after the sweep stopped"
        time.sleep(0.5)
    assert not (tmp_path / "term" / "1nodes").exists()


# Stands in for SSH to another machine: runs the remote command line here, in a session of its
# own, as sshd runs it on a remote host, and relays its output as the client does; killing this
# client leaves the command running, as there, until it next writes.
FAKE_SSH = """#!{python}
import subprocess, sys
args, host = sys.argv[1:], None
while args and (args[0].startswith("-") or host is None):  # options before and after the host
    if args[0] in ("-o", "-p", "-i", "-l"):
        args = args[2:]
    elif args[0].startswith("-"):
        args = args[1:]
    else:
        host, args = args[0], args[1:]
remote = subprocess.Popen(["bash", "-c", " ".join(args)], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, start_new_session=True)
for line in remote.stdout:
    sys.stdout.buffer.write(line)
    sys.stdout.flush()
sys.exit(remote.wait())
"""


def test_a_hosts_point_past_its_timeout_leaves_no_rank_running_on_its_hosts(tmp_path):
    """horovodrun reaches a host that is not this machine (192.0.2.1, a documentation address)
    over `ssh`; killing it at --timeout kills its SSH clients, which leaves the ranks behind on
    a real remote host. The launcher stops them there, over SSH."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "ssh").write_text(FAKE_SSH.format(python=sys.executable))
    (bindir / "ssh").chmod(0o755)
    train = [*TINY, "--batch-size", "16", "--classes", "10", "--iterations", "100000",
             "--warmup-iterations", "2"]  # fmt: skip
    env = dict(ENV, PATH=f"{bindir}:{ENV['PATH']}")
    proc = subprocess.run(
        [str(BIN / "dlperf"), "sweep", "--quiet", "--launcher", "hosts", "--hosts", "192.0.2.1",
         "--network-interface", "lo", "--nodes", "1", "--timeout", "40", "--results",
         str(tmp_path / "r"), "--run-id", "stray", "--telemetry-interval", "0.5", *train],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 1 and "1 node(s): failed" in proc.stdout, proc.stdout + proc.stderr
    pattern = rank_pattern(tmp_path / "r" / "stray" / ".1nodes.partial")
    assert subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 1
    log = (tmp_path / "r" / "stray" / "1nodes" / "train.log").read_text()
    assert "the point ran past --timeout 40 s: stopped horovodrun" in log, log
    assert "stopped ranks left running on 192.0.2.1" in log, log
    # the rank had started (its sampler too, over the same `ssh`)
    assert (tmp_path / "r" / "stray" / "1nodes" / "telemetry" / "192.0.2.1.jsonl").stat().st_size
