"""`dlperf reproduce`: the whole study in one command, through the repository's playbooks.

    virtual cluster up (inventory/virtual only) -> site.yml -> validate.yml -> benchmark.yml
    (sweep, fetch to RESULTS/RUN_ID/, report)

Each phase runs through ansible-runner (dlperf.playbooks) with its full log kept under
RESULTS/RUN_ID/ansible/<phase>/, and its outcome and wall time recorded atomically in
RESULTS/RUN_ID/reproduce.json. Re-running with the same --run-id resumes: when the VMs were
not re-created, a site.yml that succeeded is not run again; validate.yml always runs (it is the
proof the cluster still works); benchmark.yml keeps the sweep's complete points.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dlperf.playbooks import PlaybookResult, run_playbook
from dlperf.results import write_atomic

VIRTUAL_INVENTORY = Path("inventory/virtual")
# One Python interpreter per VM instead of one per task: 4-5x faster on TCG guests.
VIRTUAL_STRATEGY = "mitogen_linear"


class ReproduceError(Exception):
    """Bad input or a failed phase; the message says which and where its log is."""


@dataclass
class ReproduceConfig:
    project: Path
    inventory: Path
    run_id: str
    results: Path
    deploy: bool = True

    @property
    def virtual(self) -> bool:
        inv = (self.project / self.inventory).resolve()
        home = (self.project / VIRTUAL_INVENTORY).resolve()
        return inv == home or home in inv.parents

    @property
    def run_dir(self) -> Path:
        return self.results / self.run_id


def check(cfg: ReproduceConfig) -> None:
    for name in ("site.yml", "playbooks/validate.yml", "playbooks/benchmark.yml", "ansible.cfg"):
        if not (cfg.project / name).is_file():
            raise ReproduceError(
                f"--project {cfg.project}: no {name} (run from the dlperf-cluster repository "
                "or point --project at it)"
            )
    if not (cfg.project / cfg.inventory).exists():
        raise ReproduceError(f"--inventory {cfg.inventory}: no such inventory")
    if not cfg.run_id.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ReproduceError(f"--run-id {cfg.run_id!r}: use letters, digits, '-', '_' and '.'")


def horovod_wheel(project: Path) -> str:
    """The Horovod wheel bootstrap built for this controller's Python (nothing compiles in a VM)."""
    out = subprocess.run(
        [str(project / "scripts" / "build-horovod-wheel.sh"), sys.executable],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise ReproduceError(f"scripts/build-horovod-wheel.sh failed:\n{out.stderr[-2000:]}")
    return out.stdout.strip()


def _phases(cfg: ReproduceConfig) -> list[tuple[str, str, dict]]:
    run = str(cfg.run_dir.resolve())
    phases: list[tuple[str, str, dict]] = []
    site_vars: dict = {}
    if cfg.virtual:
        phases.append(("cluster", "playbooks/virtual_cluster.yml", {"state": "present"}))
        site_vars = {"dl_stack_horovod_wheel": horovod_wheel(cfg.project)}
    if cfg.deploy:
        phases.append(("site", "site.yml", site_vars))
    phases.append(
        ("validate", "playbooks/validate.yml", {"dlperf_validate_report": f"{run}/validate.json"})
    )
    phases.append(
        (
            "benchmark",
            "playbooks/benchmark.yml",
            {"dlperf_run_id": cfg.run_id, "dlperf_results_dir": str(cfg.results.resolve())},
        )
    )
    return phases


def run_reproduce(cfg: ReproduceConfig, progress: Callable[[str, str], None] | None = None) -> dict:
    """Run every phase; returns the record written to RUN_DIR/reproduce.json."""
    check(cfg)
    say = progress or (lambda phase, text: None)
    record_file = cfg.run_dir / "reproduce.json"
    try:
        before = json.loads(record_file.read_text())
    except (OSError, ValueError):
        before = {}
    record = {
        "run_id": cfg.run_id,
        "inventory": str(cfg.inventory),
        "virtual": cfg.virtual,
        "phases": {},
    }
    recreated = False
    for phase, playbook, extravars in _phases(cfg):
        earlier = before.get("phases", {}).get(phase, {})
        if phase == "site" and earlier.get("status") == "ok" and not recreated:
            record["phases"][phase] = dict(earlier, resumed=True)
            say(phase, "already done for this run id (the VMs were not re-created): skipped")
            continue
        say(phase, f"{playbook}: starting")
        result: PlaybookResult = run_playbook(
            cfg.project,
            playbook,
            str(cfg.inventory),
            extravars,
            artifacts_dir=cfg.run_dir / "ansible" / phase,
            strategy=VIRTUAL_STRATEGY if cfg.virtual and phase != "cluster" else None,
            on_task=lambda task, phase=phase: say(phase, task),
        )
        entry = {
            "playbook": playbook,
            "status": "ok" if result.ok else "failed",
            "duration_s": round(result.duration_s, 1),
            "changed": result.total_changed(),
            "unreachable": sorted(h for h, n in result.count("dark").items() if n),
            "failed_hosts": sorted(h for h, n in result.count("failures").items() if n),
            "log": str(result.stdout_path),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        record["phases"][phase] = entry
        write_atomic(record_file, record)
        if phase == "cluster" and entry["changed"]:
            recreated = True
        if not result.ok:
            lost = ", ".join(entry["unreachable"]) or "none"
            failed = ", ".join(entry["failed_hosts"]) or "none"
            raise ReproduceError(
                f"phase {phase} ({playbook}) failed after {entry['duration_s']:.0f} s "
                f"(failed hosts: {failed}; unreachable: {lost})."
                f"\nFull log: {entry['log']}\n--- last lines ---\n{result.output_tail(40)}"
            )
        say(phase, f"done in {entry['duration_s']:.0f} s ({entry['changed']} changed)")
    report = cfg.run_dir / "report" / "index.html"
    record["report"] = str(report)
    write_atomic(record_file, record)
    return record


def phase_table(record: dict) -> list[str]:
    lines = [f"{'phase':<10} {'status':<8} {'wall':>8}  changed"]
    for name, p in record["phases"].items():
        status = "resumed" if p.get("resumed") else p["status"]
        lines.append(f"{name:<10} {status:<8} {p['duration_s']:>7.0f}s  {p['changed']}")
    return lines
