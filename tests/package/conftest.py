"""The repository as its users get it: the dlperf.cluster collection built with ansible-galaxy,
and the dlperf wheel, each installed into an empty place outside the checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def clean_env() -> dict:
    """The environment without ANSIBLE_* settings: `make test` points ANSIBLE_CONFIG at the
    checkout, whose collections path already holds dlperf.cluster (the link to the root), and
    ansible-galaxy would then find the collection installed and install nothing."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}


def without_pythonpath() -> dict:
    """The environment for pip in a new venv: a checkout on PYTHONPATH (its dlperf.egg-info)
    would count as dlperf installed, and pip would install everything but dlperf."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


@pytest.fixture(scope="session")
def dlperf_wheel(tmp_path_factory) -> str:
    """The dlperf wheel built from the checkout, as the dl_stack role builds it."""
    out = tmp_path_factory.mktemp("dist")
    return subprocess.run(
        [REPO / "scripts/build-dlperf-wheel.sh", sys.executable, out],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture(scope="session")
def collection_tarball(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("collection-build")
    subprocess.run(
        [BIN / "ansible-galaxy", "collection", "build", "--output-path", out, REPO],
        check=True,
        capture_output=True,
        text=True,
        cwd=out,
        env=clean_env(),
    )
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    return out / f"{galaxy['namespace']}-{galaxy['name']}-{galaxy['version']}.tar.gz"


@pytest.fixture(scope="session")
def installed_collection(tmp_path_factory, collection_tarball) -> Path:
    """An empty collections path with only the built collection installed into it (its
    dependencies are the pinned ansible bundle's, found on Python's path)."""
    path = tmp_path_factory.mktemp("collections")
    subprocess.run(
        [
            BIN / "ansible-galaxy",
            "collection",
            "install",
            "--offline",
            "--no-deps",
            "-p",
            path,
            collection_tarball,
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=path,
        env=clean_env(),
    )
    return path
