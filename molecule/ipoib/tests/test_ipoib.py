"""The ipoib role, staged on each network stack (NetworkManager twice); each parses what it got."""

from __future__ import annotations

import pytest

MODPROBE = "/etc/modprobe.d/dlperf-ipoib.conf"


@pytest.fixture(scope="module")
def nm(podman):
    return podman("ipoib-nm")


@pytest.fixture(scope="module")
def nm_pkey(podman):
    return podman("ipoib-nm-pkey")


@pytest.fixture(scope="module")
def networkd(podman):
    return podman("ipoib-networkd")


@pytest.fixture(scope="module")
def ifupdown(podman):
    return podman("ipoib-ifupdown")


def test_networkmanager_holds_a_datagram_mode_profile_with_the_2k_partitions_mtu(nm):
    out = nm.check_output(
        "nmcli -g connection.type,connection.interface-name,infiniband.transport-mode,"
        "infiniband.mtu,infiniband.p-key,ipv4.method,ipv4.addresses connection show dlperf-ib0"
    )
    # p-key "default": the parent interface in the default partition
    expected = ["infiniband", "ib0", "datagram", "2044", "default", "manual", "198.18.0.11/24"]
    assert out.splitlines() == expected
    # datagram mode leaves the driver's enhanced IPoIB alone
    assert not nm.file(MODPROBE).exists


def test_networkmanager_holds_a_connected_mode_pkey_child(nm_pkey):
    out = nm_pkey.check_output(
        "nmcli -g connection.type,connection.interface-name,infiniband.parent,infiniband.p-key,"
        "infiniband.transport-mode,infiniband.mtu,ipv4.addresses connection show dlperf-ib0.8001"
    )
    expected = ["infiniband", "ib0.8001", "ib0", "0x8001", "connected", "65520", "198.18.0.14/24"]
    assert out.splitlines() == expected
    keyfile = nm_pkey.file("/etc/NetworkManager/system-connections/dlperf-ib0.8001.nmconnection")
    assert keyfile.mode == 0o600 and keyfile.user == "root"
    # connected mode: enhanced IPoIB off from the next load of ib_ipoib on
    assert "options ib_ipoib ipoib_enhanced=0" in nm_pkey.file(MODPROBE).content_string.splitlines()
    # no parent profile of its own: the child carries the address
    names = nm_pkey.check_output("nmcli -g NAME connection show").splitlines()
    assert "dlperf-ib0" not in names and "dlperf-ib0.8001" in names


def networkd_complaints(host, names: tuple[str, ...]) -> list[str]:
    """Have networkd (re)read its configuration and return what it said about these files."""
    host.check_output("networkctl reload")
    journal = host.run("sleep 1; journalctl -u systemd-networkd -o cat --no-pager")
    # an unreadable or empty journal proves nothing: networkd has logged its start at least
    assert journal.rc == 0 and journal.stdout.strip(), journal.stderr
    return [line for line in journal.stdout.splitlines() if any(n in line for n in names)]


def test_networkd_creates_the_pkey_child_from_a_netdev_it_parses(networkd):
    d = "/etc/systemd/network"
    netdev = networkd.file(f"{d}/50-dlperf-ib0.8002.netdev").content_string
    for line in ("Name=ib0.8002", "Kind=ipoib", "PartitionKey=0x8002", "Mode=datagram"):
        assert line in netdev.splitlines(), netdev
    child = networkd.file(f"{d}/50-dlperf-ib0.8002.network").content_string
    # a 4 KiB partition: 4096 - 4
    for line in ("Name=ib0.8002", "MTUBytes=4092", "Address=198.18.0.12/24"):
        assert line in child.splitlines(), child
    parent = networkd.file(f"{d}/50-dlperf-ib0.network").content_string.splitlines()
    assert "IPoIB=ib0.8002" in parent and not [x for x in parent if x.startswith("Address=")]
    rule = networkd.file("/etc/udev/rules.d/70-dlperf-ib0-mode.rules").content_string
    assert 'KERNEL=="ib0", ATTR{type}=="32", ATTR{mode}="datagram"' in rule
    complaints = networkd_complaints(networkd, ("50-dlperf-ib0",))
    assert complaints == [], complaints


def test_networkd_would_complain_about_a_file_it_cannot_parse(networkd):
    # the check above can fail: a key networkd does not know is reported by file name
    path = "/etc/systemd/network/50-dlperf-probe.netdev"
    text = "[NetDev]\\nName=probe0\\nKind=ipoib\\n[IPoIB]\\nNoSuchKey=1\\n"
    networkd.check_output(f"printf '{text}' > {path}")
    try:
        complaints = networkd_complaints(networkd, ("50-dlperf-probe",))
    finally:
        networkd.check_output(f"rm -f {path} && networkctl reload")
    assert any("NoSuchKey" in line for line in complaints), complaints


def test_ifupdown_creates_the_connected_mode_pkey_child_with_its_partition_key(ifupdown):
    out = ifupdown.check_output("ifquery ib0.8003")
    assert "address: 198.18.0.13" in out and "netmask: 255.255.255.0" in out
    assert "mtu: 65520" in out
    assert "pre-up: echo connected > /sys/class/net/ib0.8003/mode" in out
    # ifupdown derives the child from its name: P_Key 0x8003 written to the parent's create_child
    plan = ifupdown.check_output("ifup --no-act ib0 ib0.8003 2>&1")
    assert "echo 0x8003 > /sys/class/net/ib0/create_child" in plan, plan
    assert "ip link set dev ib0.8003 mtu 65520" in plan, plan
    assert "options ib_ipoib ipoib_enhanced=0" in ifupdown.file(MODPROBE).content_string


def test_each_node_is_configured_only_through_its_own_stack(nm, networkd, ifupdown):
    files = ("/etc/systemd/network/50-dlperf-ib0.network", "/etc/network/interfaces.d/dlperf-ib0")
    assert [nm.file(f).exists for f in files] == [False, False]
    assert [networkd.file(f).exists for f in files] == [True, False]
    assert [ifupdown.file(f).exists for f in files] == [False, True]
    for host in (networkd, ifupdown):
        result = host.run("nmcli -t connection show dlperf-ib0")
        # no NetworkManager there at all, or at least no such profile
        why = result.stderr + result.stdout
        assert result.rc != 0 and ("not found" in why or "no such connection" in why), why
