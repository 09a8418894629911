"""The isilon role spreads compute nodes over Isilon node addresses evenly and stably.

Runs the role's own variables through a real ansible-playbook over an 8-node inventory.
"""

from __future__ import annotations

import random
from collections import Counter

LOCAL = {
    "ansible_connection": "local",
    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
}
IPS = ["198.18.0.201", "198.18.0.202", "198.18.0.203", "198.18.0.204"]


def endpoints(run_playbook, hosts: list[str], ips: list[str]) -> dict[str, str]:
    plays = [
        {
            "name": "Resolve each node's Isilon endpoint",
            "hosts": "compute",
            "gather_facts": False,
            "tasks": [
                {
                    "name": "Load and validate the isilon role's settings",
                    "ansible.builtin.include_role": {
                        "name": "isilon",
                        "tasks_from": "validate",
                        "public": True,
                    },
                },
                {
                    "name": "Report the endpoint",
                    "ansible.builtin.debug": {"msg": "{{ __isilon_endpoint }}"},
                },
            ],
        }
    ]
    inventory = {
        "all": {
            "children": {
                "compute": {
                    "hosts": {h: dict(LOCAL) for h in hosts},
                    "vars": {"isilon_node_ips": ips},
                }
            }
        }
    }
    run = run_playbook(plays, inventory, check=False)
    assert run.rc == 0, run.failed_tasks()
    return {
        host: res["msg"] for name, host, res in run.task_results() if name == "Report the endpoint"
    }


def test_eight_nodes_over_four_addresses_get_two_each(run_playbook):
    hosts = [f"c4140-{i:02d}" for i in range(1, 9)]
    got = endpoints(run_playbook, hosts, IPS)
    assert set(got) == set(hosts)
    assert Counter(got.values()) == dict.fromkeys(IPS, 2)
    assert got["c4140-01"] == IPS[0] and got["c4140-05"] == IPS[0] and got["c4140-04"] == IPS[3]


def test_assignment_does_not_depend_on_inventory_order(run_playbook):
    hosts = [f"c4140-{i:02d}" for i in range(1, 9)]
    shuffled = hosts[:]
    random.Random(7).shuffle(shuffled)
    assert endpoints(run_playbook, shuffled, IPS) == endpoints(run_playbook, hosts, IPS)


def test_more_addresses_than_nodes_uses_each_node_once(run_playbook):
    got = endpoints(run_playbook, ["c4140-01", "c4140-02"], IPS)
    assert got == {"c4140-01": IPS[0], "c4140-02": IPS[1]}
