"""cuda on nodes without a GPU: the pinned runtime from the configured source where asked for
(cuda01), nothing at all by default (cuda02), and never a driver."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def node(podman):
    return podman("cuda01")


def test_debian_contrib_and_non_free_are_added_with_the_archive_key(node):
    text = node.file("/etc/apt/sources.list.d/dlperf-cuda.sources").content_string
    assert "Components: contrib non-free non-free-firmware" in text
    assert "Suites: bookworm" in text
    assert "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" in text


def test_the_pinned_cuda_runtime_is_installed(node):
    pkg = node.package("libcudart11.0")
    assert pkg.is_installed and pkg.version.startswith("11.8."), pkg.version
    assert "libcudart.so.11.0" in node.check_output("ldconfig -p")


@pytest.mark.parametrize(
    "pkg", ["nvidia-driver", "nvidia-kernel-dkms", "nvidia-persistenced", "libcuda1"]
)
def test_no_driver_without_a_gpu(node, pkg):
    assert not node.package(pkg).is_installed


def test_by_default_a_node_without_a_gpu_gets_no_cuda_part_and_no_source(podman):
    node = podman("cuda02")
    assert not node.file("/etc/apt/sources.list.d/dlperf-cuda.sources").exists
    assert not node.package("libcudart11.0").is_installed
    assert not node.package("nvidia-driver").is_installed
