"""The isilon role's mounts on two compute containers."""

from __future__ import annotations

import pytest

NODES = ["isilon01", "isilon02"]


def isilon_entry(host):
    for line in host.file("/etc/fstab").content_string.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "/mnt/isilon":
            return fields
    raise AssertionError("no /mnt/isilon entry in /etc/fstab")


def test_nodes_are_spread_over_the_isilon_addresses(podman):
    sources = [isilon_entry(podman(node))[0] for node in NODES]
    # Sorted host names, round robin: isilon01 -> first address, isilon02 -> second.
    assert sources == ["198.18.104.201:/ifs/data/imagenet", "198.18.104.202:/ifs/data/imagenet"]


@pytest.mark.parametrize("node", NODES)
def test_isilon_mount_is_read_tuned_and_safe(podman, node):
    opts = isilon_entry(podman(node))[3].split(",")
    for required in ("nodev", "nosuid", "hard", "noatime", "rsize=1048576", "actimeo=60"):
        assert required in opts
    assert "vers=3" in opts and "nconnect=8" in opts and "proto=tcp" in opts
    assert "ro" not in opts


@pytest.mark.parametrize("node", NODES)
def test_mount_point_exists_but_nothing_is_written_locally(podman, node):
    host = podman(node)
    assert host.file("/mnt/isilon").is_directory
    # Not mounted here (no NFS in this kernel): the data-set layout must not land on local disk.
    assert not host.file("/mnt/isilon/imagenet").exists
