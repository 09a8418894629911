"""dlperf from its wheel alone, in an empty venv outside the checkout."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile

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


def test_the_source_distribution_builds_the_same_wheel(tmp_path, dlperf_wheel):
    # pip and `python -m build` build a wheel from the sdist: it must carry what the wheel does,
    # the import hook at the top of site-packages included (MANIFEST.in). From a copy of what
    # the sdist is made of: a checkout's dlperf.egg-info would lend it its list of sources.
    tree = tmp_path / "tree"
    skip = shutil.ignore_patterns("*.egg-info", "__pycache__")
    for part in ("benchmark", "plugins/module_utils"):
        shutil.copytree(REPO / part, tree / part, ignore=skip)
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(REPO / name, tree / name)
    subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "-d", tmp_path / "sdist"],
        cwd=tree,
        check=True,
        capture_output=True,
    )
    [sdist] = (tmp_path / "sdist").glob("dlperf-*.tar.gz")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip_wheel, "--disable-pip-version-check", "-w", tmp_path / "wheel", sdist],
        check=True,
        capture_output=True,
        env=without_pythonpath(),
    )
    [rebuilt] = (tmp_path / "wheel").glob("dlperf-*.whl")

    def names(wheel) -> set[str]:
        with zipfile.ZipFile(wheel) as z:
            return {n for n in z.namelist() if not n.endswith(("/RECORD", "_build.json"))}

    assert "dlperf-cuda-libs.pth" in names(rebuilt)
    assert names(rebuilt) == names(dlperf_wheel)
