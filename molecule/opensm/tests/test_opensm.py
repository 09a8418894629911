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


def test_service_is_enabled_but_its_condition_keeps_it_stopped(head):
    assert head.service("opensm").is_enabled
    props = head.check_output("systemctl show opensm -p ConditionResult -p ActiveState")
    assert "ConditionResult=no" in props, props
    assert not head.process.filter(comm="opensm")
