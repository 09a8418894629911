"""`dlperf allreduce`'s bus bandwidth, as nccl-tests defines it for an allreduce."""

from __future__ import annotations

import pytest
from dlperf.allreduce import bus_factor


@pytest.mark.parametrize(
    ("ranks", "factor"), [(1, 0.0), (2, 1.0), (3, 4 / 3), (4, 1.5), (32, 1.9375)]
)
def test_bus_bandwidth_is_algbw_times_two_n_minus_one_over_n(ranks, factor):
    # One rank's "reduction" is a local copy: no link carries it, so no bus bandwidth.
    assert bus_factor(ranks) == pytest.approx(factor)


def test_a_nan_anywhere_makes_the_reduction_wrong():
    # A corrupted float32 reads as NaN about once in 256 values; max() passes a NaN over when
    # it is not first, which would hide the finite errors beside it too.
    import math

    import numpy as np
    from dlperf.allreduce import worst_error

    assert worst_error([0.0, 0.0]) == 0.0
    assert worst_error([0.0, 2.5, 1.0]) == 2.5
    assert worst_error([0.0, float("nan"), 3.0]) == math.inf
    assert worst_error(np.array([1.0, np.nan])) == math.inf
    assert worst_error([float("-inf")]) == math.inf


def _task_named(node, name: str):
    """The task NAME anywhere in a playbook's plays, blocks and rescues."""
    if isinstance(node, dict):
        if node.get("name") == name and "block" not in node and "tasks" not in node:
            return node
        node = [v for k, v in node.items() if k in ("tasks", "block", "rescue", "always")]
    if isinstance(node, list):
        for child in node:
            if (found := _task_named(child, name)) is not None:
                return found
    return None


def test_validate_names_a_wrong_allreduce_wrong(run_playbook, tmp_path):
    """validate.yml's allreduce row after `dlperf allreduce` wrote its summary of a wrong sum and
    exited 1: the summary is read all the same and the failed row says WRONG; a right sum
    (exit 0) passes and says correct; a crash before any summary leaves the launcher's words."""
    import json
    from pathlib import Path

    import yaml

    playbook = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "playbooks/validate.yml").read_text()
    )
    names = ("Read the allreduce summary", "Work out the cross-node rows")
    tasks = [_task_named(playbook, n) for n in names]
    assert None not in tasks

    def row(rc: int, summary: dict | None) -> dict:
        scratch = tmp_path / f"scratch-{rc}-{summary is None}"
        scratch.mkdir()
        if summary is not None:
            (scratch / "allreduce.json").write_text(json.dumps(summary))
        skipped = {"skipped": True, "changed": False}
        facts = {
            "scratch": str(scratch),
            "allreduce": {"rc": rc, "stdout": "", "stderr": "a rank died"},
            "allreduce_check": "Horovod allreduce", "allreduce_ranks": 2,
            "computes": ["c1", "c2"], "iface": "ib0", "peer": "c2", "token": "t",
            "nfs_read": {"content": "dA=="},
            "rdma_server": skipped, "rdma_client": skipped, "validate_rdma_device": "",
            "mpi_hello": {"rc": 0, "stdout_lines": ["c1", "c2"]},
        }  # fmt: skip
        plays = [{"name": "rows", "hosts": "localhost", "gather_facts": False, "vars": facts,
                  "tasks": [*tasks, {"ansible.builtin.debug": {"var": "cross_rows"}}]}]  # fmt: skip
        inventory = {"all": {"hosts": {"localhost": {
            "ansible_connection": "local",
            "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}}}  # fmt: skip
        run = run_playbook(plays, inventory, {}, check=False)
        assert run.rc == 0, run.failed_tasks()
        [rows] = [res["cross_rows"] for _, _, res in run.task_results() if "cross_rows" in res]
        [ar] = [r for r in rows if r["check"] == "Horovod allreduce"]
        return ar

    def summary(correct: bool) -> dict:
        return {"world_size": 2, "hosts": ["c1", "c2"], "bytes": 4e6, "busbw_MBps": 900.0,
                "transport": "gloo", "device": "cpu", "correct": correct,
                "max_abs_error": 0.0 if correct else None}  # fmt: skip

    wrong = row(1, summary(False))
    assert wrong["status"] == "fail"
    assert wrong["detail"].startswith("2 ranks on c1,c2, 4.0 MB WRONG, busbw 900.0 MB/s")
    right = row(0, summary(True))
    assert right["status"] == "pass"
    assert right["detail"].startswith("2 ranks on c1,c2, 4.0 MB correct, busbw 900.0 MB/s")
    crashed = row(1, None)
    assert crashed["status"] == "fail" and crashed["detail"] == "horovodrun rc 1: a rank died"
