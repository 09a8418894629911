"""The slurm role's wait for the compute nodes to register, judged on sinfo's `%N %t` lines:
the condition of its task, evaluated by Ansible itself on each node state sinfo can print."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .test_validate_rows import evaluate

TASKS = Path(__file__).resolve().parents[2] / "roles" / "slurm" / "tasks" / "slurm.yml"
WAIT = "Wait until the compute nodes have registered with the controller"


def registered(run_playbook, states: list[str]) -> bool:
    [task] = [t for t in yaml.safe_load(TASKS.read_text()) if t.get("name") == WAIT]
    lines = [f"c{i} {state}" for i, state in enumerate(states)]
    variables = {"__names": [f"c{i}" for i in range(len(states))],
                 "__slurm_sinfo": {"rc": 0, "stdout_lines": lines}}  # fmt: skip
    return evaluate(run_playbook, variables, "{{ " + task["until"] + " }}") is True


@pytest.mark.parametrize(
    ("state", "answers"),
    [
        ("idle", True), ("mix", True), ("alloc", True), ("drain", True), ("drng", True),
        ("resv", True), ("maint", True),
        # set down or failing by an admin (scontrol update state=down), but answering
        ("down", True), ("fail", True), ("failg", True), ("idle-", True),
        # not answering, powered off or powering up or down, or not registered yet
        ("down*", False), ("idle*", False), ("idle~", False), ("idle#", False), ("unk", False),
        ("unk*", False),
    ],
)  # fmt: skip
def test_a_node_that_answers_has_registered_whatever_its_state(run_playbook, state, answers):
    assert registered(run_playbook, ["idle", state]) is answers
