"""gpu_facts, run as Ansible runs it, against nvidia-smi outputs of three real layouts."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
FAKE_SMI = str(FIXTURES / "bin" / "nvidia-smi")
LOCAL = {
    "ansible_connection": "local",
    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
}
INVENTORY = {"all": {"hosts": {"localhost": LOCAL}}}


def gpu_facts(run_playbook, fixture: str, binary: str = FAKE_SMI, **args) -> dict:
    plays = [
        {
            "name": "Gather GPU facts",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Run gpu_facts",
                    "dlperf.cluster.gpu_facts": {"nvidia_smi": binary, **args},
                    "environment": {"NVSMI_FIXTURE": fixture},
                }
            ],
        }
    ]
    run = run_playbook(plays, INVENTORY, check=True)
    assert run.rc == 0, run.failed_tasks()
    ((_, _, result),) = run.task_results()
    return result


V100_DRIVER = ("450.80.02", "11.0")


@pytest.mark.parametrize(
    ("fixture", "count", "memory", "layout", "sockets", "driver"),
    [
        ("c4140-k", 4, 16160, "single_switch_one_cpu", 1, V100_DRIVER),
        ("c4140-m", 4, 32510, "direct_both_cpus", 2, V100_DRIVER),
        ("dgx1", 8, 32510, "switched_both_cpus", 2, V100_DRIVER),
        ("hgx-h100", 8, 81559, "switched_both_cpus", 2, ("580.159.04", "13.0")),
    ],
)
def test_layouts_are_classified(run_playbook, fixture, count, memory, layout, sockets, driver):
    facts = gpu_facts(run_playbook, str(FIXTURES / "nvidia-smi" / fixture))
    assert facts["gpu_present"] and facts["driver_loaded"]
    assert len(facts["gpus"]) == count
    assert {g["memory_total_mib"] for g in facts["gpus"]} == {memory}
    assert facts["pcie_layout"] == layout
    assert facts["sockets"] == sockets
    assert facts["nvlink"] is True
    assert (facts["driver_version"], facts["cuda_version"]) == driver
    assert facts["changed"] is False


def test_a_current_drivers_matrix_underlined_header_and_nic_legend(run_playbook):
    """R580's `topo -m` underlines its header with terminal escapes even into a pipe, adds a GPU
    NUMA ID column and names NICs NIC0.. with a legend: every GPU is still found with its
    affinity, and the NICs carry their device names."""
    raw = (FIXTURES / "nvidia-smi" / "hgx-h100" / "topo.txt").read_text()
    assert raw.startswith("\t\x1b[4mGPU0") and "NIC Legend" in raw  # the fixture is that format
    facts = gpu_facts(run_playbook, str(FIXTURES / "nvidia-smi" / "hgx-h100"))
    assert sorted(facts["topology"]) == [f"GPU{i}" for i in range(8)] + [
        f"mlx5_{i}" for i in range(8)
    ]
    assert facts["topology"]["GPU0"]["mlx5_0"] == "PXB"  # its own NIC behind the same switch
    assert facts["topology"]["GPU0"]["mlx5_4"] == "SYS"  # the other socket's
    assert facts["topology"]["GPU0"]["GPU7"] == "NV18"
    gpu5 = facts["gpus"][5]
    assert (gpu5["cpu_affinity"], gpu5["numa_affinity"]) == ("56-111,168-223", "1")


def test_per_gpu_details_and_affinity(run_playbook):
    facts = gpu_facts(run_playbook, str(FIXTURES / "nvidia-smi" / "c4140-m"))
    gpu2 = facts["gpus"][2]
    assert gpu2["name"] == "Tesla V100-SXM2-32GB"
    assert gpu2["uuid"].startswith("GPU-")
    assert gpu2["pci_bus_id"] == "00000000:86:00.0"
    assert gpu2["persistence_mode"] is True
    assert (gpu2["cpu_affinity"], gpu2["numa_affinity"]) == ("20-39", "1")
    assert facts["topology"]["GPU0"]["GPU1"] == "NV2"
    assert facts["topology"]["GPU0"]["mlx5_0"] == "NODE"


def test_persistence_mode_off_is_reported(run_playbook):
    facts = gpu_facts(run_playbook, str(FIXTURES / "nvidia-smi" / "c4140-k"))
    assert [g["persistence_mode"] for g in facts["gpus"]] == [True, True, True, False]


def test_node_without_nvidia_smi_has_no_gpu_and_does_not_fail(run_playbook):
    facts = gpu_facts(run_playbook, "unused", binary="/nonexistent/nvidia-smi")
    assert facts["gpu_present"] is False and facts["gpus"] == []
    assert facts["pcie_layout"] == "none"
    assert "not found" in facts["message"]


def test_node_whose_driver_is_not_loaded_has_no_gpu_and_does_not_fail(run_playbook):
    facts = gpu_facts(run_playbook, "nodriver")
    assert facts["gpu_present"] is False
    assert "couldn't communicate with the NVIDIA driver" in facts["message"]


def test_an_nvidia_smi_that_hangs_is_ended_and_named(run_playbook, tmp_path):
    hung = tmp_path / "nvidia-smi"
    hung.write_text("#!/bin/sh\nexec sleep 600\n")  # as it does when a GPU has fallen off the bus
    hung.chmod(0o755)
    t0 = time.monotonic()
    facts = gpu_facts(run_playbook, "unused", binary=str(hung), timeout=2)
    assert time.monotonic() - t0 < 60
    assert facts["gpu_present"] is False and facts["gpus"] == []
    assert "did not answer within 2 s" in facts["message"], facts["message"]


def test_gpus_whose_topology_nvidia_smi_leaves_empty_are_still_reported(run_playbook, tmp_path):
    # The query lists the GPUs, but `topo -m` exits 0 and prints no matrix: still facts, no crash.
    fixture = tmp_path / "no-topology"
    shutil.copytree(FIXTURES / "nvidia-smi" / "c4140-m", fixture)
    (fixture / "topo.txt").write_text("")
    facts = gpu_facts(run_playbook, str(fixture))
    assert facts["gpu_present"] and len(facts["gpus"]) == 4
    assert facts["pcie_layout"] == "unknown", facts["pcie_layout"]  # not "none": GPUs are there
    assert "printed no matrix" in facts["pcie_layout_description"]


def fake_pci(root: Path, devices: dict[str, tuple[str, str]]) -> str:
    for address, (vendor, pci_class) in devices.items():
        (root / address).mkdir(parents=True)
        (root / address / "vendor").write_text(vendor + "\n")
        (root / address / "class").write_text(pci_class + "\n")
    return str(root)


def test_gpus_without_a_driver_are_seen_on_the_pci_bus(run_playbook, tmp_path):
    # A C4140 before its driver is installed: four V100s (3D controller, class 0x0302), plus
    # an NVIDIA audio function, a Mellanox HCA and a Matrox VGA, none of which may count.
    root = fake_pci(
        tmp_path / "pci",
        {
            "0000:1a:00.0": ("0x10de", "0x030200"),
            "0000:1c:00.0": ("0x10de", "0x030200"),
            "0000:1d:00.0": ("0x10de", "0x030200"),
            "0000:1e:00.0": ("0x10de", "0x030200"),
            "0000:1e:00.1": ("0x10de", "0x040300"),  # an NVIDIA HD-audio function
            "0000:3b:00.0": ("0x15b3", "0x020700"),  # ConnectX-5 (InfiniBand)
            "0000:03:00.0": ("0x102b", "0x030000"),  # Matrox G200 (iDRAC's VGA)
        },
    )
    facts = gpu_facts(run_playbook, "unused", binary="/nonexistent/nvidia-smi", sysfs_pci_root=root)
    assert facts["gpu_present"] is False
    assert facts["pci_devices"] == ["0000:1a:00.0", "0000:1c:00.0", "0000:1d:00.0", "0000:1e:00.0"]


def test_a_host_without_nvidia_devices_lists_none(run_playbook, tmp_path):
    root = fake_pci(tmp_path / "pci", {"0000:00:01.0": ("0x8086", "0x060000")})
    facts = gpu_facts(run_playbook, "unused", binary="/nonexistent/nvidia-smi", sysfs_pci_root=root)
    assert facts["pci_devices"] == []


CUDA13_TORCH = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]  # torch 2.11 +cu130


@pytest.mark.parametrize(
    ("capability", "archs", "runs"),
    [
        ((7, 0), CUDA13_TORCH, False),  # V100: CUDA 13 dropped Volta
        ((7, 0), ["sm_70", "sm_75", "sm_80"], True),
        ((8, 0), CUDA13_TORCH, True),  # A100
        ((8, 9), ["sm_80", "sm_86"], True),  # L40S runs sm_86 code (same major, later minor)
        ((8, 6), ["sm_89"], False),  # not an earlier minor's GPU
        ((9, 0), ["sm_70", "sm_80"], False),  # H100 on mxnet-cu112's targets, no PTX
        ((9, 0), ["sm_70", "sm_80", "compute_80"], True),  # ... with PTX the driver compiles
        ((7, 5), ["compute_80"], False),  # PTX never runs on an earlier GPU
        ((9, 0), ["sm_90a"], True),
        ((10, 0), ["sm_90a"], False),  # architecture-specific code: that GPU only
        ((10, 3), ["sm_100f"], True),  # family code: the family's later GPUs
        ((9, 0), [], False),
    ],
)
def test_which_cuda_builds_run_on_which_gpus(capability, archs, runs):
    from dlperf_module_utils.dlperf_gpu import cuda_build_runs

    assert cuda_build_runs(capability, archs) is runs


def test_the_gpu_build_of_mxnet_refuses_gpus_it_has_no_code_for():
    from dlperf.train.mxnet import no_gpu_code

    assert no_gpu_code("mxnet-cu112", (7, 0)) is None  # V100, the reference's
    assert no_gpu_code("mxnet-cu112", (8, 9)) is None  # L40S: sm_86 code
    refusal = no_gpu_code("mxnet-cu112", (9, 0))  # H100, H200
    assert refusal.startswith("mxnet-cu112 1.9.1 has GPU code for sm_50 sm_60 sm_70 sm_80 sm_86")
    assert "compute capability 9.0" in refusal and "--backend pytorch" in refusal
    assert no_gpu_code("mxnet", (9, 0)) is None  # the CPU build: no GPU code to judge


@pytest.mark.parametrize(
    ("capabilities", "local_rank", "expected"),
    [
        ([(7, 0)] * 4, 5, "gpu(1)"),  # a V100 node: the local rank's GPU
        ([(7, 0)], 3, "gpu(0)"),  # one GPU bound to each rank by the batch system
        ([(9, 0)] * 4, 0, "has GPU code for sm_50"),  # an H100 node: refused before any kernel
    ],
    ids=["v100", "bound", "h100"],
)
def test_mxnet_ranks_train_and_reduce_on_their_gpu_or_are_refused(
    monkeypatch, capabilities, local_rank, expected
):
    """The one choice of context behind the engine and `dlperf allreduce --backend mxnet`; the
    GPUs MXNet would see stood in for (this build is MXNet's CPU one)."""
    import dlperf.train.mxnet as mxnet_engine
    import mxnet as mx
    from dlperf.usage import UsageError

    monkeypatch.setattr(mx.context, "num_gpus", lambda: len(capabilities))
    monkeypatch.setattr(mxnet_engine, "cuda_capabilities", lambda: capabilities)
    monkeypatch.setattr(mxnet_engine, "installed_dist", lambda: "mxnet-cu112")
    try:
        chosen = str(mxnet_engine.device_context("auto", local_rank))
    except UsageError as exc:
        chosen = str(exc)
    assert expected in chosen, chosen
    assert str(mxnet_engine.device_context("cpu", local_rank)) == "cpu(0)"


def stand_in(tmp_path: Path, script: str) -> str:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + script)
    smi.chmod(0o755)
    return str(smi)


def test_a_sick_gpus_answers_and_nvidia_smis_warnings_are_read(run_playbook, tmp_path):
    # A corrupted infoROM adds a warning line to the CSV; a GPU that needs a reset reports no
    # memory size. The four GPUs are still facts, the warning is passed on.
    fixture = tmp_path / "sick"
    shutil.copytree(FIXTURES / "nvidia-smi" / "c4140-m", fixture)
    rows = (fixture / "query.csv").read_text().splitlines()
    rows[1] = rows[1].replace(", 32510,", ", [GPU requires reset],")
    warning = "WARNING: infoROM is corrupted at gpu 0000:3B:00.0"
    (fixture / "query.csv").write_text("\n".join([warning, *rows]) + "\n")
    facts = gpu_facts(run_playbook, str(fixture))
    assert facts["gpu_present"] and len(facts["gpus"]) == 4
    assert [g["memory_total_mib"] for g in facts["gpus"]] == [32510, None, 32510, 32510]
    assert facts["warnings"] == [f"nvidia-smi: {warning}"]


def test_a_driver_that_finds_no_gpu_is_loaded_without_gpus(run_playbook, tmp_path):
    smi = stand_in(tmp_path, 'echo "No devices were found"\nexit 6\n')
    facts = gpu_facts(run_playbook, "unused", binary=smi)
    assert facts["gpu_present"] is False and facts["driver_loaded"] is True
    assert "No devices were found" in facts["message"]


def test_gpus_whose_topology_call_fails_keep_their_facts(run_playbook, tmp_path):
    fixture = FIXTURES / "nvidia-smi" / "c4140-m"
    smi = stand_in(
        tmp_path,
        f'[ "$*" = "topo -m" ] && {{ echo "Unable to determine the topology" >&2; exit 15; }}\n'
        f'NVSMI_FIXTURE={fixture} exec {FAKE_SMI} "$@"\n',
    )
    facts = gpu_facts(run_playbook, "unused", binary=smi)
    assert facts["gpu_present"] and len(facts["gpus"]) == 4
    assert facts["cuda_version"] == "11.0" and facts["pcie_layout"] == "unknown"
    assert facts["warnings"] == [
        "nvidia-smi topo -m failed (rc=15): Unable to determine the topology: no topology"
    ]


def test_a_query_row_of_another_shape_fails_naming_it(run_playbook, tmp_path):
    smi = stand_in(tmp_path, 'echo "0, Tesla V100, GPU-1, 32510"\n')
    task = {"name": "Run gpu_facts", "dlperf.cluster.gpu_facts": {"nvidia_smi": smi}}
    plays = [{"name": "facts", "hosts": "localhost", "gather_facts": False, "tasks": [task]}]
    run = run_playbook(plays, INVENTORY, check=True)
    [(_name, message)] = run.failed_tasks()
    assert message.startswith("nvidia-smi's GPU query could not be read: unexpected nvidia-smi")
    assert "'0, Tesla V100, GPU-1, 32510'" in message
