"""result.json is written atomically: a reader sees the old file or the new one, never a part."""

from __future__ import annotations

import json

import pytest
from dlperf.results import SCHEMA_VERSION, Result, read_result, write_atomic, write_result


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
