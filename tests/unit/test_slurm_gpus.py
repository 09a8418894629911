"""The slurm role's GPU count: nvidia-smi's, checked against the GPUs on the PCI bus. A real
ansible-playbook run of the role in check mode on this machine (no NVIDIA driver), its PCI bus
a tree in the kernel's layout pointed at through the role's internal __slurm_sysfs_pci_root."""

from __future__ import annotations

from pathlib import Path

from .test_role_input_validation import apply_role, inventory


def pci_bus(root: Path, devices: dict[str, tuple[str, str]]) -> Path:
    for address, (vendor, pci_class) in devices.items():
        (root / address).mkdir(parents=True)
        (root / address / "vendor").write_text(vendor + "\n")
        (root / address / "class").write_text(pci_class + "\n")
    return root


def compute_inventory() -> dict:
    inv = inventory()
    inv["all"]["children"]["compute"]["hosts"]["localhost"] = {}
    return inv


def test_a_gpu_that_nvidia_smi_does_not_report_stops_the_role_before_slurm_conf(
    run_playbook, tmp_path
):
    bus = pci_bus(tmp_path / "pci", {
        "0000:3b:00.0": ("0x10de", "0x030200"),  # a V100 (3D controller), no driver answering
        "0000:3b:00.1": ("0x10de", "0x040300"),  # an NVIDIA audio function: not a GPU
        "0000:5e:00.0": ("0x15b3", "0x020700"),  # the ConnectX
    })  # fmt: skip
    play = dict(apply_role("slurm")[0], gather_subset=["min", "hardware"])  # slurm.conf's facts
    run = run_playbook([play], compute_inventory(), {"__slurm_sysfs_pci_root": str(bus)})
    assert run.rc != 0
    [(name, message)] = run.failed_tasks()
    assert name.endswith("Stop when the node has GPUs that nvidia-smi does not report"), name
    assert "1 NVIDIA GPU(s) on the PCI bus (0000:3b:00.0) but nvidia-smi reports 0" in message
    assert "not found: no NVIDIA driver installed" in message, message
    ran = [n for n, _, res in run.task_results() if not res.get("skipped")]
    assert not any("Write slurm.conf" in n for n in ran), ran
