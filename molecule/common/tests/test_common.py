"""The common role's real effect on a head and a compute container."""

from __future__ import annotations

import time

import pytest

NODES = ["head01", "compute01"]
ADDRESSES = {"head01": "198.18.101.10", "compute01": "198.18.101.11"}


@pytest.mark.parametrize("node", NODES)
def test_base_packages_are_installed(podman, node):
    host = podman(node)
    for pkg in ("chrony", "openssh-server", "rsync", "numactl", "pciutils", "ethtool"):
        assert host.package(pkg).is_installed, f"{pkg} missing on {node}"


@pytest.mark.parametrize("node", NODES)
def test_hosts_file_names_every_node_on_the_cluster_network(podman, node):
    hosts = podman(node).file("/etc/hosts")
    assert hosts.mode == 0o644
    for name, address in ADDRESSES.items():
        assert f"{address} {name}.cluster.local {name}" in hosts.content_string
    assert podman(node).check_output("getent hosts compute01").split()[0] == ADDRESSES["compute01"]


def test_head_serves_time_to_the_cluster_subnet_only(podman):
    conf = podman("head01").file("/etc/chrony/chrony.conf").content_string
    assert "allow 198.18.101.0/24" in conf
    assert "local stratum 10" in conf
    assert "allow all" not in conf


def test_compute_node_follows_the_head_for_time(podman):
    host = podman("compute01")
    conf = host.file("/etc/chrony/chrony.conf").content_string
    assert "server 198.18.101.10 iburst" in conf
    assert "pool " not in conf
    chrony = host.service("chrony")
    assert chrony.is_enabled and chrony.is_running
    # chronyd really takes time from the head: its source line turns from "^?" (not answered
    # yet, or unusable) to "^*" (selected) or "^+" (combined) once the head has answered.
    state = ""
    for _ in range(45):
        line = next(
            (row for row in host.check_output("chronyc -n sources").splitlines()
             if " 198.18.101.10 " in f" {row} "),
            "",
        )  # fmt: skip
        state = line[:2]
        if state in ("^*", "^+"):
            break
        time.sleep(2)
    assert state in ("^*", "^+"), f"the head's source is {line!r}"


@pytest.mark.parametrize("node", NODES)
def test_benchmark_user_is_a_dedicated_non_root_account(podman, node):
    user = podman(node).user("dlperf")
    assert user.exists
    assert user.uid == 2001 and user.gid == 2001
    assert user.home == "/home/dlperf"
    assert user.password in ("!", "!!", "*") or user.password.startswith("!")


@pytest.mark.parametrize("node", NODES)
def test_benchmark_key_pair_is_the_same_on_every_node_and_private(podman, node):
    host = podman(node)
    private = host.file("/home/dlperf/.ssh/id_ed25519")
    assert private.user == "dlperf" and private.mode == 0o600
    assert host.file("/home/dlperf/.ssh").mode == 0o700
    head_pub = podman("head01").file("/home/dlperf/.ssh/id_ed25519.pub").content_string.strip()
    assert head_pub.startswith("ssh-ed25519 ")
    assert host.file("/home/dlperf/.ssh/id_ed25519.pub").content_string.strip() == head_pub
    # the one key, taken only from the cluster subnet and loopback
    [trusted] = host.file("/home/dlperf/.ssh/authorized_keys").content_string.splitlines()
    assert trusted == f'from="198.18.101.0/24,127.0.0.1,::1" {head_pub}', trusted


@pytest.mark.parametrize("node", NODES)
def test_root_is_not_given_the_benchmark_trust(podman, node):
    host = podman(node)
    head_pub = podman("head01").file("/home/dlperf/.ssh/id_ed25519.pub").content_string.strip()
    root_keys = host.file("/root/.ssh/authorized_keys")
    assert not root_keys.exists or head_pub not in root_keys.content_string


@pytest.mark.parametrize(("src", "dst"), [("compute01", "head01"), ("head01", "compute01")])
def test_benchmark_user_reaches_every_node_over_ssh_without_a_password(podman, src, dst):
    # BatchMode forbids prompts: this passes only with key trust and a verified host key.
    cmd = f"su - dlperf -c 'ssh -o BatchMode=yes {dst} hostname'"
    assert podman(src).check_output(cmd).strip() == dst


def test_root_cannot_use_the_benchmark_key_to_log_in_as_root(podman):
    cmd = "ssh -o BatchMode=yes -i /home/dlperf/.ssh/id_ed25519 root@head01 true"
    result = podman("compute01").run(cmd)
    # refused by the server, not failed for another reason (no route, no key file)
    assert result.rc != 0 and "Permission denied (publickey" in result.stderr, result.stderr


@pytest.mark.parametrize("node", NODES)
def test_sshd_hardening_is_in_effect(podman, node):
    host = podman(node)
    drop_in = host.file("/etc/ssh/sshd_config.d/00-dlperf-hardening.conf")
    assert drop_in.mode == 0o644
    # an image's own drop-in (prepare.yml writes cloud-init's) comes later and loses
    cloud_init = host.file("/etc/ssh/sshd_config.d/50-cloud-init.conf")
    assert cloud_init.contains("PasswordAuthentication yes")
    effective = host.check_output("sshd -T").lower().splitlines()
    assert "passwordauthentication no" in effective
    assert "permitrootlogin without-password" in effective
    assert "maxstartups 100:30:200" in effective
    assert host.service("ssh").is_enabled and host.service("ssh").is_running
