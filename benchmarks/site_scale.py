#!/usr/bin/env python3
"""How site.yml's cost grows with the cluster: the reference inventory on 1+N systemd containers
(tests/rehearsal/cluster.py: head01 and the first N of c4140-01..08, over SSH as admin), a
first converge and then no-change re-runs under each Ansible setting:

  linear   Ansible's linear strategy with SSH pipelining and ControlPersist (ansible.cfg)
  free     the free strategy (each host runs ahead through its tasks)
  mitogen  Mitogen's linear strategy (one Python interpreter kept per host; plugins/strategy/)

Prints one table: wall time of each run, the tasks it ran, and the cost per task (wall time /
tasks). Every setting shares ansible.cfg's forks (25) and fact cache. The first converge runs
with --first (default linear); a run that fails is listed with the tasks that failed and the
next one goes on.

    .venv/bin/python benchmarks/site_scale.py                       # 1+2, 1+4, 1+8; ~30 min
    .venv/bin/python benchmarks/site_scale.py --sizes 2 --settings linear,mitogen --json out.json
Needs root podman (scripts/bootstrap.sh installs it) and the test image (built on first use).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dlperf.playbooks import run_playbook  # noqa: E402
from dlperf.reproduce import horovod_wheel  # noqa: E402

from tests.rehearsal.cluster import Cluster  # noqa: E402

STRATEGIES = {"linear": None, "free": "free", "mitogen": "mitogen_linear"}


def failed_tasks(result) -> list[str]:
    """'host: task' for each failure in a run's output."""
    failures, task = [], ""
    for line in result.stdout_path.read_text(errors="replace").splitlines():
        if line.startswith(("TASK [", "RUNNING HANDLER [")):
            task = line.split("[", 1)[1].rsplit("]", 1)[0]
        elif line.startswith("fatal: ["):
            failures.append(f"{line[len('fatal: [') :].split(']', 1)[0]}: {task}")
    return failures


def timed_run(cluster: Cluster, setting: str) -> dict:
    tasks: list[str] = []
    result = run_playbook(
        REPO,
        "site.yml",
        str(cluster.inventory),
        artifacts_dir=cluster.workdir / "runner",
        strategy=STRATEGIES[setting],
        on_task=tasks.append,
        envvars=cluster.ansible_env,
    )
    return {
        "setting": setting,
        "wall_s": round(result.duration_s, 1),
        "tasks": len(tasks),
        "per_task_s": round(result.duration_s / max(1, len(tasks)), 3),
        "changed": result.total_changed(),
        "failed": [] if result.ok else failed_tasks(result) or [result.output_tail(5)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2,4,8", help="compute node counts (1 to 8)")
    parser.add_argument("--settings", default="linear,free,mitogen", help="re-run settings")
    parser.add_argument("--first", default="linear", choices=sorted(STRATEGIES))
    parser.add_argument("--json", type=Path, default=None, help="write the rows here too")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    settings = args.settings.split(",")
    bad = [s for s in settings if s not in STRATEGIES]
    if bad or any(not 1 <= n <= 8 for n in sizes):
        parser.error(
            f"--sizes {args.sizes}, --settings {args.settings}: "
            f"sizes from 1 to 8, settings from {', '.join(STRATEGIES)}"
        )
    wheel = horovod_wheel(REPO)
    rows = []
    print(
        f"{'cluster':>8} {'run':<18} {'wall s':>8} {'tasks':>6} {'s/task':>7} {'changed':>8}",
        flush=True,
    )
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix=f"site-scale-{n}-") as tmp:
            cluster = Cluster(Path(tmp), n, {"dl_stack_horovod_wheel": wheel})
            cluster.up()
            try:
                plan = [("first converge", args.first)] + [("re-run", s) for s in settings]
                for kind, setting in plan:
                    row = {"cluster": f"1+{n}", "run": kind, **timed_run(cluster, setting)}
                    rows.append(row)
                    label = f"{kind} {setting}"
                    print(f"{row['cluster']:>8} {label:<18} {row['wall_s']:8.1f} {row['tasks']:6d} "
                          f"{row['per_task_s']:7.3f} {row['changed']:8d}"
                          + (f"  FAILED: {'; '.join(row['failed'])}" if row["failed"] else ""),
                          flush=True)  # fmt: skip
                    if kind == "first converge" and row["failed"]:
                        break  # nothing to re-run
            finally:
                cluster.down()
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
