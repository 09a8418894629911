"""ib_facts, run as Ansible runs it, on sysfs captured from a real soft-RoCE (rxe) device.

tests/fixtures/rxe/sysfs.tar.gz comes from tests/fixtures/rxe/capture.sh: a Debian 12 VM with
a real kernel, `rdma link add rxe0 type rxe netdev eth0`, and ib_write_bw traffic through it.
"""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LOCAL = {
    "ansible_connection": "local",
    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
}
INVENTORY = {"all": {"hosts": {"localhost": LOCAL}}}


def ib_facts(run_playbook, root: Path) -> dict:
    plays = [
        {
            "name": "Gather RDMA facts",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {"name": "Run ib_facts", "dlperf.cluster.ib_facts": {"sysfs_root": str(root)}}
            ],
        }
    ]
    run = run_playbook(plays, INVENTORY, check=True)
    assert run.rc == 0, run.failed_tasks()
    ((_, _, result),) = run.task_results()
    return result


@pytest.fixture(scope="module")
def rxe_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rxe")
    with tarfile.open(FIXTURES / "rxe" / "sysfs.tar.gz") as tar:
        tar.extractall(root, filter="data")
    return root


def test_soft_roce_device_and_port_are_reported(run_playbook, rxe_root):
    facts = ib_facts(run_playbook, rxe_root)
    assert facts["ib_present"] is True
    (dev,) = facts["devices"]
    assert dev["name"] == "rxe0" and dev["soft_roce"] is True
    assert dev["node_type"].startswith("1")  # "1: CA"
    port = dev["ports"]["1"]
    assert port["state"] == "ACTIVE" and port["phys_state"] == "LinkUp"
    assert port["link_layer"] == "Ethernet"
    assert port["rate_gbps"] and port["rate"].endswith(")")
    assert port["gids"], "a RoCE port has at least its link-local GID"


def test_soft_roce_bytes_come_from_the_parent_netdev(run_playbook, rxe_root):
    # rxe has no IB performance counters (no ports/1/counters), only hw_counters (packets).
    port_dir = rxe_root / "sys/class/infiniband/rxe0/ports/1"
    assert not (port_dir / "counters").exists() and (port_dir / "hw_counters").is_dir()
    facts = ib_facts(run_playbook, rxe_root)
    counters = facts["devices"][0]["ports"]["1"]["counters"]
    assert facts["devices"][0]["parent_netdev"] == "eth0"
    assert counters["source"] == "hw_counters + netdev eth0"
    assert counters["port_xmit_packets"] == int((port_dir / "hw_counters/sent_pkts").read_text())
    assert counters["port_xmit_packets"] > 0, "the capture pushed RDMA traffic through rxe0"
    stats = rxe_root / "sys/class/net/eth0/statistics"
    assert counters["port_xmit_bytes"] == int((stats / "tx_bytes").read_text())
    assert counters["port_rcv_bytes"] == int((stats / "rx_bytes").read_text())


def test_hca_data_counters_are_converted_from_words_to_bytes(run_playbook, tmp_path):
    # An InfiniBand HCA port (mlx5 layout): port_xmit_data/port_rcv_data count 4-byte words.
    port = tmp_path / "sys/class/infiniband/mlx5_0/ports/1"
    (port / "counters").mkdir(parents=True)
    for name, value in {
        "state": "4: ACTIVE",
        "phys_state": "5: LinkUp",
        "rate": "100 Gb/sec (4X EDR)",
        "link_layer": "InfiniBand",
        "lid": "0x3",
    }.items():
        (port / name).write_text(value + "\n")
    for name, value in {
        "port_xmit_data": 1000,
        "port_rcv_data": 250,
        "port_xmit_packets": 7,
        "port_rcv_packets": 3,
    }.items():
        (port / "counters" / name).write_text(f"{value}\n")
    (port.parents[1] / "fw_ver").write_text("16.35.2000\n")
    facts = ib_facts(run_playbook, tmp_path)
    (dev,) = facts["devices"]
    assert dev["soft_roce"] is False and dev["firmware"] == "16.35.2000"
    p = dev["ports"]["1"]
    assert (p["state"], p["rate_gbps"], p["link_layer"]) == ("ACTIVE", 100.0, "InfiniBand")
    assert p["counters"]["port_xmit_bytes"] == 4000 and p["counters"]["port_rcv_bytes"] == 1000
    assert p["counters"]["source"] == "port counters"


def test_ipoib_interfaces_are_found_by_link_type(run_playbook, tmp_path):
    # A node with an IPoIB interface: ib0 (type 32 = ARPHRD_INFINIBAND) in connected mode.
    net = tmp_path / "sys/class/net"
    for name, kind, extra in (
        ("ib0", "32", {"mode": "connected", "mtu": "65520"}),
        ("eth0", "1", {"mtu": "1500"}),
    ):
        (net / name).mkdir(parents=True)
        (net / name / "type").write_text(kind + "\n")
        (net / name / "operstate").write_text("up\n")
        for key, value in extra.items():
            (net / name / key).write_text(value + "\n")
    facts = ib_facts(run_playbook, tmp_path)
    assert facts["ib_present"] is False and facts["devices"] == []
    assert [(i["name"], i["mode"], i["mtu"]) for i in facts["ipoib"]] == [
        ("ib0", "connected", 65520)
    ]


def test_node_without_rdma_reports_nothing_and_does_not_fail(run_playbook, tmp_path):
    facts = ib_facts(run_playbook, tmp_path)
    assert facts["ib_present"] is False and facts["devices"] == [] and facts["ipoib"] == []


def test_telemetry_samples_the_same_counters_without_reading_the_gid_table(
    run_playbook, rxe_root, monkeypatch
):
    from dlperf.telemetry.sources import fabric
    from dlperf_module_utils import dlperf_ib

    facts = ib_facts(run_playbook, rxe_root)
    counters = facts["devices"][0]["ports"]["1"]["counters"]
    read, real_read = [], dlperf_ib._read
    monkeypatch.setattr(dlperf_ib, "_read", lambda path: read.append(path) or real_read(path))
    assert fabric(str(rxe_root)) == {
        "rxe0/1": {
            "xmit_bytes": counters["port_xmit_bytes"],
            "rcv_bytes": counters["port_rcv_bytes"],
        }
    }
    # each sample reads a handful of files, none of the port's GID table (rxe0 has 1024)
    assert len(list((rxe_root / "sys/class/infiniband/rxe0/ports/1/gids").iterdir())) > 100
    assert read and not [p for p in read if "/gids/" in p], read


def test_the_active_ports_put_adapters_first_and_leave_ports_that_are_down_out(
    run_playbook, rxe_root, tmp_path
):
    # Beside the captured rxe0: another vendor's RoCE device whose port is down, and a dual-port
    # HCA with port 1 down and port 2 up (sorted first by name, both; neither is soft-RoCE).
    root = tmp_path / "sysfs"
    shutil.copytree(rxe_root, root, symlinks=True)
    base = root / "sys/class/infiniband"
    for name in ("bnxt_re0", "mlx5_0"):
        shutil.copytree(base / "rxe0", base / name, symlinks=True)
        (base / name / "parent").unlink()
        (base / name / "ports/1/state").write_text("1: DOWN\n")
    shutil.copytree(base / "mlx5_0/ports/1", base / "mlx5_0/ports/2", symlinks=True)
    (base / "mlx5_0/ports/2/state").write_text("4: ACTIVE\n")
    facts = ib_facts(run_playbook, root)
    assert [(a["device"], a["port"], a["soft_roce"]) for a in facts["active"]] == [
        ("mlx5_0", "2", False),
        ("rxe0", "1", True),
    ]
    assert facts["active"][0]["link_layer"] == "Ethernet" and facts["active"][0]["rate"]


def test_a_32_bit_counter_stopped_at_its_maximum_is_unknown_not_a_count(tmp_path):
    # An HCA without extended counters: PortCounters are 32-bit and stop at 2^32-1 (in under 2 s
    # of EDR traffic for port_xmit_data); read as a count, the port would show no traffic.
    from dlperf.telemetry.sources import fabric
    from dlperf_module_utils.dlperf_ib import port_counters

    counters = tmp_path / "sys/class/infiniband/mlx4_0/ports/1/counters"
    counters.mkdir(parents=True)
    for name, value in {
        "port_xmit_data": 2**32 - 1,
        "port_rcv_data": 2**32 - 2,  # one below: still counting
        "port_xmit_packets": 2**32 - 1,
        "port_rcv_packets": 12,
    }.items():
        (counters / name).write_text(f"{value}\n")
    got = port_counters(str(counters.parent))
    assert got["port_xmit_bytes"] is None and got["port_xmit_packets"] is None
    assert got["port_rcv_bytes"] == (2**32 - 2) * 4 and got["port_rcv_packets"] == 12
    assert got["saturated"] == ["port_xmit_data", "port_xmit_packets"]
    # the telemetry sample of the port (Fig. 6's input) likewise
    assert fabric(str(tmp_path)) == {
        "mlx4_0/1": {
            "xmit_bytes": None,
            "rcv_bytes": (2**32 - 2) * 4,
            "saturated": ["port_xmit_data", "port_xmit_packets"],
        }
    }
