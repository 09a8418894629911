# Parsing of nvidia-smi output and classification of the GPUs' PCIe layout.
# Pure Python (no Ansible imports) so the dlperf package can use the same code.
from __future__ import annotations

import re

QUERY_FIELDS = (
    "index",
    "name",
    "uuid",
    "memory.total",
    "pci.bus_id",
    "persistence_mode",
    "driver_version",
)
QUERY_ARGS = ["--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,noheader,nounits"]
SWITCH_LINKS = {"PIX", "PXB"}  # paths through PCIe switches/bridges, not the CPU
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # terminal colour/underline sequences

# Layout names, and the reference configurations they correspond to.
LAYOUTS = {
    "single_switch_one_cpu": "all GPUs behind PCIe switch(es) on one CPU (C4140 configuration K)",
    "direct_both_cpus": "GPUs attached directly to both CPUs, no switch (C4140 configuration M)",
    "switched_both_cpus": "GPU groups behind PCIe switches on both CPUs (DGX-1 style)",
    "direct_one_cpu": "GPUs attached directly to one CPU, no switch seen",
    "single_gpu": "one GPU",
    "unknown": "GPUs present, but `nvidia-smi topo -m` printed no matrix of them",
    "none": "no GPU",
}


def _mib(value: str) -> int | None:
    """A memory size in MiB, or None for what a sick GPU reports instead ([N/A], [GPU requires
    reset], [Unknown Error])."""
    try:
        return int(float(value))
    except ValueError:
        return None


def parse_query(text: str, notes: list | None = None) -> list[dict]:
    """The GPUs of nvidia-smi's CSV query. Lines that are not GPU rows (nvidia-smi's warnings,
    such as a corrupted infoROM) are left out and added to NOTES; a GPU row of another shape
    raises ValueError naming it."""
    gpus = []
    for line in text.strip().splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if not fields[0].isdigit():
            if notes is not None:
                notes.append(line.strip())
            continue
        if len(fields) != len(QUERY_FIELDS):
            raise ValueError(f"unexpected nvidia-smi query line: {line!r}")
        index, name, uuid, memory, bus, persistence, driver = fields
        gpus.append(
            {
                "index": int(index),
                "name": name,
                "uuid": uuid,
                "memory_total_mib": _mib(memory),
                "pci_bus_id": bus,
                "persistence_mode": persistence.lower() == "enabled",
                "driver_version": driver,
            }
        )
    return gpus


def parse_cuda_version(text: str) -> str | None:
    match = re.search(r"CUDA Version\s*:\s*([0-9.]+)", text)
    return match.group(1) if match else None


def parse_topology(text: str) -> dict:
    """Parse `nvidia-smi topo -m`: the device matrix, CPU and NUMA affinity per GPU.

    Current drivers underline the header row with terminal escapes (`\\x1b[4m` ... `\\x1b[0m`)
    even when the output is not a terminal; they are dropped before the columns are read.
    """
    lines = ANSI_ESCAPE.sub("", text).split("\n")
    header = lines[0].split("\t")
    columns = [c.strip() for c in header[1:] if c.strip()]
    devices = [c for c in columns if c not in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")]
    matrix: dict[str, dict[str, str]] = {}
    cpu_affinity: dict[str, str] = {}
    numa_affinity: dict[str, str] = {}
    for line in lines[1:]:
        if not line.strip() or line.startswith("Legend"):
            break
        cells = line.split("\t")
        name = cells[0].strip()
        values = [c.strip() for c in cells[1:]]
        matrix[name] = {dev: values[i] for i, dev in enumerate(devices) if i < len(values)}
        extra = values[len(devices) :]
        if name.startswith("GPU"):
            if "CPU Affinity" in columns and extra:
                cpu_affinity[name] = extra[0]
            if "NUMA Affinity" in columns and len(extra) > 1:
                numa_affinity[name] = extra[1]
    # Newer drivers name the NICs NIC0, NIC1 ... and list their devices under "NIC Legend"
    # ("  NIC0: mlx5_0"); older ones print the device names in the matrix itself.
    nics = dict(re.findall(r"^\s*(NIC\d+):\s*(\S+)\s*$", text, flags=re.MULTILINE))
    if nics:
        devices = [nics.get(d, d) for d in devices]
        matrix = {
            nics.get(row, row): {nics.get(d, d): v for d, v in cells.items()}
            for row, cells in matrix.items()
        }
    return {
        "devices": devices,
        "matrix": matrix,
        "cpu_affinity": cpu_affinity,
        "numa_affinity": numa_affinity,
    }


def classify(topology: dict, gpu_count: int = 0) -> dict:
    """PCIe layout of the GPUs from the topology matrix (unknown when it lists none of the
    GPU_COUNT GPUs the driver reported).

    CPU sockets are told apart by the GPUs' NUMA affinity (or CPU affinity on drivers that do
    not print NUMA). A PCIe switch shows as a PIX/PXB path between two GPUs or between a GPU
    and a NIC; NVLink (NV#) between GPUs hides their PCIe path, so the NICs' rows still count.
    """
    gpus = [d for d in topology["devices"] if d.startswith("GPU")]
    matrix = topology["matrix"]
    nvlink = any(re.fullmatch(r"NV\d+", v or "") for g in gpus for v in matrix.get(g, {}).values())
    if not gpus:
        layout = "unknown" if gpu_count else "none"
        return {
            "layout": layout,
            "sockets": 0,
            "pcie_switch": False,
            "nvlink": False,
            "description": LAYOUTS[layout],
        }
    sockets_by = topology["numa_affinity"] or topology["cpu_affinity"]
    sockets = len({sockets_by.get(g, "?") for g in gpus})
    switch = any(v in SWITCH_LINKS for g in gpus for v in matrix.get(g, {}).values())
    if len(gpus) == 1:
        layout = "single_gpu"
    elif sockets == 1:
        layout = "single_switch_one_cpu" if switch else "direct_one_cpu"
    else:
        layout = "switched_both_cpus" if switch else "direct_both_cpus"
    return {
        "layout": layout,
        "sockets": sockets,
        "pcie_switch": switch,
        "nvlink": nvlink,
        "description": LAYOUTS[layout],
    }


NVIDIA_PCI_VENDOR = "0x10de"


def nvidia_pci_devices(root: str = "/sys/bus/pci/devices") -> list[str]:
    """PCI addresses of NVIDIA display/3D controllers (class 0x03xxxx) under a sysfs root.

    This sees GPUs with or without a driver, which is what decides whether to install one.
    NVIDIA's audio and USB functions on the same cards (other classes) are not counted.
    """
    import os

    found = []
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return found
    for entry in entries:
        try:
            with open(os.path.join(root, entry, "vendor")) as f:
                vendor = f.read().strip().lower()
            with open(os.path.join(root, entry, "class")) as f:
                pci_class = f.read().strip().lower()
        except OSError:
            continue
        if vendor == NVIDIA_PCI_VENDOR and pci_class.startswith("0x03"):
            found.append(entry)
    return found


def cuda_build_runs(capability: tuple[int, int], arch_flags: list[str]) -> bool:
    """Whether code built for ``arch_flags`` (a framework's CUDA targets, e.g. PyTorch's
    ``torch.cuda.get_arch_list()``: ``sm_80``, ``sm_90a``, ``compute_90``) runs on a GPU of
    compute ``capability`` (major, minor).

    Machine code (``sm_XY``) runs on GPUs of the same major version and an equal or later minor
    one; architecture-specific code (``sm_XYa``) only on exactly that GPU; PTX (``compute_XY``)
    is compiled by the driver for any GPU of capability X.Y or later. So a CUDA 13 build of
    PyTorch (``sm_75`` .. ``sm_120``, no PTX) has nothing a V100 (7.0) can run.
    """
    major, minor = capability
    for flag in arch_flags:
        match = re.fullmatch(r"(sm|compute)_(\d+?)(\d)([af]?)", flag)
        if not match:
            continue
        kind = match.group(1)
        code = (int(match.group(2)), int(match.group(3)))
        suffix = match.group(4)
        if kind == "compute" and code <= capability:
            return True
        if kind == "sm" and suffix == "a" and code == capability:
            return True
        if kind == "sm" and suffix != "a" and code[0] == major and code[1] <= minor:
            return True
    return False
