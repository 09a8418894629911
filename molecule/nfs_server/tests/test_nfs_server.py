"""The nfs_server role's rendered state on the head container."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def head(podman):
    return podman("nfsserver01")


def test_nfs_server_package_is_installed(head):
    assert head.package("nfs-kernel-server").is_installed


def test_exports_serve_the_cluster_subnet_only_with_root_squash(head):
    exports = head.file("/etc/exports")
    assert exports.mode == 0o644 and exports.user == "root"
    lines = [
        line for line in exports.content_string.splitlines() if line and not line.startswith("#")
    ]
    assert lines == [
        "/srv/nfs/shared 198.18.102.0/24(rw,sync,root_squash,no_subtree_check)",
        "/srv/nfs/scratch 198.18.102.0/25(rw,async,root_squash,no_subtree_check)"
        " 198.18.102.200(rw,async,root_squash,no_subtree_check)",
    ]
    assert "*" not in exports.content_string
    assert "no_root_squash" not in exports.content_string


def test_exported_directories_exist_with_their_modes(head):
    assert head.file("/srv/nfs/shared").is_directory
    assert head.file("/srv/nfs/shared").mode == 0o755
    assert head.file("/srv/nfs/scratch").mode == 0o1777


def test_nfsd_threads_and_rdma_port_are_configured(head):
    conf = head.file("/etc/nfs.conf.d/50-dlperf.conf").content_string
    # No compute group in this inventory: the floor of the sizing rule applies.
    assert "threads=16" in conf
    assert "rdma=y" in conf and "rdma-port=20049" in conf
    # nfs-utils really reads the drop-in: nfsconf reports the merged value.
    assert head.check_output("nfsconf --get nfsd threads").strip() == "16"


def test_server_is_not_started_without_kernel_nfsd(head):
    # No nfsd in this kernel: the role skips the service instead of half-starting it.
    assert "nfsd" not in head.file("/proc/filesystems").content_string
    assert not head.service("nfs-server").is_running
