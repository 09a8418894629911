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
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dlperf.playbooks import PlaybookResult, PlaybookStopped, run_playbook
from dlperf.reproduce_progress import (
    PhaseProgress,
    clock,
    follow,
    previous_durations,
    results_table,
    with_display,
)
from dlperf.results import write_atomic
from dlperf.sweep import SweepError, check_run_id

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
    # given to every phase, as ansible-playbook -e would (the phase's own variables win)
    extra_vars: dict = field(default_factory=dict)

    @property
    def virtual(self) -> bool:
        inv = (self.project / self.inventory).resolve()
        home = (self.project / VIRTUAL_INVENTORY).resolve()
        return inv == home or home in inv.parents

    @property
    def run_dir(self) -> Path:
        return self.results / self.run_id


def check(cfg: ReproduceConfig) -> None:
    for name in ("site.yml", "playbooks/validate.yml", "playbooks/benchmark.yml",
                 "playbooks/stop.yml", "ansible.cfg"):  # fmt: skip
        if not (cfg.project / name).is_file():
            raise ReproduceError(
                f"--project {cfg.project}: no {name} (run from the dlperf-cluster repository "
                "or point --project at it)"
            )
    if not (cfg.project / cfg.inventory).exists():
        raise ReproduceError(
            f"--inventory {cfg.inventory}: no such inventory under {cfg.project} (give an "
            "inventory directory or file, e.g. inventory/reference, or leave it out for the "
            "virtual cluster)"
        )
    try:
        check_run_id(cfg.run_id)
    except SweepError as exc:
        raise ReproduceError(str(exc)) from None


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
    return [(name, playbook, {**cfg.extra_vars, **own}) for name, playbook, own in phases]


def run_reproduce(
    cfg: ReproduceConfig,
    progress: Callable[[str, str], None] | None = None,
    live: Callable[[PhaseProgress], None] | None = None,
) -> dict:
    """Run every phase; returns the record written to RUN_DIR/reproduce.json.

    progress(phase, text) is told each phase's start, each task's name as it starts, and the
    phase's end (milestone() tells those apart); live(PhaseProgress) each task start and each
    host through a task."""
    check(cfg)
    say = progress or (lambda phase, text: None)
    show = live or (lambda state: None)
    expected = previous_durations(cfg.results, cfg.run_id)
    record_file = cfg.run_dir / "reproduce.json"
    try:
        before = json.loads(record_file.read_text())
    except (OSError, ValueError):
        before = {}
    if before.get("inventory") and Path(before["inventory"]) != Path(cfg.inventory):
        raise ReproduceError(
            f"--run-id {cfg.run_id}: its results came from --inventory {before['inventory']}; "
            f"give that inventory again, or a new --run-id for {cfg.inventory}"
        )
    record = {
        "run_id": cfg.run_id,
        "inventory": str(cfg.inventory),
        "virtual": cfg.virtual,
        "phases": {},
        # The last site phase that finished, for as long as the machines it deployed stand.
        "deployed": deployed_site(before),
    }
    for phase, playbook, extravars in _phases(cfg):
        if phase == "site" and record["deployed"]:
            record["phases"][phase] = dict(record["deployed"], resumed=True)
            say(phase, "already done for this run id (the VMs were not re-created): skipped")
            continue
        kept = record["deployed"]
        if phase == "cluster":
            # Written before the VMs may change: a run stopped in this phase deploys again.
            record["deployed"] = None
            write_atomic(record_file, record)
        steps = cfg.run_dir / "ansible" / phase / "steps.log"
        state = PhaseProgress(phase, expected.get(phase), steps)
        last = f" (the last run took {clock(expected[phase])})" if phase in expected else ""
        say(phase, f"{playbook}: starting{last}")
        show(state)

        try:
            result: PlaybookResult = run_playbook(
                cfg.project,
                playbook,
                str(cfg.inventory),
                extravars,
                artifacts_dir=cfg.run_dir / "ansible" / phase,
                strategy=VIRTUAL_STRATEGY if cfg.virtual and phase != "cluster" else None,
                **follow(state, show, say),
                envvars={"DLPERF_PROGRESS_FILE": str(steps)},
            )
        except PlaybookStopped as stopped:
            if phase == "benchmark":
                say(phase, "stopped: stopping the sweeps it started on the launch node")
                stopped.cleanup = stop_sweeps(cfg, extravars)
            raise
        entry = {
            "playbook": playbook,
            "status": "ok" if result.ok else "failed",
            "duration_s": round(result.duration_s, 1),
            "changed": result.total_changed(),
            "changed_by_host": result.changed_by_host(),
            "unreachable": sorted(h for h, n in result.count("dark").items() if n),
            "failed_hosts": sorted(h for h, n in result.count("failures").items() if n),
            "log": str(result.stdout_path),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        record["phases"][phase] = entry
        if phase == "cluster" and not entry["changed"]:
            record["deployed"] = kept
        elif phase == "site" and result.ok:
            record["deployed"] = entry
        write_atomic(record_file, record)
        if not result.ok:
            lost = ", ".join(entry["unreachable"]) or "none"
            failed = ", ".join(entry["failed_hosts"]) or "none"
            again = f"--run-id {cfg.run_id}" + (
                "" if cfg.virtual else f" --inventory {cfg.inventory}"
            )
            how = "the cluster phase restarts a stopped VM" if cfg.virtual else "power, SSH"
            hint = (
                f"\nBring {lost} back ({how}) and run again with {again}: "
                "the phases that finished are kept."
                if entry["unreachable"]
                else f"\nFix the failure and run again with {again}."
            )
            raise ReproduceError(
                f"phase {phase} ({playbook}) failed after {entry['duration_s']:.0f} s "
                f"(failed hosts: {failed}; unreachable: {lost})."
                f"{hint}\nFull log: {entry['log']}\n--- last lines ---\n{result.output_tail(40)}"
            )
        if phase == "benchmark":
            _judge_points(cfg, entry, record, record_file)
        say(phase, f"done in {entry['duration_s']:.0f} s ({entry['changed']} changed)")
    report = cfg.run_dir / "report" / "index.html"
    record["report"] = str(report)
    write_atomic(record_file, record)
    return record


def stop_sweeps(cfg: ReproduceConfig, extravars: dict) -> str:
    """playbooks/stop.yml after a stopped benchmark phase: the sweep benchmark.yml started on
    the launch node outlives the stopped ansible-playbook. What became of it, as a sentence."""
    by_hand = (
        f"ansible-playbook -i {cfg.inventory} playbooks/stop.yml -e dlperf_run_id={cfg.run_id}"
        + (" and the -e variables given here" if cfg.extra_vars else "")
    )
    try:
        result = run_playbook(
            cfg.project,
            "playbooks/stop.yml",
            str(cfg.inventory),
            extravars,
            artifacts_dir=cfg.run_dir / "ansible" / "stop",
            strategy=VIRTUAL_STRATEGY if cfg.virtual else None,
        )
        said = result.stdout_path.read_text(errors="replace") if result.ok else ""
    except PlaybookStopped:
        return f"stopping its sweeps was itself stopped: they run on until `{by_hand}` stops them"
    except Exception as exc:  # ansible-runner failing to start, an unreadable log
        return f"its sweeps could not be stopped ({exc}): they run on until `{by_hand}` stops them"
    if not result.ok:
        return (
            f"its sweeps could not be stopped (log: {result.stdout_path}): they run on until "
            f"`{by_hand}` stops them"
        )
    if "stopped its sweep" in said or "killed" in said:
        return "its sweep on the launch node was stopped (playbooks/stop.yml)"
    return "no sweep of it was running on the launch node (playbooks/stop.yml)"


def deployed_site(before: dict) -> dict | None:
    """The finished site phase an earlier record holds (records without "deployed" kept it
    among their phases)."""
    if "deployed" in before:
        return before["deployed"]
    site = before.get("phases", {}).get("site", {})
    return site if site.get("status") == "ok" else None


def sweep_points(root: Path) -> dict[str, str]:
    """Status of every point fetched under RESULTS/RUN_ID: {"tta/2nodes": "ok", ...}."""
    points = {}
    for result in sorted(root.glob("*/*nodes/result.json")):
        try:
            data = json.loads(result.read_text())
        except (OSError, ValueError):
            data = {"status": "unreadable"}
        status = data.get("status", "unknown")
        if status == "ok" and data.get("mode") == "tta" and data.get("reached_target") is False:
            status = "target not reached"  # ran to its epoch limit: no time to accuracy
        points[f"{result.parent.parent.name}/{result.parent.name}"] = status
    return points


def _judge_points(cfg: ReproduceConfig, entry: dict, record: dict, record_file: Path) -> None:
    """benchmark.yml goes on past a failed point (a rerun repeats just it): the phase is failed
    when no point succeeded, partial when some did not."""
    points = sweep_points(cfg.results / cfg.run_id)
    failed = sorted(name for name, status in points.items() if status != "ok")
    entry["points"], entry["failed_points"] = points, failed
    if not points or len(failed) == len(points):
        entry["status"] = "failed"
        write_atomic(record_file, record)
        raise ReproduceError(
            f"phase benchmark: no sweep point succeeded ({', '.join(failed) or 'no results'} "
            f"under {cfg.results / cfg.run_id}); each point's result.json holds its log tail. "
            f"Fix the cause and run again with --run-id {cfg.run_id}."
        )
    if failed:
        entry["status"] = "partial"
        write_atomic(record_file, record)


def phase_table(record: dict) -> list[str]:
    lines = [f"{'phase':<10} {'status':<8} {'wall':>8}  changed"]
    for name, p in record["phases"].items():
        status = "resumed" if p.get("resumed") else p["status"]
        lines.append(f"{name:<10} {status:<8} {p['duration_s']:>7.0f}s  {p['changed']}")
    return lines


def run_command(cfg: ReproduceConfig, quiet: bool = False) -> int:
    """Run with a live display on a terminal: the phase, its current task, hosts through it,
    elapsed time and an ETA from an earlier run. Elsewhere (logs, CI) plain timestamped lines:
    each phase's start and end, and the current task once a minute."""
    try:
        record = with_display(
            lambda progress, live: run_reproduce(cfg, progress, live),
            f"reproduce {cfg.run_id}",
            quiet,
        )
    except ReproduceError as exc:
        print(f"dlperf reproduce: {exc}", file=sys.stderr)
        print(f"record: {cfg.run_dir / 'reproduce.json'}; resume with --run-id {cfg.run_id}",
              file=sys.stderr)  # fmt: skip
        return 1
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM inside a playbook (PlaybookStopped)
        cleanup = getattr(exc, "cleanup", None)
        print(f"dlperf reproduce: {str(exc) or 'stopped by SIGINT'}; "
              + (f"{cleanup}; " if cleanup else "")
              + f"the phases that finished are kept, the stopped one runs again: resume with "
              f"--run-id {cfg.run_id}", file=sys.stderr)  # fmt: skip
        return 128 + getattr(exc, "signum", signal.SIGINT)
    print("\n".join(phase_table(record)))
    table = results_table(cfg.run_dir)
    if table:
        print()
        print("\n".join(table))
    print(f"report: {record['report']}")
    benchmark = record["phases"].get("benchmark", {})
    points = benchmark.get("points", {})
    listed = benchmark.get("failed_points") or []
    ran_out = [p for p in listed if points.get(p) == "target not reached"]
    failed = [p for p in listed if p not in ran_out]
    if ran_out:
        print(f"points that used their epochs below the target (kept: a run again does not "
              f"repeat them): {', '.join(ran_out)}")  # fmt: skip
    if failed:
        print(f"failed points (the report shows their log tails): {', '.join(failed)}; "
              f"run again with --run-id {cfg.run_id} to repeat just those")  # fmt: skip
    return 1 if listed else 0
