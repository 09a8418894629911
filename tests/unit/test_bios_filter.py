"""dlperf_bios_diff: the declared BIOS attributes a BMC does not report as set (the bmc role
writes exactly those, waits for them after the reboot, and validate.yml fails on them)."""

from __future__ import annotations

from .test_hostlist_filter import LOCAL, render

CURRENT = {"SysProfile": "PerfOptimized", "LogicalProc": "Enabled", "ProcCores": 8, "Sriov": True}

CASES = [
    ({}, {}),
    ({"SysProfile": "PerfOptimized", "LogicalProc": "Enabled"}, {}),
    ({"SysProfile": "PerfOptimized", "LogicalProc": "Disabled"}, {"LogicalProc": "Disabled"}),
    ({"NodeInterleave": "Disabled"}, {"NodeInterleave": "Disabled"}),  # the BMC lacks it
    ({"ProcCores": "8"}, {}),  # a number and its text are the same value
    ({"ProcCores": 8.0}, {}),
    ({"ProcCores": "08x"}, {"ProcCores": "08x"}),
    ({"LogicalProc": "enabled"}, {"LogicalProc": "enabled"}),  # enumerations: case counts
    ({"Sriov": "True"}, {"Sriov": "True"}),  # a boolean is not its text
    ({"Sriov": 1}, {"Sriov": 1}),
]


def test_only_what_differs_or_is_missing_is_returned(run_playbook):
    # Every case in one play (an ansible-playbook run per case would cost seconds each).
    tasks = [
        {
            "name": f"case {i}",
            "ansible.builtin.debug": {
                "msg": f"{{{{ {declared!r} | dlperf.cluster.dlperf_bios_diff({CURRENT!r}) }}}}"
            },
        }
        for i, (declared, _) in enumerate(CASES)
    ]
    plays = [{"name": "Render", "hosts": "localhost", "gather_facts": False, "tasks": tasks}]
    run = run_playbook(plays, {"all": {"hosts": {"localhost": LOCAL}}}, check=False)
    assert run.rc == 0, run.failed_tasks()
    got = {name: result["msg"] for name, _, result in run.task_results()}
    assert got == {f"case {i}": differ for i, (_, differ) in enumerate(CASES)}


def test_a_list_is_refused_with_what_was_expected(run_playbook):
    rc, msg = render(run_playbook, "{{ ['SysProfile'] | dlperf.cluster.dlperf_bios_diff({}) }}", {})
    assert rc != 0
    assert "the declared attributes must be a mapping of attribute names to values" in str(msg)
