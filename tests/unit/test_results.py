"""result.json is written atomically: a reader sees the old file or the new one, never a part."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from dlperf.report.data import Point
from dlperf.report.html import provenance_rows
from dlperf.results import (
    SCHEMA_VERSION,
    Result,
    _gpu_layout,
    launch_environment,
    provenance,
    read_result,
    source_revision,
    write_atomic,
    write_result,
)


def test_result_round_trips_with_its_schema_version(tmp_path):
    path = tmp_path / "result.json"
    write_result(
        path,
        Result(status="ok", mode="throughput", world_size=2, nodes=1, throughput_img_per_s=9.5),
    )
    data = read_result(path)
    assert data["schema_version"] == SCHEMA_VERSION and data["throughput_img_per_s"] == 9.5


def test_failed_write_keeps_the_previous_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "result.json"
    write_atomic(path, {"status": "ok"})
    with pytest.raises(TypeError):
        write_atomic(path, {"status": object()})  # not JSON-serialisable mid-write
    assert json.loads(path.read_text()) == {"status": "ok"}
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]


def test_result_of_another_schema_is_refused(tmp_path):
    path = tmp_path / "result.json"
    write_atomic(path, {"schema_version": 99})
    with pytest.raises(ValueError, match="schema_version 99"):
        read_result(path)


def test_a_version_1_result_still_loads_as_an_mxnet_result(tmp_path):
    path = tmp_path / "result.json"
    write_atomic(
        path,
        {
            "schema_version": 1,
            "status": "ok",
            "mode": "throughput",
            "world_size": 4,
            "nodes": 1,
            "hyperparameters": {"backend": "mxnet", "dtype": "float16"},
        },
    )
    data = read_result(path)
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert (data["backend"], data["precision"], data["world_size"]) == ("mxnet", "float16", 4)


def test_provenance_records_the_pcie_layout_gpu_facts_sees(monkeypatch):
    # The stand-in nvidia-smi serves a C4140 configuration M's real outputs.
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    monkeypatch.setenv("PATH", f"{fixtures / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("NVSMI_FIXTURE", str(fixtures / "nvidia-smi" / "c4140-m"))
    prov = provenance(["node1"], {"framework": "mxnet"})
    assert prov["pcie_layout"] == "direct_both_cpus" and prov["nvlink"] is True
    assert prov["framework"] == "mxnet" and prov["hosts"] == ["node1"]
    monkeypatch.setenv("NVSMI_FIXTURE", "nodriver")  # a node whose driver is down
    assert provenance(["node1"])["pcie_layout"] is None


def test_gpus_nvml_counts_without_a_topology_matrix_are_an_unknown_layout(monkeypatch, tmp_path):
    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    silent = tmp_path / "no-topology"
    shutil.copytree(fixtures / "nvidia-smi" / "c4140-m", silent)
    (silent / "topo.txt").write_text("")  # `topo -m` exits 0 and prints nothing
    monkeypatch.setenv("PATH", f"{fixtures / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("NVSMI_FIXTURE", str(silent))
    assert _gpu_layout(gpu_count=4)["pcie_layout"] == "unknown"
    assert _gpu_layout(gpu_count=0)["pcie_layout"] == "none"  # NVML saw none either


def test_provenance_keeps_the_launch_environment_and_the_source_revision():
    env = {"NCCL_IB_HCA": "mlx5_0", "HOROVOD_FUSION_THRESHOLD": "0", "HOME": "/root", "PS1": "$"}
    assert launch_environment(env) == {"HOROVOD_FUSION_THRESHOLD": "0", "NCCL_IB_HCA": "mlx5_0"}
    revision = source_revision()  # this checkout
    assert len(revision["git_commit"]) == 40 and isinstance(revision["git_dirty"], bool)


def test_the_provenance_table_names_the_input_and_the_loss_scaler():
    result = {
        "status": "ok",
        "backend": "pytorch",
        "loss_scaling": {"scale": 512.0, "skipped_steps": 7},
        "provenance": {"hosts": ["gpu01"], "loader": "dali 2.4.0", "dlperf": "0.1.0"},
    }
    row = provenance_rows([Point(1, result), Point(2, {"status": "failed"})])
    assert row.count("<tr>") == 1  # a failed point has no provenance row
    assert "<td>pytorch</td><td>dali 2.4.0</td><td>7 steps skipped, scale 512</td>" in row
