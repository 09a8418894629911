"""The ofed role on a compute container: inbox stack, modules, limits, soft-RoCE unit."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def node(podman):
    return podman("rdma01")


@pytest.mark.parametrize(
    "pkg", ["rdma-core", "ibverbs-utils", "infiniband-diags", "perftest", "rdmacm-utils"]
)
def test_inbox_rdma_packages_are_installed(node, pkg):
    assert node.package(pkg).is_installed


def test_softroce_modules_load_at_boot(node):
    conf = node.file("/etc/modules-load.d/dlperf-rdma.conf")
    assert conf.mode == 0o644
    modules = [
        line for line in conf.content_string.splitlines() if line and not line.startswith("#")
    ]
    assert modules == ["ib_uverbs", "rdma_ucm", "rdma_rxe"]


def test_benchmark_user_may_pin_memory(node):
    limits = node.file("/etc/security/limits.d/90-dlperf-rdma.conf").content_string
    assert "dlperf soft memlock unlimited" in limits and "dlperf hard memlock unlimited" in limits


def test_softroce_unit_creates_the_rxe_device_on_the_netdev(node):
    unit = node.file("/etc/systemd/system/dlperf-softroce.service").content_string
    assert "rdma link add rxe0 type rxe netdev eth0" in unit
    assert "BindsTo=sys-subsystem-net-devices-eth0.device" in unit
    assert "WantedBy=multi-user.target" in unit
    # systemd accepts the unit as written.
    result = node.run("systemd-analyze verify /etc/systemd/system/dlperf-softroce.service")
    assert result.rc == 0, result.stderr


def test_nothing_is_started_without_kernel_rdma_support(node):
    # No RDMA drivers in this kernel: the unit is configured but neither enabled nor started.
    assert not node.file("/sys/module/ib_core").exists
    assert not node.service("dlperf-softroce").is_running


@pytest.fixture(scope="module")
def mlnx(podman):
    return podman("mlnx01")


def test_the_mlnx_ofed_installer_ran_once_from_the_unpacked_bundle_without_firmware(mlnx):
    # converge, then idempotence: the second run read the version from ofed_info and left it
    calls = mlnx.file("/var/log/mlnxofedinstall.calls").content_string.splitlines()
    assert calls == [
        "/opt/MLNX_OFED_LINUX-23.10-1.1.9.0-debian12.1-x86_64 --force --without-fw-update"
    ]
    assert mlnx.check_output("ofed_info -s") == "MLNX_OFED_LINUX-23.10-1.1.9.0:"


def test_the_mlnx_ofed_node_gets_the_fabrics_boot_modules_and_no_inbox_stack(mlnx):
    conf = mlnx.file("/etc/modules-load.d/dlperf-rdma.conf").content_string
    assert "ib_ipoib" in conf.split()
    assert not mlnx.package("rdma-core").is_installed  # MLNX_OFED brings its own
