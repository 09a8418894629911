"""Shared helpers: run real ansible-playbook processes against local test inventories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


@dataclass
class PlaybookRun:
    rc: int
    output: dict
    stderr: str

    @property
    def stats(self) -> dict:
        return self.output.get("stats", {})

    def task_results(self) -> list[tuple[str, str, dict]]:
        """(task name, host, result) for every task result in run order."""
        rows = []
        for play in self.output.get("plays", []):
            for task in play.get("tasks", []):
                for host, result in task.get("hosts", {}).items():
                    rows.append((task["task"]["name"], host, result))
        return rows

    def play(self, name: str) -> PlaybookRun:
        """The run as seen by one play of it (by name): its tasks only."""
        plays = [p for p in self.output.get("plays", []) if p["play"]["name"] == name]
        assert len(plays) == 1, f"no single play named {name!r}"
        return PlaybookRun(self.rc, {"plays": plays}, self.stderr)

    def changed(self) -> int:
        """How many task results reported a change."""
        return sum(1 for _, _, res in self.task_results() if res.get("changed"))

    def failed_tasks(self) -> list[tuple[str, str]]:
        """(task name, message) of each failed task; a loop's failed items' messages joined."""
        failed = []
        for name, _, res in self.task_results():
            if res.get("failed"):
                msgs = [res.get("msg", "")]
                msgs += [
                    item.get("msg", "") for item in res.get("results", []) if item.get("failed")
                ]
                failed.append((name, "\n".join(msgs)))
        return failed


def ansible_bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def run_ansible_playbook(
    workdir: Path,
    plays: list,
    inventory: dict,
    extra_vars: dict | None = None,
    check: bool = True,
) -> PlaybookRun:
    """Write a playbook + inventory into WORKDIR and run it with the JSON callback."""
    playbook = workdir / "play.yml"
    playbook.write_text(yaml.safe_dump(plays, sort_keys=False))
    inv = workdir / "inventory.yml"
    inv.write_text(yaml.safe_dump(inventory, sort_keys=False))
    cmd = [ansible_bin("ansible-playbook"), "-i", str(inv), str(playbook)]
    if check:
        cmd.append("--check")
    if extra_vars is not None:
        ev = workdir / "extra_vars.json"
        ev.write_text(json.dumps(extra_vars))
        cmd += ["-e", f"@{ev}"]
    # The repository's plugin paths, without its display callbacks (they would mix text into
    # the JSON on stdout).
    cfg = workdir / "ansible.cfg"
    cfg.write_text(
        "[defaults]\n"
        f"roles_path = {REPO / 'roles'}\n"
        f"collections_path = {REPO / 'collections'}\n"
        "stdout_callback = ansible.posix.json\n"
        "interpreter_python = auto_silent\n"
        "nocolor = true\n"
    )
    return json_run(cmd, dict(os.environ, ANSIBLE_CONFIG=str(cfg)), workdir)


def json_run(cmd: list[str], env: dict, cwd: Path) -> PlaybookRun:
    """Run an ansible-playbook command whose stdout callback is ansible.posix.json."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    try:
        output = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(
            f"no JSON from ansible-playbook:\n{proc.stdout}\n{proc.stderr}"
        ) from exc
    return PlaybookRun(proc.returncode, output, proc.stderr)


@pytest.fixture
def run_playbook(tmp_path):
    """Run plays against an inventory in tmp_path (see run_ansible_playbook)."""

    def run(plays: list, inventory: dict, extra_vars: dict | None = None, check: bool = True):
        return run_ansible_playbook(tmp_path, plays, inventory, extra_vars, check)

    return run


def process_alive(pid: int) -> bool:
    """Whether PID runs: gone, or a zombie its parent has not reaped yet, is not running."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
