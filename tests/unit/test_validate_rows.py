"""validate.yml's cross-node rows judged by Ansible itself on given probe outputs: the row's own
expressions, read from the playbook, evaluated on this machine."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .test_role_input_validation import LOCAL

PLAYBOOK = Path(__file__).resolve().parents[2] / "playbooks" / "validate.yml"


def tasks(node):
    """Every task of the playbook, blocks opened."""
    for item in node if isinstance(node, list) else [node]:
        if isinstance(item, dict):
            yield item
            for key in ("tasks", "block", "rescue", "always"):
                yield from tasks(item.get(key, []))


def evaluate(run_playbook, variables: dict, shown, inventory: dict | None = None):
    """SHOWN (templates) as Ansible renders them on this machine with VARIABLES."""
    play = {
        "name": "Evaluate",
        "hosts": "localhost",
        "gather_facts": False,
        "vars": variables,
        "tasks": [{"name": "Judge", "ansible.builtin.debug": {"msg": shown}}],
    }
    run = run_playbook([play], inventory or {"all": {"hosts": {"localhost": LOCAL}}})
    assert run.rc == 0, run.failed_tasks()
    [msg] = [res["msg"] for name, _, res in run.task_results() if name == "Judge"]
    return msg


def row_of(playbook: Path, task: str, fact: str, check: str) -> tuple[dict, dict]:
    """The variables of PLAYBOOK's TASK and its FACT row of CHECK."""
    [rows] = [t for t in tasks(yaml.safe_load(playbook.read_text())) if t.get("name") == task]
    [row] = [r for r in rows["ansible.builtin.set_fact"][fact] if r["check"] == check]
    return rows["vars"], row


def mpi_hello_status(run_playbook, computes: list[str], printed: list[str], rc: int = 0) -> str:
    own, row = row_of(PLAYBOOK, "Work out the cross-node rows", "cross_rows", "MPI hello")
    variables = {"computes": computes, "mpi_hello": {"rc": rc, "stdout_lines": printed}}
    return evaluate(run_playbook, variables | {"hello": own["hello"]}, row["status"])


@pytest.mark.parametrize(
    ("printed", "rc", "status"),
    [
        (["c4140-02", "c4140-01"], 0, "pass"),
        # kernel host names that are not the inventory's (FQDNs, another naming): two nodes
        # answered all the same
        (["c4140-01.cluster.example", "c4140-02.cluster.example"], 0, "pass"),
        (["node17", "node18"], 0, "pass"),
        # one node twice: the other was never reached
        (["c4140-01", "c4140-01"], 0, "fail"),
        (["c4140-01"], 0, "fail"),
        (["c4140-01", "c4140-02"], 1, "fail"),
    ],
)
def test_mpi_hello_passes_when_every_node_answered_whatever_its_kernel_calls_itself(
    run_playbook, printed, rc, status
):
    assert mpi_hello_status(run_playbook, ["c4140-01", "c4140-02"], printed, rc) == status


def slurm_idle_status(run_playbook, computes: list[str], sinfo: list[str]) -> str:
    playbook = PLAYBOOK.parent / "validate_slurm.yml"
    own, row = row_of(playbook, "Work out the Slurm rows", "slurm_rows", "Slurm nodes idle")
    variables = {"slurm_nodes": {"rc": 0, "stdout_lines": sinfo}}
    variables |= {"states": own["states"], "busy": own["busy"]}
    # the compute group as the inventory has it (the play itself runs here)
    compute = {"hosts": {name: None for name in computes}}
    inventory = {"all": {"hosts": {"localhost": LOCAL}, "children": {"compute": compute}}}
    return evaluate(run_playbook, variables, row["status"], inventory).strip()


@pytest.mark.parametrize(
    ("sinfo", "status"),
    [
        (["c1 idle", "c2 idle"], "pass"),
        # both nodes in a second partition too (slurm_extra_config): listed twice, still two
        (["c1 idle", "c2 idle", "c1 idle", "c2 idle"], "pass"),
        (["c1 idle", "c2 drain"], "fail"),
        (["c1 idle"], "fail"),
    ],
)
def test_slurm_nodes_idle_counts_each_node_once(run_playbook, sinfo, status):
    assert slurm_idle_status(run_playbook, ["c1", "c2"], sinfo) == status


def slurm_gpus_row(run_playbook, gpus: int, rc: int, out: list[str], err: str = "") -> dict:
    playbook = PLAYBOOK.parent / "validate_slurm.yml"
    own, row = row_of(playbook, "Work out the Slurm rows", "slurm_rows", "Slurm GPUs")
    variables = {"computes": ["c4140-01", "c4140-02"], "gpus": gpus,
                 "slurm_gpus": {"rc": rc, "stdout_lines": out, "stderr": err},
                 "gpu_lines": own["gpu_lines"], "gpus_seen": own["gpus_seen"]}  # fmt: skip
    shown = evaluate(run_playbook, variables, {"status": row["status"], "detail": row["detail"]})
    return {k: v.strip() for k, v in shown.items()}


V100 = "Tesla V100-SXM2-32GB (UUID: GPU-{})"


def listed(per_node: list[int]) -> list[str]:
    """srun --label's lines of nvidia-smi -L, PER_NODE GPUs on each task's node."""
    return [f"{t}: GPU {i}: " + V100.format(f"{t}{i}") for t, n in enumerate(per_node)
            for i in range(n)]  # fmt: skip


def test_slurm_gpus_row_passes_when_every_node_got_every_gpu(run_playbook):
    row = slurm_gpus_row(run_playbook, 4, 0, listed([4, 4]))
    assert row["status"] == "pass", row
    assert row["detail"] == "srun --gres=gpu:4: GPUs per node 4,4 (Tesla V100-SXM2-32GB)"


@pytest.mark.parametrize(
    ("rc", "out", "err", "says"),
    [
        (0, listed([4, 3]), "", "GPUs per node 4,3"),  # one node's job saw three
        (0, listed([4]), "", "GPUs per node 4,0"),
        # nodes whose Gres Slurm does not know (no gres.conf, no GPUs counted)
        (1, [], "srun: error: Unable to allocate resources: Requested node configuration is "
         "not available", "rc 1: srun: error: Unable to allocate resources"),
    ],
)  # fmt: skip
def test_slurm_gpus_row_fails_a_node_short_of_gpus_or_a_refused_step(run_playbook, rc, out, err,
                                                                      says):  # fmt: skip
    row = slurm_gpus_row(run_playbook, 4, rc, out, err)
    assert row["status"] == "fail" and says in row["detail"], row


def test_slurm_gpus_row_is_skipped_where_no_gpus_are_expected(run_playbook):
    row = slurm_gpus_row(run_playbook, 0, 0, [])
    assert row == {"status": "skip", "detail": "no GPUs expected (dlperf_gpus_per_node=0)"}
