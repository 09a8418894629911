"""The ofed role's hardware seam: the kernel's RDMA drivers and the adapter on the PCI bus, read
before anything is installed. Real ansible-playbook runs in check mode on this machine; a host with
or without them is a tree in the kernel's layout (module/ib_core,
bus/pci/devices/<address>/vendor, lib/modules/<kernel>/kernel/drivers/infiniband) pointed at
through the role's internal __ofed_sysfs and __ofed_modules_root."""

from __future__ import annotations

import os
from pathlib import Path

from .test_role_gating import bare_sysfs, messages
from .test_role_input_validation import apply_role, inventory


def host_tree(root: Path, vendors: list[str], module_tree: bool) -> dict:
    sysfs, modules = root / "sys", root / "lib-modules"
    (sysfs / "module" / "ib_core").mkdir(parents=True)
    for i, vendor in enumerate(vendors):
        device = root / "devices" / f"0000:{i:02x}:00.0"
        device.mkdir(parents=True)
        (device / "vendor").write_text(vendor + "\n")
        (sysfs / "bus" / "pci" / "devices").mkdir(parents=True, exist_ok=True)
        (sysfs / "bus" / "pci" / "devices" / device.name).symlink_to(device)  # as sysfs links
    if module_tree:
        (modules / os.uname().release / "kernel" / "drivers" / "infiniband").mkdir(parents=True)
    return {"__ofed_sysfs": str(sysfs), "__ofed_modules_root": str(modules)}


def ran(run) -> list[str]:
    return [name.split(" : ", 1)[-1] for name, _, res in run.task_results()
            if not res.get("skipped")]  # fmt: skip


def test_required_rdma_on_a_kernel_without_it_fails_before_any_change(run_playbook, tmp_path):
    # no ib_core loaded, no infiniband drivers in the module tree, nothing on the PCI bus
    tree = {"__ofed_sysfs": str(bare_sysfs(tmp_path / "sys")),
            "__ofed_modules_root": str(tmp_path / "lib-modules")}  # fmt: skip
    run = run_playbook(apply_role("ofed"), inventory(), {"ofed_required": True, **tree})
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert "ofed_required is true" in message and "has no RDMA drivers" in message, message
    assert "Install the inbox RDMA stack" not in ran(run)
    assert run.stats["localhost"]["changed"] == 0


def test_required_infiniband_without_a_connectx_fails_naming_the_vendor(run_playbook, tmp_path):
    # The kernel can do RDMA (ib_core loaded, drivers present): only the adapter is missing.
    tree = host_tree(tmp_path, ["0x8086", "0x1af4"], module_tree=True)
    run = run_playbook(apply_role("ofed"), inventory(), {"ofed_required": True, **tree})
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert "has no infiniband adapter" in message and "vendor 0x15b3" in message, message
    assert "Install the inbox RDMA stack" not in ran(run)
    assert run.stats["localhost"]["changed"] == 0


def test_a_connectx_on_a_host_without_its_kernels_modules_skips_the_loading(run_playbook, tmp_path):
    # A container on an RDMA host: the host's ib_core and adapter show, its module tree does not.
    tree = host_tree(tmp_path, ["0x8086", "0x15b3"], module_tree=False)
    run = run_playbook(apply_role("ofed"), inventory(), {"ofed_required": True, **tree})
    assert run.rc == 0, run.failed_tasks()
    [skip] = [m for m in messages(run) if m.startswith("SKIP:")]
    assert "no module tree for its kernel" in skip and "adapter" not in skip, skip
    assert "Load the fabric's kernel modules now" not in ran(run)


def test_soft_roce_on_a_host_without_its_kernels_modules_configures_but_starts_nothing(
    run_playbook, tmp_path
):
    # The container case again, with the soft-RoCE fabric: the unit is written and the SKIP
    # message says no device is created, so none is started (its modprobe would fail).
    tree = host_tree(tmp_path, [], module_tree=False)
    # as on a host with the packages already installed (the check run would otherwise hold the
    # start back for packages it did not install)
    installed = {"ofed_packages_result": {"changed": False}}
    run = run_playbook(
        apply_role("ofed"), inventory(), {"ofed_fabric": "softroce", **tree, **installed}
    )
    assert run.rc == 0, run.failed_tasks()
    [skip] = [m for m in messages(run) if m.startswith("SKIP:")]
    assert "no device is created" in skip, skip
    assert "Install the soft-RoCE unit for eth1" in ran(run)
    assert "Create the soft-RoCE device now and at every boot" not in ran(run)
