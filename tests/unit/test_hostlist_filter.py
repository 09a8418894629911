"""The one host-list builder: inventory hosts -> horovodrun/mpirun `host:slots` lists."""

from __future__ import annotations

LOCAL = {
    "ansible_connection": "local",
    "ansible_python_interpreter": "{{ ansible_playbook_python }}",
}


def render(run_playbook, expression: str, hosts: dict) -> tuple[int, str]:
    inventory = {"all": {"hosts": {"localhost": LOCAL}, "children": {"compute": {"hosts": hosts}}}}
    plays = [
        {
            "name": "Render",
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [
                {"name": "Render the host list", "ansible.builtin.debug": {"msg": expression}}
            ],
        }
    ]
    run = run_playbook(plays, inventory, check=False)
    ((_, _, result),) = run.task_results()
    return run.rc, result.get("msg", "")


def test_slots_come_from_the_host_variable(run_playbook):
    hosts = {"c4140-01": {"gpus_per_node": 4}, "c4140-02": {"gpus_per_node": 4}, "c4140-03": {}}
    rc, msg = render(
        run_playbook,
        "{{ groups['compute']"
        " | dlperf.cluster.dlperf_hostlist(hostvars, slots_var='gpus_per_node') }}",
        hosts,
    )
    assert rc == 0
    assert msg == "c4140-01:4,c4140-02:4,c4140-03:1"


def test_launch_addresses_and_a_subset_of_nodes(run_playbook):
    hosts = {"n1": {"cluster_ip": "198.18.0.101"}, "n2": {"cluster_ip": "198.18.0.102"}}
    rc, msg = render(
        run_playbook,
        "{{ groups['compute'][:1]"
        " | dlperf.cluster.dlperf_hostlist(hostvars, default_slots=2, address_var='cluster_ip') }}",
        hosts,
    )
    assert rc == 0 and msg == "198.18.0.101:2"


def test_bad_slot_count_names_the_host_and_variable(run_playbook):
    rc, msg = render(
        run_playbook,
        "{{ groups['compute']"
        " | dlperf.cluster.dlperf_hostlist(hostvars, slots_var='gpus_per_node') }}",
        {"n1": {"gpus_per_node": "four"}},
    )
    assert rc != 0
    assert "n1: gpus_per_node='four'" in msg


def test_a_name_that_is_no_inventory_host_is_named(run_playbook):
    rc, msg = render(
        run_playbook,
        "{{ ['n1', 'c4140-99'] | dlperf.cluster.dlperf_hostlist(hostvars) }}",
        {"n1": {}},
    )
    assert rc != 0
    assert "dlperf_hostlist: 'c4140-99' is not an inventory host" in msg, msg
