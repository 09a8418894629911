"""What one sample reads. Each source returns a dict, or raises SourceMissing with the reason;
a missing source is recorded as missing, never a crash."""

from __future__ import annotations

from pathlib import Path

import psutil
from dlperf_module_utils.dlperf_ib import read_counters


class SourceMissing(Exception):
    pass


def mount_devices(mountinfo: str) -> dict[str, str]:
    """{mount point: major:minor} from /proc/self/mountinfo (its 5th and 3rd fields)."""
    devices = {}
    for line in mountinfo.splitlines():
        parts = line.split()
        if len(parts) > 4:
            devices[parts[4]] = parts[2]
    return devices


def parse_mountstats(text: str, devices: dict[str, str] | None = None) -> dict[str, dict]:
    """NFS mounts from /proc/self/mountstats: bytes actually read/written from/to the server.

    The per-mount ``bytes:`` line holds normalread normalwrite directread directwrite
    serverread serverwrite readpages writepages (nfs(5), kernel fs/nfs/iostat.h). Those
    counters are the superblock's: mounts that share one (a bind mount, two mounts of one
    export) repeat them, so only the first mount of each device (DEVICES, from mountinfo) is
    kept — summed, they would count every byte twice.
    """
    mounts: dict[str, dict] = {}
    seen: set[str] = set()
    current = None
    for line in text.splitlines():
        if line.startswith("device "):
            parts = line.split()
            # device SERVER:/path mounted on /mnt with fstype nfs4 statvers=1.1
            fstype = parts[parts.index("fstype") + 1] if "fstype" in parts else ""
            device = (devices or {}).get(parts[4]) if len(parts) > 4 else None
            # nfs and nfs4 (not nfsd, a server's own control file system)
            if fstype in ("nfs", "nfs4") and (device is None or device not in seen):
                current = parts[4]
                mounts[current] = {"server": parts[1], "fstype": fstype}
                if device is not None:
                    seen.add(device)
            else:
                current = None
        elif current and line.strip().startswith("bytes:"):
            values = [int(v) for v in line.split()[1:]]
            if len(values) >= 6:
                mounts[current]["read_bytes"] = values[4]
                mounts[current]["write_bytes"] = values[5]
    return mounts


def nfs(proc_root: str = "/") -> dict:
    path = Path(proc_root) / "proc/self/mountstats"
    try:
        text = path.read_text()
    except OSError as exc:
        raise SourceMissing(f"{path}: {exc.strerror}") from exc
    try:
        devices = mount_devices((Path(proc_root) / "proc/self/mountinfo").read_text())
    except OSError:
        devices = None  # no way to tell shared superblocks apart: every mount kept
    return parse_mountstats(text, devices)


def block() -> dict:
    counters = psutil.disk_io_counters(perdisk=True) or {}
    return {
        name: {"read_bytes": c.read_bytes, "write_bytes": c.write_bytes}
        for name, c in counters.items()
    }


def network() -> dict:
    counters = psutil.net_io_counters(pernic=True) or {}
    return {
        name: {"sent_bytes": c.bytes_sent, "recv_bytes": c.bytes_recv}
        for name, c in counters.items()
    }


def fabric(sysfs_root: str = "/") -> dict:
    counters = read_counters(sysfs_root)
    if not counters:
        raise SourceMissing("no RDMA device in /sys/class/infiniband")
    # A 32-bit counter stopped at its maximum reads None (unknown), its name kept beside it.
    return {
        port: {"xmit_bytes": c["port_xmit_bytes"], "rcv_bytes": c["port_rcv_bytes"]}
        | ({"saturated": c["saturated"]} if c.get("saturated") else {})
        for port, c in counters.items()
    }


def host() -> dict:
    mem = psutil.virtual_memory()
    return {
        "cpu_percent": psutil.cpu_percent(interval=None),
        "mem_used_bytes": mem.used,
        "mem_cached_bytes": getattr(mem, "cached", 0),
        "mem_total_bytes": mem.total,
    }


class Gpu:
    """NVML through nvidia-ml-py; initialised once. A reading a GPU does not support (utilisation
    under MIG, power on some boards) or that this process may not read (power inside some
    containers) is None; a GPU NVML cannot reach (fallen off the bus, no permission to its
    handle) is left out with its reason in `lost`, the others sampled on."""

    def __init__(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
        except Exception as exc:  # library missing, no driver, no GPU
            raise SourceMissing(f"NVML unavailable: {type(exc).__name__}: {exc}") from exc
        self.nvml = pynvml
        self.unreadable = tuple(
            getattr(pynvml, name)
            for name in ("NVMLError_NotSupported", "NVMLError_NoPermission")
            if hasattr(pynvml, name)
        )
        self.handles: dict[str, object] = {}
        self.lost: dict[str, str] = {}
        for i in range(count):
            try:
                self.handles[str(i)] = pynvml.nvmlDeviceGetHandleByIndex(i)
            except pynvml.NVMLError as exc:
                self.lost[str(i)] = f"{type(exc).__name__}: {exc}"
        if not self.handles:
            why = "; ".join(f"GPU {i}: {r}" for i, r in self.lost.items())
            raise SourceMissing("NVML reports no GPU" + (f" it can reach ({why})" if why else ""))

    def _reading(self, read, handle, field: str):
        try:
            value = read(handle)
        except self.unreadable:
            return None
        return getattr(value, field) if field else value

    def __call__(self) -> dict:
        n = self.nvml
        out = {}
        for i, h in list(self.handles.items()):
            try:
                power_mw = self._reading(n.nvmlDeviceGetPowerUsage, h, "")
                out[i] = {
                    "util_percent": self._reading(n.nvmlDeviceGetUtilizationRates, h, "gpu"),
                    "mem_used_bytes": self._reading(n.nvmlDeviceGetMemoryInfo, h, "used"),
                    "power_w": None if power_mw is None else power_mw / 1000.0,
                }
            except n.NVMLError as exc:  # lost now (GpuIsLost, Unknown): said once, then left out
                reason = f"{type(exc).__name__}: {exc}"
                self.lost[i] = reason
                del self.handles[i]
                out[i] = {"lost": reason}
        if not self.handles:
            raise SourceMissing(
                "every GPU lost: " + "; ".join(f"GPU {i}: {r}" for i, r in self.lost.items())
            )
        return out
