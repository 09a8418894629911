"""Bad role input fails before any change, with a message that names the variable.

Each case applies a real role to localhost in check mode (so a validation bug can never
touch the test machine) and proves three things: the role fails, the failing task is a
validation step (argument_specs or the role's validate.yml), and no task before it would
have changed anything.

The cases of one role run as the plays of one ansible-playbook process (one process per case
spent most of the unit tier's time starting Ansible): each play includes the role with the
case's variables in a block whose rescue lets the next play run, and each case is judged on
its own play's tasks. A role's cases go to one xdist worker (xdist_group), which runs them once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ..conftest import run_ansible_playbook
from .bad_input_cases import CASES, GOOD_EXPORT

REPO = Path(__file__).resolve().parents[2]

LOCAL = {
    "ansible_connection": "local",
    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
}


def inventory(cluster_ip="198.18.0.10"):
    host = dict(LOCAL, cluster_ip=cluster_ip) if cluster_ip else dict(LOCAL)
    return {
        "all": {
            "vars": {"cluster_subnets": ["198.18.0.0/24"]},
            "children": {
                "cluster": {"children": {"head": {"hosts": {"localhost": host}}}},
                "compute": {"hosts": {}},
            },
        }
    }


def apply_role(role: str) -> list:
    return [
        {
            "name": f"Apply {role} with bad input",
            "hosts": "localhost",
            "gather_facts": True,
            "gather_subset": ["min"],
            "roles": [{"role": role}],
        }
    ]


def is_validation_task(name: str) -> bool:
    name = name.split(" : ", 1)[-1]  # drop the "role : " prefix
    return name.startswith(("Validating arguments against arg spec", "Check ", "Refuse "))


def case_plays(role: str, cases: list[tuple[str, dict]]) -> list:
    """Facts once, then one play per (case id, variables): the role included with them."""
    plays = [{"name": "Facts", "hosts": "localhost", "gather_subset": ["min"], "tasks": []}]
    for case_id, variables in cases:
        block = [
            {
                "name": f"Apply {role}",
                "ansible.builtin.include_role": {"name": role},
                "vars": variables,
            }
        ]
        rescue = [{"name": "Go on to the next case", "ansible.builtin.meta": "noop"}]
        plays.append(
            {
                "name": case_id,
                "hosts": "localhost",
                "gather_facts": False,
                "tasks": [{"name": case_id, "block": block, "rescue": rescue}],
            }
        )
    return plays


@pytest.fixture(scope="session")
def role_cases(tmp_path_factory):
    """ROLE -> its cases' run, each role's cases run once (by the first test that asks)."""
    runs: dict = {}

    def run(role: str):
        if role not in runs:
            cases = [(c[0], c[2]) for c in CASES if c[1] == role]
            wrong = [(name, bad) for r, name, _, bad in wrong_types() if r == role]
            cases += [(f"{name}-wrong-type", {name: bad}) for name, bad in wrong]
            workdir = tmp_path_factory.mktemp(f"validate-{role}")
            runs[role] = run_ansible_playbook(workdir, case_plays(role, cases), inventory())
        return runs[role]

    return run


def judge(run, case_id: str, needle: str) -> None:
    """One case's play: exactly one failed task, a validation step whose message has NEEDLE,
    and no change before it."""
    play = run.play(case_id)
    failed = play.failed_tasks()
    assert len(failed) == 1, failed or f"{case_id}: the role accepted bad input"
    name, message = failed[0]
    assert is_validation_task(name), f"failed in a non-validation task: {name}"
    assert needle in message, message
    assert play.changed() == 0


@pytest.mark.parametrize(
    ("role", "case_id", "needle"),
    [pytest.param(c[1], c[0], c[3], id=c[0], marks=pytest.mark.xdist_group(c[1])) for c in CASES],
)
def test_bad_input_fails_before_any_change_naming_the_variable(role_cases, role, case_id, needle):
    judge(role_cases(role), case_id, needle)


def test_missing_cluster_address_is_named(run_playbook):
    run = run_playbook(apply_role("common"), inventory(cluster_ip=None), {})
    assert run.rc != 0
    ((name, message),) = run.failed_tasks()
    assert is_validation_task(name)
    assert "'cluster_ip'" in message and "localhost" in message


def test_opt_ins_let_world_and_other_networks_and_no_root_squash_through_validation(run_playbook):
    extra = {
        "nfs_server_exports": [
            dict(GOOD_EXPORT, clients=["*"], options=["rw", "no_root_squash"]),
            dict(GOOD_EXPORT, path="/srv/nfs/other", clients=["203.0.113.0/24"]),
        ],
        "nfs_server_allow_world_exports": True,
        "nfs_server_allow_other_networks": True,
        "nfs_server_allow_no_root_squash": True,
    }
    plays = apply_role("nfs_server")
    plays[0]["roles"] = []
    plays[0]["tasks"] = [
        {
            "name": "Run only the validation",
            "ansible.builtin.include_role": {"name": "nfs_server", "tasks_from": "validate"},
        }
    ]
    run = run_playbook(plays, inventory(), extra)
    assert run.rc == 0, run.failed_tasks()


# A value of the wrong type for every option of every role's meta/argument_specs.yml: argument
# validation, or for text options each role's first check (Ansible's validation turns a list or
# a mapping into text and lets the variable through unchanged), must refuse it, naming the
# variable, before the role does anything.
WRONG = {
    "bool": "maybe",
    "int": "many",
    "list": {"not": "a list"},
    "dict": "not a dict",
    "str": {"a": "mapping"},
    "path": ["a", "list"],
}


def wrong_types():
    """(role, option, its kind, a value of another kind) for every typed option of every role."""
    for spec in sorted((REPO / "roles").glob("*/meta/argument_specs.yml")):
        role = spec.parent.parent.name
        options = yaml.safe_load(spec.read_text())["argument_specs"]["main"]["options"]
        for name, option in options.items():
            kind = option.get("type", "str")
            if "choices" in option:
                yield role, name, "choice", ["not-a-choice"] if kind == "list" else "not-a-choice"
            elif kind in WRONG:
                yield role, name, kind, WRONG[kind]


@pytest.mark.parametrize(
    ("role", "name"),
    [
        pytest.param(role, name, id=f"{name}-{kind}", marks=pytest.mark.xdist_group(role))
        for role, name, kind, _ in wrong_types()
    ],
)
def test_a_wrong_type_for_any_typed_option_is_refused_naming_it(role_cases, role, name):
    judge(role_cases(role), f"{name}-wrong-type", name)


def test_there_are_at_least_eighty_bad_input_cases():
    assert len(CASES) + len(list(wrong_types())) >= 80
