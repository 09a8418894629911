"""What this machine has, for the tests that run real code against it: NVML answering for an
NVIDIA GPU, one on the PCI bus, RDMA devices, NFS mounts. Such a test asserts what the code
finds here, so that it holds on a GPU or InfiniBand node as on a machine without either."""

from __future__ import annotations

import contextlib
from pathlib import Path


def nvml_answers() -> bool:
    """Whether NVML (nvidia-ml-py over the driver's libnvidia-ml) answers here for a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no library, no driver: NVMLError and its kin
        return False
    try:
        return pynvml.nvmlDeviceGetCount() > 0
    except Exception:
        return False
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def gpus_on_pci_bus(root: Path = Path("/sys/bus/pci/devices")) -> list[str]:
    """The PCI addresses of NVIDIA display and 3D controllers (vendor 0x10de, class 0x03)."""
    found = []
    for device in sorted(root.glob("*")):
        with contextlib.suppress(OSError):
            vendor = (device / "vendor").read_text().strip()
            pci_class = (device / "class").read_text().strip()
            if vendor == "0x10de" and pci_class.startswith("0x03"):
                found.append(device.name)
    return found


def rdma_devices(root: Path = Path("/sys/class/infiniband")) -> list[str]:
    return sorted(p.name for p in root.glob("*"))


def nfs_mounts(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[str]:
    """Mount points of NFS file systems (the file system type after mountinfo's separator)."""
    mounts = []
    for line in mountinfo.read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        if rest.split(" ", 1)[0] in ("nfs", "nfs4"):
            mounts.append(fields.split(" ")[4])
    return mounts
