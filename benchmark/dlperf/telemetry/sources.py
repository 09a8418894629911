"""What one sample reads. Each source returns a dict, or raises SourceMissing with the reason;
a missing source is recorded as missing, never a crash."""

from __future__ import annotations

from pathlib import Path

import psutil
from dlperf_module_utils.dlperf_ib import read_counters


class SourceMissing(Exception):
    pass


def parse_mountstats(text: str) -> dict[str, dict]:
    """NFS mounts from /proc/self/mountstats: bytes actually read/written from/to the server.

    The per-mount ``bytes:`` line holds normalread normalwrite directread directwrite
    serverread serverwrite readpages writepages (nfs(5), kernel fs/nfs/iostat.h).
    """
    mounts: dict[str, dict] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("device "):
            parts = line.split()
            # device SERVER:/path mounted on /mnt with fstype nfs4 statvers=1.1
            fstype = parts[parts.index("fstype") + 1] if "fstype" in parts else ""
            if fstype.startswith("nfs"):
                current = parts[4]
                mounts[current] = {"server": parts[1], "fstype": fstype}
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
    return parse_mountstats(text)


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
    return {
        port: {"xmit_bytes": c["port_xmit_bytes"], "rcv_bytes": c["port_rcv_bytes"]}
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
    """NVML through nvidia-ml-py; initialised once."""

    def __init__(self) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception as exc:  # library missing, no driver, no GPU
            raise SourceMissing(f"NVML unavailable: {type(exc).__name__}: {exc}") from exc
        self.nvml = pynvml
        self.handles = [
            pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
        ]
        if not self.handles:
            raise SourceMissing("NVML reports no GPU")

    def __call__(self) -> dict:
        n = self.nvml
        out = {}
        for i, h in enumerate(self.handles):
            util = n.nvmlDeviceGetUtilizationRates(h)
            mem = n.nvmlDeviceGetMemoryInfo(h)
            out[str(i)] = {
                "util_percent": util.gpu,
                "mem_used_bytes": mem.used,
                "power_w": n.nvmlDeviceGetPowerUsage(h) / 1000.0,
            }
        return out
