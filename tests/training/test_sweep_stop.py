"""playbooks/stop.yml and `dlperf sweep --stop`: a sweep that runs on with nothing to stop it
(started in a session of its own, as sshd runs a remote command whose client is gone) is
stopped with its ranks, the way `dlperf reproduce` does after a stopped benchmark phase."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from dlperf.playbooks import run_playbook

from .conftest import BIN, ENV, TINY
from .test_sweep_interrupts import rank_pattern, two_ranks

REPO = Path(__file__).resolve().parents[2]


def test_stop_playbook_ends_the_sweep_of_a_run_id_and_its_ranks(tmp_path):
    shared = tmp_path / "shared"
    results = shared / "results" / "r1"  # where benchmark.yml runs the sweeps of run id r1
    train = [*TINY, "--batch-size", "16", "--classes", "10", "--iterations", "100000",
             "--warmup-iterations", "2"]  # fmt: skip
    proc = subprocess.Popen(
        [str(BIN / "dlperf"), "sweep", "--quiet", "--nodes", "1", "--procs-per-node", "2",
         "--results", str(results), "--run-id", "tta", *train],
        env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        pattern = rank_pattern(results / "tta" / ".1nodes.partial")
        two_ranks(proc, pattern)

        inventory = tmp_path / "hosts.yml"
        inventory.write_text(
            "all:\n  children:\n    compute:\n      hosts:\n        node1:\n"
            "          ansible_connection: local\n"
            f"          ansible_python_interpreter: {sys.executable}\n"
            "          ansible_become: false\n"
        )
        extravars = {
            "dlperf_run_id": "r1",
            "dlperf_shared_dir": str(shared),
            "dl_stack_venv": str(BIN.parent),
            "dlperf_benchmark_modes": ["tta", "throughput"],  # no throughput sweep ever ran
        }
        first = run_playbook(REPO, "playbooks/stop.yml", str(inventory), extravars,
                             artifacts_dir=tmp_path / "a1")  # fmt: skip
        log = first.stdout_path.read_text()
        assert first.ok, first.output_tail()
        assert first.count("changed") == {"node1": 1}, log
        assert f"--run-id tta: stopped its sweep (pid {proc.pid})" in log
        assert "--run-id throughput: no sweep of it under" in log
        # the sweep ended as its Ctrl-C ends it, before the playbook did: ranks gone, no point kept
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        assert "dlperf sweep: stopped by SIGTERM" in proc.stdout.read()
        assert subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 1
        assert not (results / "tta" / "1nodes").exists()

        again = run_playbook(REPO, "playbooks/stop.yml", str(inventory), extravars,
                             artifacts_dir=tmp_path / "a2")  # fmt: skip
        assert again.ok and again.total_changed() == 0, again.output_tail()
        assert "--run-id tta: its sweep is not running: nothing to stop" in again.output_tail()
    finally:
        if proc.poll() is None:  # a failed check: the sweep and its ranks go
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
