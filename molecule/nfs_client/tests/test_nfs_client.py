"""The nfs_client role's fstab entries and mount points on a compute container."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def compute(podman):
    return podman("nfsclient01")


@pytest.fixture(scope="module")
def fstab(compute):
    entries = {}
    for line in compute.file("/etc/fstab").content_string.splitlines():
        fields = line.split()
        if len(fields) >= 4 and not line.startswith("#"):
            entries[fields[1]] = {"src": fields[0], "type": fields[2], "opts": fields[3].split(",")}
    return entries


def test_nfs_client_package_is_installed(compute):
    assert compute.package("nfs-common").is_installed


@pytest.mark.parametrize("path", ["/shared", "/scratch", "/fast"])
def test_every_mount_is_nodev_nosuid_hard_with_large_transfers(fstab, path):
    opts = fstab[path]["opts"]
    assert fstab[path]["type"] == "nfs"
    for required in ("nodev", "nosuid", "hard", "rsize=1048576", "wsize=1048576", "_netdev"):
        assert required in opts, f"{required} missing on {path}: {opts}"
    assert "dev" not in opts and "suid" not in opts


def test_default_mount_uses_nfs_4_2_over_tcp(fstab):
    assert fstab["/shared"]["src"] == "head01:/srv/nfs/shared"
    assert "vers=4.2" in fstab["/shared"]["opts"]
    assert "proto=tcp" in fstab["/shared"]["opts"]


def test_nconnect_and_extra_options_are_applied(fstab):
    opts = fstab["/scratch"]["opts"]
    assert "nconnect=4" in opts and "ro" in opts
    assert fstab["/scratch"]["src"] == "198.18.103.10:/srv/nfs/scratch"


def test_rdma_mount_uses_the_rdma_port(fstab):
    opts = fstab["/fast"]["opts"]
    assert "proto=rdma" in opts and "port=20049" in opts and "vers=3" in opts
    assert "proto=tcp" not in opts


def test_mount_points_have_their_owners(compute):
    scratch = compute.file("/scratch")
    assert scratch.is_directory
    assert (scratch.user, scratch.group, scratch.mode) == ("nobody", "nogroup", 0o750)
    assert compute.file("/shared").user == "root"
