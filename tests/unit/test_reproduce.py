"""`dlperf reproduce`: input checks, and which playbooks it runs for which inventory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from dlperf.reproduce import ReproduceConfig, _phases, phase_table

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--project", "/"], "--project /: no site.yml"),
        (["--inventory", "inventory/nowhere"], "--inventory inventory/nowhere: no such inventory"),
        (["--run-id", "a b"], "--run-id 'a b'"),
    ],
)
def test_bad_input_is_refused_naming_the_value_before_anything_runs(tmp_path, args, needle):
    proc = subprocess.run(
        [str(BIN / "dlperf"), "reproduce", "--project", str(REPO), "--results", str(tmp_path),
         "--quiet", *args],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr
    assert list(tmp_path.iterdir()) == []  # no run directory, no record


def test_a_real_inventory_gets_no_vms_and_no_prebuilt_wheel(tmp_path):
    cfg = ReproduceConfig(REPO, Path("inventory/reference"), "r1", tmp_path)
    assert not cfg.virtual
    phases = _phases(cfg)
    assert [(name, playbook) for name, playbook, _ in phases] == [
        ("site", "site.yml"),
        ("validate", "playbooks/validate.yml"),
        ("benchmark", "playbooks/benchmark.yml"),
    ]
    assert phases[0][2] == {}  # the head node builds Horovod itself
    assert phases[1][2] == {"dlperf_validate_report": str(tmp_path.resolve() / "r1/validate.json")}
    assert phases[2][2] == {"dlperf_run_id": "r1", "dlperf_results_dir": str(tmp_path.resolve())}
    no_deploy = ReproduceConfig(REPO, Path("inventory/reference"), "r1", tmp_path, deploy=False)
    assert [name for name, _, _ in _phases(no_deploy)] == ["validate", "benchmark"]


def test_the_virtual_inventory_is_recognised_by_path():
    for inventory in ("inventory/virtual", "inventory/virtual/hosts.yml", "./inventory/virtual"):
        assert ReproduceConfig(REPO, Path(inventory), "x", REPO / "results").virtual
    assert not ReproduceConfig(REPO, Path("inventory/reference"), "x", REPO / "results").virtual


def test_the_phase_table_shows_status_wall_time_and_changes():
    record = {"phases": {
        "site": {"status": "ok", "duration_s": 1020.4, "changed": 86, "resumed": True},
        "validate": {"status": "failed", "duration_s": 128.0, "changed": 2},
    }}  # fmt: skip
    assert phase_table(record) == [
        "phase      status       wall  changed",
        "site       resumed     1020s  86",
        "validate   failed       128s  2",
    ]
