"""The virtual cluster on real QEMU VMs: up, again with nothing changed, the VMs' kernels,
identities and cluster network, then torn down leaving nothing behind but the cached image.

Runs in file order: the teardown test is last."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from dlperf.playbooks import PlaybookResult, run_playbook

REPO = Path(__file__).resolve().parents[2]
INVENTORY = "inventory/virtual/hosts.yml"
PLAYBOOK = "playbooks/virtual_cluster.yml"
STATE = REPO / ".cache" / "virtual-cluster"
HOSTS = yaml.safe_load((REPO / INVENTORY).read_text())["all"]["children"]["cluster"]["children"]
NODES = {name: v for group in HOSTS.values() for name, v in group["hosts"].items()}
BRIDGE = "dlperfvc0"


def timed(label: str, result: PlaybookResult) -> PlaybookResult:
    print(f"\n[e2e] {label}: {result.duration_s:.0f} s, rc {result.rc}")
    assert result.ok, f"{label} failed:\n{result.output_tail()}"
    return result


def vm(host: str, command: str) -> str:
    """Run COMMAND on a VM the way Ansible reaches it: root, the cluster's key, checked host key."""
    port = NODES[host]["ansible_port"]
    out = subprocess.run(
        ["ssh", "-p", str(port), "-i", str(STATE / "id_ed25519"), "-o", "BatchMode=yes",
         "-o", f"UserKnownHostsFile={STATE / 'known_hosts'}", "-o", "StrictHostKeyChecking=yes",
         "root@127.0.0.1", command],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, f"{host}: {command}: {out.stderr}"
    return out.stdout.strip()


def links() -> dict[str, dict]:
    out = subprocess.run(["ip", "-j", "-d", "link", "show"], capture_output=True, text=True)
    return {link["ifname"]: link for link in json.loads(out.stdout)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    run = run_playbook(REPO, PLAYBOOK, INVENTORY, artifacts_dir=tmp_path_factory.mktemp("up"))
    timed("virtual cluster up (image, boot, SSH)", run)
    yield run
    # Whatever the tests did, leave no VM running.
    run_playbook(REPO, PLAYBOOK, INVENTORY, {"state": "absent"},
                 artifacts_dir=tmp_path_factory.mktemp("down-final"))  # fmt: skip


def test_a_second_run_changes_nothing(cluster, tmp_path):
    again = timed(
        "virtual cluster up again", run_playbook(REPO, PLAYBOOK, INVENTORY, artifacts_dir=tmp_path)
    )
    assert again.total_changed() == 0, again.count("changed")


def test_every_vm_runs_its_own_real_kernel_and_identity(cluster):
    machine_ids, host_keys = set(), set()
    for host in NODES:
        assert vm(host, "hostname") == host
        assert vm(host, "systemd-detect-virt") in ("qemu", "kvm")
        assert vm(host, "uname -r").endswith("-amd64")
        assert vm(host, "systemctl is-system-running --wait || true") in ("running", "degraded")
        machine_ids.add(vm(host, "cat /etc/machine-id"))
        host_keys.add(vm(host, "cat /etc/ssh/ssh_host_ed25519_key.pub").split()[1])
    assert len(machine_ids) == len(NODES)
    assert len(host_keys) == len(NODES)
    # The recorded keys are exactly the VMs' own.
    known = (STATE / "known_hosts").read_text()
    assert all(key in known for key in host_keys)


def test_the_cluster_network_joins_the_vms_and_nothing_else(cluster):
    for host, spec in NODES.items():
        assert f"inet {spec['cluster_ip']}/24" in vm(host, "ip -4 -o addr show dev eth1")
        for peer, peer_spec in NODES.items():
            if peer != host:
                vm(host, f"ping -c 1 -W 5 {peer_spec['cluster_ip']}")
    all_links = links()
    bridge = all_links[BRIDGE]
    assert bridge["linkinfo"]["info_kind"] == "bridge"
    ports = sorted(name for name, link in all_links.items() if link.get("master") == BRIDGE)
    assert ports == [f"{BRIDGE}t{i}" for i in range(len(NODES))]
    assert all(all_links[p]["linkinfo"]["info_kind"] == "tun" for p in ports)
    addrs = subprocess.run(
        ["ip", "-j", "addr", "show", "dev", BRIDGE], capture_output=True, text=True
    )
    assert json.loads(addrs.stdout)[0]["addr_info"] == [] or all(
        a["family"] == "inet6" and a["scope"] == "link"
        for a in json.loads(addrs.stdout)[0]["addr_info"]
    ), "the host has no address on the cluster bridge"


def test_teardown_removes_what_it_created_and_keeps_the_image(cluster, tmp_path):
    image = Path((STATE / "image").read_text().strip())
    absent = {"state": "absent"}
    down = run_playbook(REPO, PLAYBOOK, INVENTORY, absent, artifacts_dir=tmp_path / "down")
    timed("virtual cluster down", down)
    assert down.total_changed() > 0
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", "process=dlvc-"], capture_output=True, text=True)
    assert left.stdout == "", left.stdout
    assert not {BRIDGE, *(f"{BRIDGE}t{i}" for i in range(len(NODES)))} & set(links())
    assert not STATE.exists()
    assert (image / "base.qcow2").exists()
    again = run_playbook(
        REPO, PLAYBOOK, INVENTORY, {"state": "absent"}, artifacts_dir=tmp_path / "again"
    )
    assert again.ok and again.total_changed() == 0, again.count("changed")
