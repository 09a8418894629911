"""dlperf_table: the aligned text tables playbooks print (validate.yml's pass/fail table)."""

from __future__ import annotations

from .test_hostlist_filter import render

ROWS = (
    "[{'status': 'pass', 'check': 'NFS across nodes', 'node': 'compute01 -> compute02',"
    " 'detail': 'token read back'},"
    " {'status': 'fail', 'check': 'MPI hello', 'node': 'c1, c2', 'detail': 'rc 1:    refused'},"
    " {'status': 'skip', 'check': 'GPUs', 'detail': None}]"
)


def test_columns_are_padded_to_the_widest_cell_and_status_is_upper_cased(run_playbook):
    rc, lines = render(
        run_playbook,
        "{{ "
        + ROWS
        + " | dlperf.cluster.dlperf_table(['status', 'check', 'node', 'detail'],"
        + " upper=['status']) }}",
        {},
    )
    assert rc == 0
    assert lines == [
        "status  check             node                    detail",
        "PASS    NFS across nodes  compute01 -> compute02  token read back",
        "FAIL    MPI hello         c1, c2                  rc 1: refused",
        "SKIP    GPUs              -                       -",
    ]


def test_a_string_is_refused(run_playbook):
    rc, msg = render(run_playbook, "{{ 'not rows' | dlperf.cluster.dlperf_table(['a']) }}", {})
    assert rc != 0
    assert "dlperf_table expects a list of dicts" in str(msg), msg
