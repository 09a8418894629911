"""dlperf from its wheel alone, in an empty venv outside the checkout."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.package.conftest import REPO, version, without_pythonpath


@pytest.fixture(scope="module")
def venv(tmp_path_factory, dlperf_wheel):
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "venv", work / "venv"], check=True)
    pip = [work / "venv/bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, dlperf_wheel], check=True, capture_output=True, text=True, env=without_pythonpath()
    )
    return work


def dlperf(venv, *args):
    return subprocess.run(
        [venv / "venv/bin/dlperf", *args], capture_output=True, text=True, cwd=venv
    )


def test_version(venv):
    proc = dlperf(venv, "--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"dlperf {version()} ")


def test_report_on_stored_results(venv):
    proc = dlperf(venv, "report", str(REPO / "tests/fixtures/sweep"), "--output", "report")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((venv / "report" / "summary.json").read_text())
    assert [(r["nodes"], r["status"]) for r in summary["rows"]] == [(1, "ok"), (2, "ok")]
    assert summary["rows"][0]["throughput_img_per_s"] > 0
    assert (venv / "report" / "fig4_throughput.png").stat().st_size > 10_000


def test_the_shared_module_utils_come_with_it(venv):
    code = (
        "from dlperf_module_utils.dlperf_job import launch_command;"
        "print(' '.join(launch_command('horovodrun', 'n1:4,n2:4', 8, ['--mode', 'throughput'])))"
    )
    proc = subprocess.run([venv / "venv/bin/python", "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("horovodrun -np 8 -H n1:4,n2:4")
