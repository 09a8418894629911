# Reading RDMA devices (InfiniBand, RoCE, soft-RoCE rxe) and IPoIB interfaces from sysfs.
# Pure Python (no Ansible imports) so the dlperf telemetry sampler can use the same code.
from __future__ import annotations

import os

# port_xmit_data / port_rcv_data count octets divided by 4 (IBA spec, "PortXmitData").
DATA_COUNTERS = ("port_xmit_data", "port_rcv_data")
PACKET_COUNTERS = ("port_xmit_packets", "port_rcv_packets")
# Without the extended (64-bit) counters of PortCountersExtended, which the kernel reads when
# the HCA has them, these are the 32-bit PortCounters, and those stop at their maximum instead
# of wrapping: at EDR rates port_xmit_data gets there in under 2 s of traffic. A stopped counter
# would read as no traffic at all; it reads as unknown (None) and the port lists it.
SATURATED_32 = 2**32 - 1
ARPHRD_INFINIBAND = "32"


def _read(path: str) -> str | None:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def _int(path: str) -> int | None:
    value = _read(path)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _state(value: str | None) -> dict:
    """'4: ACTIVE' -> {'code': 4, 'name': 'ACTIVE'}."""
    if not value:
        return {"code": None, "name": None}
    code, _sep, name = value.partition(":")
    return {
        "code": int(code) if code.strip().isdigit() else None,
        "name": name.strip() or code.strip(),
    }


def port_counters(port_dir: str, parent_netdev_dir: str | None = None) -> dict:
    """Data and packet counters of one port.

    HCAs expose the IB performance counters under ports/N/counters (data in 4-byte words).
    Soft-RoCE (rxe) has none of those, only ports/N/hw_counters (sent_pkts, rcvd_pkts): its
    bytes are taken from the parent Ethernet device's statistics, and ``source`` says so.
    """
    counters = os.path.join(port_dir, "counters")
    out: dict = {}
    if os.path.isdir(counters):
        saturated = []
        for name in (*DATA_COUNTERS, *PACKET_COUNTERS):
            value = _int(os.path.join(counters, name))
            if value == SATURATED_32:
                saturated.append(name)
                value = None
            if name in DATA_COUNTERS:
                out[name.replace("_data", "_bytes")] = value * 4 if value is not None else None
            else:
                out[name] = value
        if saturated:
            out["saturated"] = saturated
        out["source"] = "port counters"
        return out
    hw = os.path.join(port_dir, "hw_counters")
    out["port_xmit_packets"] = _int(os.path.join(hw, "sent_pkts"))
    out["port_rcv_packets"] = _int(os.path.join(hw, "rcvd_pkts"))
    if parent_netdev_dir:
        stats = os.path.join(parent_netdev_dir, "statistics")
        out["port_xmit_bytes"] = _int(os.path.join(stats, "tx_bytes"))
        out["port_rcv_bytes"] = _int(os.path.join(stats, "rx_bytes"))
        out["source"] = f"hw_counters + netdev {os.path.basename(parent_netdev_dir)}"
    else:
        out["port_xmit_bytes"] = out["port_rcv_bytes"] = None
        out["source"] = "hw_counters"
    return out


def read_port(port_dir: str, parent_netdev_dir: str | None = None) -> dict:
    gids = []
    gid_dir = os.path.join(port_dir, "gids")
    if os.path.isdir(gid_dir):
        for name in sorted(os.listdir(gid_dir), key=lambda n: int(n) if n.isdigit() else 0):
            gid = _read(os.path.join(gid_dir, name))
            if gid and gid != "0000:0000:0000:0000:0000:0000:0000:0000":
                gids.append(gid)
    rate = _read(os.path.join(port_dir, "rate"))
    gbps = None
    if rate:
        try:
            gbps = float(rate.split()[0])
        except ValueError:
            gbps = None
    return {
        "state": _state(_read(os.path.join(port_dir, "state")))["name"],
        "phys_state": _state(_read(os.path.join(port_dir, "phys_state")))["name"],
        "rate": rate,
        "rate_gbps": gbps,
        "link_layer": _read(os.path.join(port_dir, "link_layer")),
        "lid": _read(os.path.join(port_dir, "lid")),
        "gids": gids,
        "counters": port_counters(port_dir, parent_netdev_dir),
    }


def _devices(sysfs_root: str):
    """(name, device dir, parent netdev, its sysfs dir, {port: port dir}) per RDMA device."""
    base = os.path.join(sysfs_root, "sys/class/infiniband")
    if not os.path.isdir(base):
        return
    for name in sorted(os.listdir(base)):
        dev = os.path.join(base, name)
        ports_dir = os.path.join(dev, "ports")
        netdev = _read(os.path.join(dev, "parent")) or None
        netdev_dir = os.path.join(sysfs_root, "sys/class/net", netdev) if netdev else None
        ports = {}
        if os.path.isdir(ports_dir):
            ports = {p: os.path.join(ports_dir, p) for p in sorted(os.listdir(ports_dir))}
        yield name, dev, netdev, netdev_dir, ports


def read_counters(sysfs_root: str = "/") -> dict[str, dict]:
    """Only the counters of every port, keyed DEVICE/PORT: what telemetry samples at every
    interval. read_devices also reads each port's GID table, one file per entry (rxe has
    1024): over a second of CPU per call on an emulated node."""
    return {
        f"{name}/{port}": port_counters(port_dir, netdev_dir)
        for name, _dev, _netdev, netdev_dir, ports in _devices(sysfs_root)
        for port, port_dir in ports.items()
    }


def read_devices(sysfs_root: str = "/") -> list[dict]:
    devices = []
    for name, dev, netdev, netdev_dir, port_dirs in _devices(sysfs_root):
        ports = {port: read_port(port_dir, netdev_dir) for port, port_dir in port_dirs.items()}
        devices.append(
            {
                "name": name,
                "firmware": _read(os.path.join(dev, "fw_ver")),
                "node_type": _read(os.path.join(dev, "node_type")),
                "node_guid": _read(os.path.join(dev, "node_guid")),
                "board_id": _read(os.path.join(dev, "board_id")),
                "parent_netdev": netdev,
                "soft_roce": name.startswith("rxe") or netdev is not None,
                "ports": ports,
            }
        )
    return devices


def active_ports(devices: list[dict]) -> list[dict]:
    """Every ACTIVE port as {device, port, link_layer, rate}: host channel adapters first, then
    soft-RoCE devices, each in name and port order. The first is the one to test the fabric on:
    a node may also hold a port that is down, or another vendor's RoCE device."""
    ports = [
        {"device": d["name"], "port": p, "link_layer": v["link_layer"], "rate": v["rate"],
         "soft_roce": d["soft_roce"]}
        for d in devices
        for p, v in d["ports"].items()
        if v["state"] == "ACTIVE"
    ]  # fmt: skip
    return sorted(ports, key=lambda a: (a["soft_roce"], a["device"], int(a["port"] or 0)))


def read_ipoib(sysfs_root: str = "/") -> list[dict]:
    base = os.path.join(sysfs_root, "sys/class/net")
    out = []
    if not os.path.isdir(base):
        return out
    for name in sorted(os.listdir(base)):
        net = os.path.join(base, name)
        if _read(os.path.join(net, "type")) != ARPHRD_INFINIBAND:
            continue
        out.append(
            {
                "name": name,
                "mode": _read(os.path.join(net, "mode")),
                "mtu": _int(os.path.join(net, "mtu")),
                "operstate": _read(os.path.join(net, "operstate")),
                "address": _read(os.path.join(net, "address")),
            }
        )
    return out
