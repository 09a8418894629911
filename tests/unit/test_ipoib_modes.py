"""The ipoib role's mode, MTU and P_Key decisions, on real ansible-playbook runs in check mode.

A host with an HCA is represented by a sysfs tree in the layout the kernel shows
(class/net/<if>/type, .../device/driver, module/ib_ipoib/parameters), pointed at through the
role's internal __ipoib_sysfs; nothing else is simulated.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_role_gating import messages, no_ipoib
from .test_role_input_validation import apply_role, inventory


def sysfs(root: Path, driver: str, enhanced: str | None) -> Path:
    """An IPoIB ib0 on an HCA bound to `driver`; ib_ipoib with or without ipoib_enhanced."""
    net = root / "class" / "net" / "ib0"
    net.mkdir(parents=True)
    (net / "type").write_text("32\n")
    (net / "mode").write_text("datagram\n")
    drv = root / "bus" / "pci" / "drivers" / driver
    drv.mkdir(parents=True)
    (net / "device").mkdir()
    (net / "device" / "driver").symlink_to(drv)
    params = root / "module" / "ib_ipoib" / "parameters"
    params.mkdir(parents=True)
    if enhanced is not None:
        (params / "ipoib_enhanced").write_text(enhanced + "\n")
    return root


def ran(run) -> list[str]:
    results = run.task_results()
    return [name.split(" : ", 1)[-1] for name, _, res in results if not res.get("skipped")]


CONNECTED = {"ipoib_mode": "connected", "ipoib_backend": "networkd"}


def test_connected_mode_on_the_kernels_own_mlx5_driver_fails_unchanged(run_playbook, tmp_path):
    root = sysfs(tmp_path / "sys", "mlx5_core", enhanced=None)
    run = run_playbook(apply_role("ipoib"), inventory(), dict(CONNECTED, __ipoib_sysfs=str(root)))
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert "ipoib_mode=connected is not possible" in message and "mlx5" in message, message
    assert "ipoib_enhanced=0" in message and "ipoib_mode=datagram" in message, message
    assert run.stats["localhost"]["changed"] == 0


def test_connected_mode_with_enhanced_ipoib_on_writes_the_setting_and_stops(run_playbook, tmp_path):
    root = sysfs(tmp_path / "sys", "mlx5_core", enhanced="1")
    run = run_playbook(apply_role("ipoib"), inventory(), dict(CONNECTED, __ipoib_sysfs=str(root)))
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert message.startswith("RELOAD NEEDED on localhost"), message
    assert "ipoib_enhanced=1" in message and "ipoib_reload_driver=true" in message, message
    done = ran(run)
    # the persistent setting is the one change (with its directory where there is none); the
    # interface is left alone
    changed = {n.split(" : ", 1)[-1] for n, _, res in run.task_results() if res.get("changed")}
    setting = "Keep enhanced IPoIB off from the next load of ib_ipoib on"
    assert setting in changed and changed <= {setting, "Create /etc/modprobe.d"}, changed
    assert not [t for t in done if t.startswith("Configure through")], done


def test_connected_mode_with_enhanced_ipoib_off_goes_on_to_configure(run_playbook, tmp_path):
    root = sysfs(tmp_path / "sys", "mlx5_core", enhanced="0")
    run = run_playbook(apply_role("ipoib"), inventory(), dict(CONNECTED, __ipoib_sysfs=str(root)))
    done = ran(run)
    assert "Configure through systemd-networkd" in done, (done, run.failed_tasks())
    assert not any(m.startswith(("RELOAD NEEDED", "ipoib_mode=connected")) for m in messages(run))


def test_connected_mode_on_a_connectx3_needs_no_driver_setting_check(run_playbook, tmp_path):
    # mlx4 (ConnectX-3) has no enhanced IPoIB: the kernel's own ib_ipoib runs connected mode
    root = sysfs(tmp_path / "sys", "mlx4_core", enhanced=None)
    run = run_playbook(apply_role("ipoib"), inventory(), dict(CONNECTED, __ipoib_sysfs=str(root)))
    assert "Configure through systemd-networkd" in ran(run), run.failed_tasks()


CHILD = "198.18.0.10/24, datagram, MTU 2044"


def staged(run) -> str:
    [note] = [m for m in messages(run) if m.startswith("STAGED:")]
    return note


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, "STAGED: ib0 (198.18.0.10/24, datagram, MTU 2044)"),
        ({"ipoib_partition_mtu": 4096}, "STAGED: ib0 (198.18.0.10/24, datagram, MTU 4092)"),
        ({"ipoib_mode": "connected"}, "STAGED: ib0 (198.18.0.10/24, connected, MTU 65520)"),
        # as partitions.conf writes it, with or without the full-membership bit
        ({"ipoib_pkey": "0x8001"}, "STAGED: ib0.8001 (" + CHILD + ", P_Key 0x8001)"),
        ({"ipoib_pkey": "0x0001"}, "STAGED: ib0.8001 (" + CHILD + ", P_Key 0x8001)"),
        # YAML reads an unquoted 0x8002 as the number 32770
        ({"ipoib_pkey": 32770}, "STAGED: ib0.8002 (" + CHILD + ", P_Key 0x8002)"),
    ],
    ids=["datagram-2k", "datagram-4k", "connected", "pkey-full", "pkey-low", "pkey-number"],
)
def test_the_staged_interface_its_mode_mtu_and_pkey(run_playbook, tmp_path, extra, expected):
    settings = {"ipoib_stage_without_device": True, "ipoib_backend": "ifupdown", **extra}
    settings |= no_ipoib(tmp_path)
    run = run_playbook(apply_role("ipoib"), inventory(), settings)
    assert run.rc == 0, run.failed_tasks()
    note = staged(run)
    assert note.startswith(expected + " is configured through ifupdown"), note
    # connected mode staged without the HCA it will meet: what an mlx5 one needs, said now
    assert ("ConnectX-4 or newer" in note) == (extra.get("ipoib_mode") == "connected"), note


def test_connected_mode_staged_with_mlnx_ofed_needs_no_warning(run_playbook, tmp_path):
    settings = {"ipoib_stage_without_device": True, "ipoib_backend": "ifupdown"}
    settings |= {"ipoib_mode": "connected", "ofed_source": "mlnx_ofed", **no_ipoib(tmp_path)}
    run = run_playbook(apply_role("ipoib"), inventory(), settings)
    assert run.rc == 0, run.failed_tasks()
    assert "ConnectX-4 or newer" not in staged(run)
