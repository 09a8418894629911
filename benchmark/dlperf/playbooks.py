"""Run the repository's playbooks through ansible-runner: the same playbooks a user runs with
ansible-playbook, with the repository's ansible.cfg, and a result that says per host what
changed, failed or was unreachable, how long it took and where the full output is."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HOST_OUTCOMES = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
}


class PlaybookStopped(KeyboardInterrupt):
    """A playbook stopped by Ctrl-C or SIGTERM before its end."""

    def __init__(self, playbook: str, signum: int, name: str):
        super().__init__(f"{playbook} stopped by {name}")
        self.playbook, self.signum = playbook, signum
        self.cleanup: str | None = None  # what was done after it, e.g. its sweeps stopped


@dataclass
class PlaybookResult:
    playbook: str
    rc: int
    status: str
    duration_s: float
    stats: dict = field(default_factory=dict)
    stdout_path: Path | None = None

    @property
    def ok(self) -> bool:
        return self.rc == 0

    def count(self, kind: str) -> dict[str, int]:
        """Per host count of one recap column: changed, failures, dark (unreachable), ok."""
        return dict(self.stats.get(kind, {}) or {})

    def changed_by_host(self) -> dict[str, int]:
        """Changes per host, 0 included for every host the play reached or tried to."""
        hosts = {h for kind in ("ok", "changed", "dark", "failures", "skipped")
                 for h in self.count(kind)}  # fmt: skip
        changed = self.count("changed")
        return {h: changed.get(h, 0) for h in sorted(hosts)}

    def total_changed(self) -> int:
        return sum(self.count("changed").values())

    def output_tail(self, lines: int = 60) -> str:
        if self.stdout_path is None or not self.stdout_path.exists():
            return ""
        return "\n".join(self.stdout_path.read_text(errors="replace").splitlines()[-lines:])


def run_playbook(
    project_dir: Path,
    playbook: str,
    inventory: str,
    extravars: dict | None = None,
    *,
    artifacts_dir: Path | None = None,
    strategy: str | None = None,
    on_task: Callable[[str], None] | None = None,
    on_result: Callable[[dict], None] | None = None,
    on_host_done: Callable[[str, str], None] | None = None,
    check: bool = False,
    envvars: dict | None = None,
) -> PlaybookResult:
    """Run PROJECT_DIR/PLAYBOOK against INVENTORY (relative to PROJECT_DIR or absolute).

    strategy: an Ansible strategy plugin (mitogen_linear for the virtual cluster).
    on_task is called with each task's name as it starts (for progress displays); on_result
    with the event data (host, task, res) of each task result on a host; on_host_done with
    (host, outcome) when a host is through the current task (ok, failed, skipped, unreachable).
    check: check mode.
    envvars: more environment for ansible-playbook (ANSIBLE_* settings)."""
    import ansible_runner

    project_dir = Path(project_dir).resolve()
    private = Path(artifacts_dir or tempfile.mkdtemp(prefix="dlperf-runner-"))
    private.mkdir(parents=True, exist_ok=True)
    env = {
        "ANSIBLE_CONFIG": str(project_dir / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        # ansible-playbook (and dlperf, for the report) from the same venv as this Python
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
    }
    if strategy:
        env["ANSIBLE_STRATEGY"] = strategy
    env.update(envvars or {})

    def handler(event: dict) -> bool:
        if on_task and event.get("event") == "playbook_on_task_start":
            on_task(event.get("event_data", {}).get("task", ""))
        kind = event.get("event", "")
        if on_result and kind in ("runner_on_ok", "runner_on_failed"):
            on_result(event.get("event_data", {}))
        if on_host_done and kind in HOST_OUTCOMES:
            on_host_done(event.get("event_data", {}).get("host", ""), HOST_OUTCOMES[kind])
        return True

    # Ctrl-C or SIGTERM stops the playbook (ansible-runner kills its process group) and is
    # raised here as KeyboardInterrupt: a stopped playbook is not a finished one that changed
    # nothing. ansible-runner's own handlers would stay installed after it returns and turn the
    # next Ctrl-C into nothing; these are put back.
    stopped: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda number, _frame: stopped.append(number))
    start = time.monotonic()
    try:
        runner = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(project_dir),
            playbook=str(project_dir / playbook),
            inventory=str(project_dir / inventory),
            extravars=extravars or {},
            envvars=env,
            cmdline="--check" if check else None,
            quiet=True,
            event_handler=handler,
            cancel_callback=lambda: bool(stopped),
        )
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)
    duration = time.monotonic() - start
    if stopped or runner.status == "canceled":
        name = signal.Signals(stopped[0]).name if stopped else "a cancel"
        raise PlaybookStopped(playbook, stopped[0] if stopped else signal.SIGINT, name)
    stdout = Path(runner.config.artifact_dir) / "stdout"
    return PlaybookResult(
        playbook=playbook,
        rc=runner.rc,
        status=runner.status,
        duration_s=duration,
        stats=runner.stats or {},
        stdout_path=stdout,
    )
