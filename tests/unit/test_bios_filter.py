"""dlperf_bios_diff: the declared BIOS attributes a BMC does not report as set (the bmc role
writes exactly those, waits for them after the reboot, and validate.yml fails on them)."""

from __future__ import annotations

import pytest

from .test_hostlist_filter import render

CURRENT = {"SysProfile": "PerfOptimized", "LogicalProc": "Enabled", "ProcCores": 8, "Sriov": True}


@pytest.mark.parametrize(
    ("declared", "differ"),
    [
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
    ],
)
def test_only_what_differs_or_is_missing_is_returned(run_playbook, declared, differ):
    rc, msg = render(
        run_playbook, f"{{{{ {declared!r} | dlperf.cluster.dlperf_bios_diff({CURRENT!r}) }}}}", {}
    )
    assert rc == 0, msg
    assert msg == differ


def test_a_list_is_refused_with_what_was_expected(run_playbook):
    rc, msg = render(run_playbook, "{{ ['SysProfile'] | dlperf.cluster.dlperf_bios_diff({}) }}", {})
    assert rc != 0
    assert "the declared attributes must be a mapping of attribute names to values" in str(msg)
