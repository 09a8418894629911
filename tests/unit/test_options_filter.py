"""Role options written as the native tools write them work; options of the wrong shape are
refused naming the variable. Real ansible-playbook runs (check mode)."""

from __future__ import annotations

import json

import pytest

from .bad_input_cases import GOOD_EXPORT
from .test_hostlist_filter import render
from .test_role_input_validation import apply_role, inventory, is_validation_task


def test_listify_takes_lists_comma_strings_and_single_values(run_playbook):
    expression = (
        "{{ ['rw,sync, root_squash', ['ro'], 'nodev', none, 4]"
        " | map('dlperf.cluster.dlperf_listify') | list }}"
    )
    rc, msg = render(run_playbook, expression, {})
    assert rc == 0 and msg == [["rw", "sync", "root_squash"], ["ro"], ["nodev"], [], [4]], msg


def test_listify_turns_the_named_fields_of_each_item_into_lists(run_playbook):
    expression = (
        "{{ [{'path': '/a', 'options': 'rw,sync', 'clients': '198.18.0.0/24'}, {'path': '/b'}]"
        " | dlperf.cluster.dlperf_listify(['clients', 'options']) }}"
    )
    rc, msg = render(run_playbook, expression, {})
    assert rc == 0, msg
    assert msg == [
        {"path": "/a", "options": ["rw", "sync"], "clients": ["198.18.0.0/24"]},
        {"path": "/b"},
    ]


@pytest.mark.parametrize(
    "extra",
    [
        # as /etc/exports writes them
        {"nfs_server_exports": [dict(GOOD_EXPORT, options="rw,sync,root_squash,no_subtree_check")]},
        {"nfs_server_exports": [dict(GOOD_EXPORT, clients="198.18.0.0/24")]},
        {"nfs_server_default_options": "rw,sync,root_squash,no_subtree_check"},
        {"nfs_server_default_clients": "198.18.0.0/24"},
    ],
    ids=["export-options", "export-clients", "default-options", "default-clients"],
)
def test_exports_written_as_in_etc_exports_pass(run_playbook, extra):
    run = run_playbook(apply_role("nfs_server"), inventory(), extra)
    assert run.rc == 0, run.failed_tasks()


def test_an_option_inside_a_comma_string_is_still_judged(run_playbook):
    # the comma form goes through the same checks: no_root_squash still needs its opt-in
    extra = {"nfs_server_exports": [dict(GOOD_EXPORT, options="rw,sync,no_root_squash")]}
    run = run_playbook(apply_role("nfs_server"), inventory(), extra)
    [(task, message)] = run.failed_tasks()
    assert is_validation_task(task) and "no_root_squash" in message, (task, message)
    assert run.stats["localhost"]["changed"] == 0


@pytest.mark.parametrize(
    ("role", "name", "value", "needle"),
    [
        (
            "ofed",
            "ofed_memlock_users",
            "dlperf",
            "ofed_memlock_users must be a list, e.g. [dlperf]",
        ),
        (
            "common",
            "common_packages",
            "chrony,rsync",
            "common_packages must be a list, e.g. [chrony, rsync]",
        ),
        ("opensm", "opensm_ports", "ALL", "opensm_ports must be a list, e.g. [ALL]"),
        ("isilon", "isilon_node_ips", "198.18.0.201", "isilon_node_ips must be a list"),
    ],
    ids=lambda v: v if isinstance(v, str) and "_" in v and " " not in v else None,
)
def test_a_list_option_given_as_text_is_refused_naming_it(run_playbook, role, name, value, needle):
    run = run_playbook(apply_role(role), inventory(), {name: value})
    [(task, message)] = run.failed_tasks()
    assert is_validation_task(task), task
    assert needle in message, message
    assert run.stats["localhost"]["changed"] == 0


def test_a_secret_of_the_wrong_shape_is_named_but_never_shown(run_playbook):
    key = ["-----BEGIN OPENSSH PRIVATE KEY-----", "c2VjcmV0LWtleS1tYXRlcmlhbA==", "-----END"]
    run = run_playbook(apply_role("common"), inventory(), {"common_bench_ssh_private_key": key})
    [(task, message)] = run.failed_tasks()
    assert is_validation_task(task), task
    assert "common_bench_ssh_private_key must be a single value (str), not a list." in message
    assert "c2VjcmV0" not in json.dumps(run.output) + run.stderr, message  # anywhere in the run
    assert run.stats["localhost"]["changed"] == 0
