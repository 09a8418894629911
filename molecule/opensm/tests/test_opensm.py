"""opensm on a head node without an HCA: configured and enabled, held back by systemd."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def head(podman):
    return podman("opensm01")


def test_priority_and_ports_are_configured(head):
    conf = head.file("/etc/opensm/opensm.conf").content_string
    assert "\nsm_priority 15\n" in conf
    assert 'PORTS="ALL"' in head.file("/etc/default/opensm").content_string


def test_partitions_are_written_where_opensm_conf_points(head):
    conf = head.file("/etc/opensm/opensm.conf").content_string
    assert "\npartition_config_file /etc/opensm/partitions.conf\n" in conf
    rules = [
        line
        for line in head.file("/etc/opensm/partitions.conf").content_string.splitlines()
        if line and not line.startswith("#")
    ]
    assert rules == [
        "Default=0x7fff, ipoib, mtu=5 : ALL=full ;",
        "storage=0x8001, ipoib, mtu=4 : ALL=full ;",
        "mgmt=0x0002 : SELF=full, ALL=limited ;",
    ]


def test_service_is_enabled_but_its_condition_keeps_it_stopped(head):
    assert head.service("opensm").is_enabled
    props = head.check_output("systemctl show opensm -p ConditionResult -p ActiveState")
    assert "ConditionResult=no" in props, props
    assert not head.process.filter(comm="opensm")
