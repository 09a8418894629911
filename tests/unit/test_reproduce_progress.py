"""`dlperf reproduce`'s progress: the live line, the plain lines in logs, ETAs from earlier
runs, the milestones it prints and the closing tables."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from dlperf.reproduce import ReproduceConfig, run_command, run_reproduce
from dlperf.reproduce_progress import (
    PhaseProgress,
    follow,
    milestone,
    previous_durations,
    results_table,
    with_display,
)

from .test_reproduce import BIN, REPO, local_project


def test_the_eta_comes_from_the_latest_other_run_that_finished_the_phase(tmp_path):
    def record(run_id, finished, **phases):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "reproduce.json").write_text(json.dumps({"phases": {
            name: {"status": status, "duration_s": wall, "finished": finished, **extra}
            for name, (status, wall, extra) in phases.items()}}))  # fmt: skip

    record("old", "2026-01-01T10:00:00+0000", site=("ok", 900.0, {}), benchmark=("ok", 50.0, {}))
    record("new", "2026-02-01T10:00:00+0000", site=("ok", 600.0, {}),
           benchmark=("failed", 5.0, {}), validate=("ok", 30.0, {"resumed": True}))  # fmt: skip
    record("this", "2026-03-01T10:00:00+0000", site=("ok", 1.0, {}))
    assert previous_durations(tmp_path, "this") == {"site": 600.0, "benchmark": 50.0}


def test_the_live_line_names_the_task_hosts_through_it_and_the_time_left():
    state = PhaseProgress("site", expected_s=600)
    state.start_task("dl_stack : Install dlperf")
    for host, outcome in [("c1", "ok"), ("c2", "unreachable"), ("c3", "ok")]:
        state.host_done(host, outcome)
    state.start_task("slurm : Start slurmd")
    state.host_done("c1", "ok")
    line = state.line()
    assert line.startswith("slurm : Start slurmd | 1/3 hosts | 1 failed | 0:0")
    assert line.endswith("left") and "~9:5" in line
    state.t0 -= 700
    assert state.line().endswith("longer than the last run")


def test_the_summary_table_is_the_reports(tmp_path):
    run = tmp_path / "run1"
    subprocess.run([str(BIN / "dlperf"), "report", str(REPO / "tests/fixtures/sweep"),
                    "--output", str(run / "report")], check=True, capture_output=True)  # fmt: skip
    table = results_table(run)
    assert table[0].split() == ["nodes", "workers", "img/s", "speedup", "efficiency", "time", "to",
                                "accuracy", "speedup"]  # fmt: skip
    assert [row.split()[:2] for row in table[1:]] == [["1", "1"], ["2", "2"]]
    # the efficiency is the throughput's, beside its speedup: 0.64 over twice the nodes
    assert table[2].split()[3:5] == ["0.64", "32%"]
    assert table[1].split()[3:5] == ["1.00", "100%"]
    assert results_table(tmp_path / "elsewhere") == []


def test_plain_output_has_each_phase_with_the_last_runs_time_and_the_tables(tmp_path, capsys):
    first = local_project(tmp_path, {"1nodes": "ok"}, run_id="first")
    assert run_command(first, quiet=True) == 0
    capsys.readouterr()
    second = ReproduceConfig(first.project, first.inventory, "second", first.results)
    assert run_command(second, quiet=True) == 0
    out = capsys.readouterr().out
    assert re.search(r"\] site: site.yml: starting \(the last run took 0:\d\d\)", out), out
    assert re.search(r"\] benchmark: done in \d+ s", out), out
    assert "phase      status" in out and out.rstrip().endswith("index.html")


def test_a_long_task_shows_the_latest_step_its_script_wrote(tmp_path):
    steps = tmp_path / "steps.log"
    state = PhaseProgress("cluster", steps=steps)
    state.start_task("virtual_cluster : Build the provisioning image (once; cached by its recipe)")
    assert " | image" not in state.line()  # nothing written yet
    now = int(time.time())
    state.started = now - 120  # the phase began two minutes ago
    steps.write_text(f"{now - 3600} built /old/image\n")  # a line from an earlier phase
    assert "built" not in state.line()
    steps.write_text(
        f"{now - 3600} built /old/image\n{now - 65} image 2/4: apt installs 40 packages\n"
    )
    assert " | image 2/4: apt installs 40 packages (1:0" in state.line()


def test_progress_hears_every_task_and_tells_milestones_apart(tmp_path):
    heard: list[tuple[str, str]] = []
    run_reproduce(local_project(tmp_path, {"1nodes": "ok"}), lambda p, t: heard.append((p, t)))
    assert ("site", "site.yml: starting") in heard
    tasks = [t for p, t in heard if p == "site" and not milestone(t)]
    assert tasks, heard  # the playbook's tasks reach progress by name (fault injection uses it)
    assert [t for p, t in heard if milestone(t)][-1].startswith("done in ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("site.yml: starting (last run 468 s)", True),
        ("already done for this run id (the VMs were not re-created): skipped", True),
        ("done in 231 s (12 changed)", True),
        ("Report that IPoIB is skipped", False),  # a task's name, however it ends
        ("Install dlperf and its engines from the wheelhouse (train,cpu)", False),
    ],
)
def test_milestones_are_phase_starts_skips_and_ends_never_task_names(text, expected):
    assert milestone(text) is expected


def test_in_logs_a_long_task_gets_a_line_at_every_interval(capsys):
    def run(say, show):
        state = PhaseProgress("site")
        callbacks = follow(state, show, say)
        callbacks["on_task"]("nfs_server : Export the shared directory")
        callbacks["on_host_done"]("head01", "ok")
        callbacks["on_host_done"]("c4140-01", "failed")
        time.sleep(0.7)  # a long task: no events, yet the line comes again
        return {"ok": True}

    assert with_display(run, "test", quiet=True, line_every_s=0.2) == {"ok": True}
    lines = [x for x in capsys.readouterr().out.splitlines() if "nfs_server" in x]
    assert len(lines) >= 2, lines
    assert all(
        re.search(
            r"^\[\d\d:\d\d:\d\d \+ *\d+s\] site: nfs_server : Export the shared "
            r"directory \| 2/2 hosts \| 1 failed \| 0:00$",
            x,
        )
        for x in lines
    ), lines
