"""Fixtures shared by the molecule scenarios' testinfra tests.

Tests reach the containers through testinfra's podman backend (``podman://NAME``), which is an
order of magnitude faster than going through Ansible for every check.
"""

from __future__ import annotations

import pytest
import testinfra


def podman_host(name: str) -> testinfra.host.Host:
    return testinfra.get_host(f"podman://{name}")


@pytest.fixture(scope="session")
def podman():
    """Return a factory: ``podman("head")`` gives the testinfra host of that container."""
    cache: dict[str, testinfra.host.Host] = {}

    def get(name: str) -> testinfra.host.Host:
        if name not in cache:
            cache[name] = podman_host(name)
        return cache[name]

    return get
