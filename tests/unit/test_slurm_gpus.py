"""The slurm role's GPU count: nvidia-smi's, checked against the GPUs on the PCI bus. A real
ansible-playbook run of the role in check mode on this machine, its PCI bus a tree in the
kernel's layout and its nvidia-smi one that is not there (no NVIDIA driver), pointed at through
the role's internal __slurm_sysfs_pci_root and __slurm_nvidia_smi."""

from __future__ import annotations

from pathlib import Path

from .test_role_input_validation import apply_role, inventory


def pci_bus(root: Path, devices: dict[str, tuple[str, str]]) -> Path:
    for address, (vendor, pci_class) in devices.items():
        (root / address).mkdir(parents=True)
        (root / address / "vendor").write_text(vendor + "\n")
        (root / address / "class").write_text(pci_class + "\n")
    return root


def node(bus: Path, tmp_path: Path) -> dict:
    """The role's view of a node with BUS and no NVIDIA driver."""
    return {
        "__slurm_sysfs_pci_root": str(bus),
        "__slurm_nvidia_smi": str(tmp_path / "no-driver" / "nvidia-smi"),
    }


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
    run = run_playbook([play], compute_inventory(), node(bus, tmp_path))
    assert run.rc != 0
    [(name, message)] = run.failed_tasks()
    assert name.endswith("Stop when the node has GPUs that nvidia-smi does not report"), name
    assert "1 NVIDIA GPU(s) on the PCI bus (0000:3b:00.0) but nvidia-smi reports 0" in message
    assert "not found: no NVIDIA driver installed" in message, message
    ran = [n for n, _, res in run.task_results() if not res.get("skipped")]
    assert not any("Write slurm.conf" in n for n in ran), ran


def test_a_node_that_failed_before_its_gpus_were_counted_keeps_them_in_slurm_conf(
    run_playbook, tmp_path
):
    """The controller writes slurm.conf for every compute node; one that failed before its
    count (here: a GPU nvidia-smi does not report) keeps the gpu:N of the slurm.conf in place
    instead of being offered without GPUs."""
    import platform

    from .test_role_input_validation import LOCAL

    bus = pci_bus(tmp_path / "pci", {"0000:3b:00.0": ("0x10de", "0x030200")})
    name = platform.node().split(".")[0]  # c1's hostname fact (it is this machine too)
    config = tmp_path / "etc-slurm"
    config.mkdir()
    (config / "slurm.conf").write_text(
        f"ClusterName=dlperf\nNodeName={name} NodeAddr=198.18.0.11 Sockets=1 CoresPerSocket=2 "
        "ThreadsPerCore=1 RealMemory=1000 Gres=gpu:4 State=UNKNOWN\n"
    )
    inv = inventory()
    inv["all"]["children"]["compute"]["hosts"]["c1"] = dict(LOCAL, cluster_ip="198.18.0.11")
    play = dict(apply_role("slurm")[0], hosts="all", gather_subset=["min", "hardware"])
    extra = {**node(bus, tmp_path), "__slurm_config_dir": str(config)}
    run = run_playbook([play], inv, extra)
    failed = run.failed_tasks()
    assert failed[0][0].endswith("Stop when the node has GPUs that nvidia-smi does not report")
    facts = [
        res["ansible_facts"]
        for task, host, res in run.task_results()
        if task.endswith("Work out each compute node's GPUs for slurm.conf") and host == "localhost"
    ]
    assert facts and facts[0]["__slurm_node_gpus"] == {name: "4"}, facts
    assert facts[0]["__slurm_gpus_kept"] == ["c1"]
    said = [
        res.get("msg")
        for task, host, res in run.task_results()
        if task.endswith("Say which nodes keep the GPU count slurm.conf gave them")
    ]
    assert said and said[0].endswith("(none where it held no line for them): c1 gpu:4"), said
