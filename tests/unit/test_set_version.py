"""scripts/set-version.py: one command writes the version into the three files that carry it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "set-version.py"
FILES = ("pyproject.toml", "galaxy.yml", "CHANGELOG.md")


def copy(tmp_path: Path) -> Path:
    for name in FILES:
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


def set_version(root: Path, version: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, SCRIPT, version, "--root", root], capture_output=True, text=True
    )


def test_writes_the_version_into_all_three_and_changes_nothing_else(tmp_path):
    root = copy(tmp_path)
    proc = set_version(root, "7.8.9")
    assert proc.returncode == 0, proc.stderr
    assert tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"] == "7.8.9"
    assert yaml.safe_load((root / "galaxy.yml").read_text())["version"] == "7.8.9"
    changelog = (root / "CHANGELOG.md").read_text()
    assert re.search(r"^## (\S+)", changelog, re.M).group(1) == "7.8.9"
    # The earlier release's section is still there, below the new one.
    old = re.search(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.M).group(1)
    assert changelog.index("## 7.8.9") < changelog.index(f"## {old}")
    for name in ("pyproject.toml", "galaxy.yml"):
        before = (REPO / name).read_text().splitlines()
        after = (root / name).read_text().splitlines()
        assert len(before) == len(after)
        assert sum(a != b for a, b in zip(before, after, strict=True)) == 1, name
    # Run again: the changelog gains no second heading.
    assert set_version(root, "7.8.9").returncode == 0
    assert (root / "CHANGELOG.md").read_text() == changelog


def test_refuses_a_version_galaxy_and_pip_would_spell_differently(tmp_path):
    root = copy(tmp_path)
    for bad in ("0.2", "1.0.0-rc1", "v1.0.0", "01.2.3"):
        proc = set_version(root, bad)
        assert proc.returncode == 2 and f"VERSION {bad!r}" in proc.stderr, proc.stderr
        assert "MAJOR.MINOR.PATCH" in proc.stderr
    for name in FILES:
        assert (root / name).read_text() == (REPO / name).read_text()
