"""`--check` on a host a role has not set up yet: a service the check did not install is not
there to restart, and a check run must not ask for it. Real roles on localhost in check mode,
with the hardware they look for standing in as a tree in sysfs' layout. (The ofed role's
soft-RoCE start has the same guard, for a unit file the check did not write; this machine has
no /proc/modules for that role's module loading to run against.)"""

from __future__ import annotations

from .test_ofed_detect import ran
from .test_role_input_validation import apply_role, inventory


def test_opensm_checked_where_it_is_not_installed_restarts_nothing(run_playbook, tmp_path):
    # An HCA with ib_umad loaded, opensm not installed (not on this machine either): the check
    # would install it and write its settings, which notify the restart of a service that the
    # check did not install.
    mad = tmp_path / "sys" / "class" / "infiniband_mad"
    mad.mkdir(parents=True)
    (mad / "abi_version").write_text("5\n")
    settings = {"opensm_enabled": True, "__opensm_sysfs": str(tmp_path / "sys")}
    run = run_playbook(apply_role("opensm"), inventory(), settings)
    assert run.rc == 0, run.failed_tasks()
    assert "Install opensm" in ran(run) and "Choose the ports" in ran(run)
    assert not {"Stop opensm for its new settings", "Start opensm with its new settings"} & set(
        ran(run)
    ), ran(run)
