"""benchmark.yml's fetch of the sweeps: real rsync with the playbook's own options."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("rsync") is None, reason="rsync is missing")


def fetch_options() -> list[str]:
    plays = yaml.safe_load((REPO / "playbooks/benchmark.yml").read_text())
    task = next(
        t for play in plays for t in play.get("tasks", []) if t.get("name") == "Fetch the sweeps"
    )
    return task["ansible.posix.synchronize"]["rsync_opts"]


def write(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_point_run_again_elsewhere_leaves_no_stale_telemetry_and_the_controllers_files_stay(
    tmp_path,
):
    shared, local = tmp_path / "shared", tmp_path / "local"
    # The first try of the 2-node point ran on compute01 and compute03, and was fetched.
    write(local / "throughput/2nodes/telemetry/compute03.jsonl", "old")
    # What only the controller has, at the top of the run's directory.
    for name in ("reproduce.json", "report/index.html", "tta-controller/1nodes/result.json"):
        write(local / name, "keep")
    # The point, run again by Slurm on compute01 and compute02, replaced its directory.
    write(shared / "throughput/2nodes/result.json", '{"status": "ok"}')
    write(shared / "throughput/2nodes/telemetry/compute01.jsonl")
    write(shared / "throughput/2nodes/telemetry/compute02.jsonl")
    write(shared / "throughput/.4nodes.partial/result.json")  # a point still running

    subprocess.run(["rsync", "--archive", *fetch_options(), f"{shared}/", f"{local}/"], check=True)

    telemetry = sorted(p.name for p in (local / "throughput/2nodes/telemetry").iterdir())
    assert telemetry == ["compute01.jsonl", "compute02.jsonl"]
    for name in ("reproduce.json", "report/index.html", "tta-controller/1nodes/result.json"):
        assert (local / name).read_text() == "keep", name
    assert not (local / "throughput/.4nodes.partial").exists()
