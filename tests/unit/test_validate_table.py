"""validate.yml's table when nodes give no results: a node that cannot be reached, and the
cross-node and Slurm checks that then never ran, are failed rows. Without them the table holds
only the reachable head node's skipped rows and reads "every check passed". Nodes a --limit
leaves out of the run are not counted."""

from __future__ import annotations

import json
import os
import socket

import yaml

from tests.conftest import REPO, ansible_bin, json_run
from tests.host import gpus_on_pci_bus, rdma_devices


def closed_port() -> int:
    with socket.socket() as sock:  # bound and closed again: nothing listens there now
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def validate(tmp_path, *args: str):
    """validate.yml on this machine as head01 and two compute nodes nothing answers for: its
    exit status and table."""
    unreachable = {
        "ansible_host": "127.0.0.1",
        "ansible_port": closed_port(),
        "ansible_ssh_common_args": "-o ConnectTimeout=5 -o StrictHostKeyChecking=no",
    }
    here = {
        "ansible_connection": "local",
        "ansible_python_interpreter": "{{ ansible_playbook_python }}",
    }
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {"cluster": {"children": {
        "head": {"hosts": {"head01": here}},
        "compute": {"hosts": {"c4140-01": unreachable, "c4140-02": unreachable}},
    }}}}}))  # fmt: skip
    report = tmp_path / "validate.json"
    playbook = str(REPO / "playbooks/validate.yml")
    cmd = [ansible_bin("ansible-playbook"), "-i", str(inventory), playbook,
           "-e", f"dlperf_validate_report={report}", *args]  # fmt: skip
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
        ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
        ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json",
    )
    run = json_run(cmd, env, REPO)
    return run.rc, json.loads(report.read_text())


def test_compute_nodes_that_cannot_be_reached_fail_the_table(tmp_path):
    rc, table = validate(tmp_path)
    assert rc != 0
    rows = {(r["check"], r["node"]): r for r in table["rows"]}
    # this machine as the head node: none required, so skipped where it has none
    if not gpus_on_pci_bus():
        assert rows[("GPUs", "head01")]["status"] == "skip"
    if not rdma_devices():
        assert rows[("RDMA device", "head01")]["status"] == "skip"
    for node in ("c4140-01", "c4140-02"):
        assert rows[("node checks", node)]["status"] == "fail"
        assert "unreachable" in rows[("node checks", node)]["detail"]
    assert rows[("cross-node checks", "c4140-01")]["status"] == "fail"
    assert rows[("Slurm", "c4140-01")]["status"] == "fail"
    assert table["failed"] == 4


def test_nodes_a_limit_leaves_out_are_not_counted(tmp_path):
    # The limit names the cluster's nodes only (not the implicit localhost): the table is
    # written and judged all the same.
    rc, table = validate(tmp_path, "--limit", "head01")
    assert rc == 0 and table["failed"] == 0
    assert {r["node"] for r in table["rows"]} == {"head01"}


def test_a_limit_with_an_unreachable_node_fails_the_run_with_its_table(tmp_path):
    rc, table = validate(tmp_path, "--limit", "head01,c4140-01")
    assert rc != 0
    rows = {(r["check"], r["node"]): r for r in table["rows"]}
    assert rows[("node checks", "c4140-01")]["status"] == "fail"
    assert not any(node == "c4140-02" for _, node in rows)


def gpu_row(tmp_path, fixture: str, on_bus: int) -> dict:
    """validate.yml's GPUs row of head01 (no GPU expected there) whose nvidia-smi answers as
    FIXTURE and whose PCI bus holds ON_BUS NVIDIA GPUs."""
    bus = tmp_path / "pci"
    for i in range(on_bus):
        (bus / f"0000:{i + 0x18:02x}:00.0").mkdir(parents=True)
        (bus / f"0000:{i + 0x18:02x}:00.0" / "vendor").write_text("0x10de\n")
        (bus / f"0000:{i + 0x18:02x}:00.0" / "class").write_text("0x030200\n")
    os.environ["NVSMI_FIXTURE"] = str(REPO / "tests/fixtures/nvidia-smi" / fixture)
    try:
        _, table = validate(
            tmp_path, "--limit", "head01",
            "-e", f"__validate_nvidia_smi={REPO / 'tests/fixtures/bin/nvidia-smi'}",
            "-e", f"__validate_sysfs_pci_root={bus}",
        )  # fmt: skip
    finally:
        del os.environ["NVSMI_FIXTURE"]
    return next(r for r in table["rows"] if r["check"] == "GPUs")


def test_a_gpu_on_the_bus_that_nvidia_smi_does_not_see_fails_its_row(tmp_path):
    # the C4140-M's four V100s answer, a fifth on the bus does not (fallen off the bus, no
    # driver for it): a failed row even where no GPU count is expected
    row = gpu_row(tmp_path, "c4140-m", on_bus=5)
    assert row["status"] == "fail", row
    assert "5 NVIDIA GPU(s) on the PCI bus, nvidia-smi sees 4" in row["detail"], row


def test_every_gpu_on_the_bus_seen_passes_its_row(tmp_path):
    row = gpu_row(tmp_path, "c4140-m", on_bus=4)
    assert row["status"] == "pass" and row["detail"].startswith("4 x Tesla V100"), row
