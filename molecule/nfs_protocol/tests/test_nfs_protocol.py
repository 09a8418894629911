"""The rendered exports, served over NFSv4 by ganesha, to a libnfs client container."""

from __future__ import annotations

import time

import pytest

SERVER = "198.18.105.10"


@pytest.fixture(scope="module")
def client(podman):
    host = podman("nfsclient")
    # ganesha needs a few seconds after a (re)start before it answers.
    for _ in range(30):
        if host.run(f"nfs-ls 'nfs://{SERVER}/srv/nfs/shared?version=4'").rc == 0:
            break
        time.sleep(2)
    return host


@pytest.fixture(autouse=True)
def clean_share(podman):
    podman("nfshead").run("rm -f /srv/nfs/shared/payload /srv/nfs/shared/rootfile")


def test_client_on_the_cluster_subnet_writes_and_reads_a_file(client, podman):
    client.run_expect([0], "echo 'epoch 1' > /tmp/payload")
    client.run_expect([0], f"nfs-cp /tmp/payload 'nfs://{SERVER}/srv/nfs/shared/payload?version=4'")
    read = client.check_output(f"nfs-cat 'nfs://{SERVER}/srv/nfs/shared/payload?version=4'")
    assert read.strip() == "epoch 1"
    assert podman("nfshead").file("/srv/nfs/shared/payload").content_string == "epoch 1\n"


def test_root_on_the_client_is_squashed_to_nobody(client, podman):
    client.run_expect([0], "echo squash > /tmp/rootfile")
    client.run_expect(
        [0], f"nfs-cp /tmp/rootfile 'nfs://{SERVER}/srv/nfs/shared/rootfile?version=4'"
    )
    written = podman("nfshead").file("/srv/nfs/shared/rootfile")
    # Squashed to the server's anonymous user: ganesha's is -2 (4294967294); kernel nfsd's
    # is nobody (65534). Either way, not root.
    assert written.uid != 0, "root on the client stayed root on the share"
    assert written.uid in (65534, 4294967294), written.uid


def test_export_for_another_network_refuses_this_client(client, podman):
    # The export is served (ganesha has it) ...
    conf = podman("nfshead").file("/etc/ganesha/ganesha.conf").content_string
    assert "/srv/nfs/elsewhere" in conf
    # ... but not to this client: ganesha's NFSv4 pseudo file system does not even show it.
    result = client.run(f"nfs-ls 'nfs://{SERVER}/srv/nfs/elsewhere?version=4'")
    assert result.rc != 0, result.stdout
    assert "(path /srv/nfs/elsewhere) failed with NFS4ERR_NOENT" in result.stderr, result.stderr
