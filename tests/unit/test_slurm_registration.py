"""The slurm role's wait for the compute nodes to register, judged on sinfo's `%N %t` lines:
the condition of its task, evaluated by Ansible itself on each node state sinfo can print."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from .test_role_input_validation import LOCAL

TASKS = Path(__file__).resolve().parents[2] / "roles" / "slurm" / "tasks" / "slurm.yml"
WAIT = "Wait until the compute nodes have registered with the controller"


def registered(run_playbook, states: list[str]) -> bool:
    [task] = [t for t in yaml.safe_load(TASKS.read_text()) if t.get("name") == WAIT]
    lines = [f"c{i} {state}" for i, state in enumerate(states)]
    play = {
        "name": "Judge sinfo",
        "hosts": "localhost",
        "gather_facts": False,
        "vars": {
            "__names": [f"c{i}" for i in range(len(states))],
            "__slurm_sinfo": {"rc": 0, "stdout_lines": lines},
        },
        "tasks": [
            {"name": "Judge", "ansible.builtin.debug": {"msg": f"{{{{ {task['until']} }}}}"}}
        ],
    }
    run = run_playbook([play], {"all": {"hosts": {"localhost": LOCAL}}})
    assert run.rc == 0, run.failed_tasks()
    [msg] = [res["msg"] for name, _, res in run.task_results() if name == "Judge"]
    return msg is True


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
