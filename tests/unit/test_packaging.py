"""The dlperf wheel carries every package of the source tree (the nodes install the wheel, not
the checkout: a package left out imports here and fails there)."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_dlperf_package_is_listed_for_the_wheel():
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(REPO / "benchmark").parts)
        for init in (REPO / "benchmark" / "dlperf").rglob("__init__.py")
    }
    assert found - listed == set(), "packages missing from pyproject.toml's list"
    assert listed - found == {"dlperf_module_utils"}, "listed packages that do not exist"
