"""The ipoib role, staged on three network stacks; each stack parses what the role wrote."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def nm(podman):
    return podman("ipoib-nm")


@pytest.fixture(scope="module")
def networkd(podman):
    return podman("ipoib-networkd")


@pytest.fixture(scope="module")
def ifupdown(podman):
    return podman("ipoib-ifupdown")


def test_networkmanager_holds_a_connected_mode_infiniband_profile(nm):
    out = nm.check_output(
        "nmcli -g connection.type,connection.interface-name,infiniband.transport-mode,"
        "infiniband.mtu,ipv4.method,ipv4.addresses connection show dlperf-ib0"
    )
    assert out.splitlines() == [
        "infiniband",
        "ib0",
        "connected",
        "65520",
        "manual",
        "198.18.0.11/24",
    ]


def test_networkd_parses_the_network_file_without_complaint(networkd):
    path = "/etc/systemd/network/50-dlperf-ib0.network"
    text = networkd.file(path).content_string
    for line in ("Name=ib0", "MTUBytes=65520", "Address=198.18.0.12/24"):
        assert line in text
    # systemd 252 has no [IPoIB] section in .network files: udev sets the mode.
    rule = networkd.file("/etc/udev/rules.d/70-dlperf-ib0-mode.rules").content_string
    assert 'KERNEL=="ib0", ATTR{type}=="32", ATTR{mode}="connected"' in rule
    # Make networkd (re)read its configuration and show what it said about this file.
    networkd.check_output("networkctl reload")
    journal = networkd.run("sleep 1; journalctl -u systemd-networkd -o cat --no-pager")
    # an unreadable or empty journal proves nothing: networkd has logged its start at least
    assert journal.rc == 0 and journal.stdout.strip(), journal.stderr
    complaints = [line for line in journal.stdout.splitlines() if "50-dlperf-ib0" in line]
    assert complaints == [], complaints


def test_ifupdown_parses_a_datagram_mode_stanza(ifupdown):
    out = ifupdown.check_output("ifquery ib0")
    assert "address: 198.18.0.13" in out and "netmask: 255.255.255.0" in out
    # datagram mode picks the 2 KiB IB MTU's IPoIB MTU
    assert "mtu: 2044" in out
    assert "pre-up: echo datagram > /sys/class/net/ib0/mode" in out


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
