"""dlperf_redfish_system: the bmc role's system out of redfish_info's entries, which cover every
ComputerSystem a BMC manages (redfish_info takes no resource_id)."""

from __future__ import annotations

from .test_hostlist_filter import LOCAL

ONE = [[{"system_uri": "/redfish/v1/Systems/System.Embedded.1"},
        {"Id": "System.Embedded.1", "PowerState": "On"}]]  # fmt: skip
TWO = [
    [{"system_uri": "/redfish/v1/Systems/node-a"}, {"Id": "node-a", "PowerState": "Off"}],
    [{"system_uri": "/redfish/v1/Systems/node-b/"}, {"Id": "node-b", "PowerState": "On"}],
]
# GetBiosAttributes: the data is the attributes alone, so the URI names the system.
BIOS = [
    [{"system_uri": "/redfish/v1/Systems/node-a"}, {"SysProfile": "PerfOptimized"}],
    [{"system_uri": "/redfish/v1/Systems/node-b"}, {"SysProfile": "Custom"}],
]
CASES = {
    "iDRAC's only system": (ONE, "", {"Id": "System.Embedded.1", "PowerState": "On"}),
    "by Id": (TWO, "node-b", {"Id": "node-b", "PowerState": "On"}),
    "BIOS by the URI": (BIOS, "node-a", {"SysProfile": "PerfOptimized"}),
}
REFUSED = {
    "several, none chosen": (
        TWO, "", "the BMC manages 2 systems (node-a, node-b): set bmc_resource_id"
    ),
    "no such Id": (
        TWO,
        "node-c",
        "bmc_resource_id 'node-c': the BMC has no such system (its systems: node-a, node-b)",
    ),
}  # fmt: skip


def test_the_chosen_system_or_an_error_naming_the_systems(run_playbook):
    # Every case in one play: an ansible-playbook run per case would cost seconds each.
    tasks = [
        {
            "name": name,
            "ansible.builtin.debug": {
                "msg": f"{{{{ {entries!r} | dlperf.cluster.dlperf_redfish_system({rid!r}) }}}}"
            },
            "ignore_errors": name in REFUSED,
        }
        for name, (entries, rid, _) in {**CASES, **REFUSED}.items()
    ]
    plays = [{"name": "Render", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    run = run_playbook(plays, {"all": {"hosts": {"localhost": LOCAL}}}, check=False)
    got = {name: result for name, _, result in run.task_results()}
    for name, (_, _, expected) in CASES.items():
        assert got[name].get("msg") == expected, (name, got[name])
    for name, (_, _, message) in REFUSED.items():
        assert got[name].get("failed") and message in str(got[name].get("msg")), (name, got[name])
