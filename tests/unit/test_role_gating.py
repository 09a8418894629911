"""Hardware a host lacks is skipped with a message, or fails when the inventory requires it.

Real roles on localhost in check mode: this machine has no IPoIB device and no NVIDIA GPU.
"""

from __future__ import annotations

from .test_role_input_validation import apply_role, inventory


def messages(run) -> list[str]:
    return [str(res.get("msg", "")) for _, _, res in run.task_results()]


def test_ipoib_without_device_skips_with_a_message_and_changes_nothing(run_playbook):
    run = run_playbook(apply_role("ipoib"), inventory(), {})
    assert run.rc == 0, run.failed_tasks()
    skips = [m for m in messages(run) if m.startswith("SKIP:")]
    assert len(skips) == 1 and "no IPoIB interface ib0" in skips[0], skips
    assert run.stats["localhost"]["changed"] == 0


def test_ipoib_required_without_device_fails_naming_the_setting(run_playbook):
    run = run_playbook(apply_role("ipoib"), inventory(), {"ipoib_required": True})
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert "ipoib_required is true" in message and "no such device" in message, message
    assert run.stats["localhost"]["changed"] == 0
