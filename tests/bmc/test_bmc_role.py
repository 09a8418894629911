"""The bmc role against real Redfish services (sushy-tools' emulator over HTTPS).

Order matters: check mode first (nothing written), then the run that writes the reference
profile and reboots, then a run that changes nothing; the failure cases after that prove that
nothing is written when the input is wrong.
"""

from __future__ import annotations

import json

import pytest

from tests.bmc.conftest import (
    BIOS,
    DEAD_NODE,
    FAKE_NODE,
    LIBVIRT_NODES,
    OTHER_SYSTEM,
    SHARED_NODE,
)
from tests.bmc.emulator import FAKE_SYSTEM_ID, system_id

PROFILE = {
    "SysProfile": "PerfOptimized",
    "LogicalProc": "Enabled",
    "NodeInterleave": "Disabled",
    "MmioAbove4Gb": "Enabled",
}


def results(run, task_prefix: str) -> dict[str, dict]:
    return {host: res for name, host, res in run.task_results() if task_prefix in name}


def failure(run, host: str) -> str:
    return next(
        res.get("msg", "") for _, h, res in run.task_results() if h == host and res.get("failed")
    )


@pytest.fixture(scope="module")
def check_run(bmcs):
    return bmcs.play("playbooks/bmc.yml", "--check")


@pytest.fixture(scope="module")
def first_run(bmcs, check_run):
    return bmcs.play("playbooks/bmc.yml")


@pytest.fixture(scope="module")
def second_run(bmcs, first_run):
    return bmcs.play("playbooks/bmc.yml")


def test_reference_profile_is_what_the_tests_hold(bmcs):
    # The inventory the emulators are driven with carries inventory/reference's compute profile.
    assert PROFILE.keys() <= BIOS.keys()
    assert {k for k in PROFILE if PROFILE[k] != BIOS[k]} == {"SysProfile", "MmioAbove4Gb"}


def test_check_mode_reports_the_change_and_writes_nothing(bmcs, check_run):
    for node in LIBVIRT_NODES:
        assert check_run.stats[node]["changed"] >= 1, check_run.stats
        assert bmcs.bios(node) == BIOS
    report = results(check_run, "Report the BIOS attributes that differ")
    assert "SysProfile PerfPerWattOptimizedDapc -> PerfOptimized" in report["c4140-01"]["msg"]
    assert "MmioAbove4Gb Disabled -> Enabled" in report["c4140-01"]["msg"]


def test_first_run_writes_the_profile_reboots_and_verifies(bmcs, first_run):
    for node in LIBVIRT_NODES:
        assert first_run.stats[node]["failures"] == 0, first_run.failed_tasks()
        assert bmcs.bios(node) == {**BIOS, **PROFILE}
        log = bmcs.logs[node].read_text()
        assert "PATCH /redfish/v1/Systems/" in log and "/BIOS/Settings" in log
        assert "/Actions/ComputerSystem.Reset" in log  # the reboot that applies it
    written = results(first_run, "Write the attributes that differ")
    assert all(written[n]["changed"] for n in LIBVIRT_NODES)
    rebooted = results(first_run, "Reboot the node through the BMC")
    assert all(rebooted[n]["changed"] for n in LIBVIRT_NODES)
    shown = results(first_run, "Show the system")
    assert "power On" in shown["c4140-02"]["msg"] and "BIOS 1.0.0" in shown["c4140-02"]["msg"]


def test_on_a_bmc_with_several_systems_only_the_one_named_is_touched(bmcs, first_run):
    assert bmcs.bios(SHARED_NODE) == {**BIOS, **PROFILE}
    assert bmcs.bios(SHARED_NODE, OTHER_SYSTEM) == BIOS
    writes = [
        line for line in bmcs.logs[SHARED_NODE].read_text().splitlines()
        if "PATCH /redfish/" in line or "POST /redfish/" in line
    ]  # fmt: skip
    assert any(f"/Systems/{system_id(SHARED_NODE)}/BIOS/Settings" in line for line in writes)
    assert writes and not [line for line in writes if system_id(OTHER_SYSTEM) in line]


def test_a_resource_id_the_bmc_lacks_fails_naming_its_systems(bmcs, second_run):
    run = bmcs.play(
        "playbooks/bmc.yml",
        "--limit",
        SHARED_NODE,
        extra={"bmc_resource_id": "sled-z", "bmc_bios_attributes": {"LogicalProc": "Disabled"}},
    )
    assert run.rc != 0
    message = failure(run, SHARED_NODE)
    assert "bmc_resource_id 'sled-z': the BMC has no such system" in message, message
    assert system_id(SHARED_NODE) in message and system_id(OTHER_SYSTEM) in message
    assert bmcs.bios(SHARED_NODE)["LogicalProc"] == "Enabled"


def test_a_bmc_that_does_not_answer_fails_its_host_only(bmcs, first_run):
    assert first_run.rc != 0
    assert first_run.stats[DEAD_NODE]["failures"] == 1
    message = failure(first_run, DEAD_NODE)
    assert f"BMC 127.0.0.1:{bmcs.ports[DEAD_NODE]} did not answer" in message
    assert all(first_run.stats[n]["failures"] == 0 for n in (*LIBVIRT_NODES, FAKE_NODE))


def test_second_run_changes_nothing(bmcs, second_run):
    for node in (*LIBVIRT_NODES, FAKE_NODE):
        assert second_run.stats[node]["changed"] == 0, second_run.stats
        assert second_run.stats[node]["failures"] == 0
    rebooted = results(second_run, "Reboot the node through the BMC")
    assert all(res.get("skipped") for res in rebooted.values()), rebooted


def test_an_unknown_attribute_fails_before_any_change(bmcs, second_run):
    run = bmcs.play(
        "playbooks/bmc.yml",
        "--limit",
        "c4140-01",
        extra={"bmc_bios_attributes": {"LogicalProc": "Disabled", "NoSuchKnob": "On"}},
    )
    assert run.rc != 0
    assert "has no BIOS attribute NoSuchKnob (bmc_bios_attributes)" in failure(run, "c4140-01")
    assert bmcs.bios("c4140-01")["LogicalProc"] == "Enabled"


def test_a_wrong_password_fails_before_any_change(bmcs, second_run):
    run = bmcs.play(
        "playbooks/bmc.yml",
        "--limit",
        "c4140-01",
        extra={"bmc_password": "wrong", "bmc_bios_attributes": {"LogicalProc": "Disabled"}},
    )
    assert run.rc != 0
    message = failure(run, "c4140-01")
    assert "refused user 'root' (HTTP 401): check bmc_username and bmc_password" in message
    assert "wrong" not in message
    assert bmcs.bios("c4140-01")["LogicalProc"] == "Enabled"


def test_an_untrusted_certificate_is_refused(bmcs, second_run):
    run = bmcs.play("playbooks/bmc.yml", "--limit", "c4140-01", extra={"bmc_ca_path": ""})
    assert "presented a certificate the controller does not trust" in failure(run, "c4140-01")


def test_pxe_once_and_a_restart(bmcs, second_run):
    run = bmcs.play(
        "playbooks/bmc.yml",
        "--limit",
        "c4140-02",
        extra={"bmc_one_time_boot": "pxe", "bmc_power": "restart"},
    )
    assert run.rc == 0, run.failed_tasks()
    boot = bmcs.system("c4140-02")["Boot"]
    assert boot["BootSourceOverrideTarget"] == "Pxe"
    assert boot["BootSourceOverrideEnabled"] in ("Once", "Continuous")
    assert results(run, "Power restart")["c4140-02"]["changed"]


def test_virtual_media_boot_and_power_on(bmcs, second_run):
    assert bmcs.system(FAKE_NODE)["PowerState"] == "Off"
    extra = {
        "bmc_one_time_boot": "virtual_media",
        "bmc_virtual_media_url": bmcs.image_url,
        "bmc_power": "on",
        # the system named, as on a BMC that manages several: virtual media is the system's
        "bmc_resource_id": FAKE_SYSTEM_ID,
    }
    run = bmcs.play("playbooks/bmc.yml", "--limit", FAKE_NODE, extra=extra)
    assert run.rc == 0, run.failed_tasks()
    system = bmcs.system(FAKE_NODE)
    assert system["PowerState"] == "On"
    assert system["Boot"]["BootSourceOverrideTarget"] == "Cd"
    assert "/installer.iso" in bmcs.images.requests  # the BMC fetched the image itself
    again = bmcs.play("playbooks/bmc.yml", "--limit", FAKE_NODE, extra=extra)
    assert results(again, "Power on")[FAKE_NODE]["changed"] is False

    # Another ISO while the first is still in the virtual CD (a reinstall with a new image):
    # community.general's insert finds no free slot; the old one is ejected first.
    (bmcs.workdir / "www" / "reinstall.iso").write_bytes(b"\0" * 64 * 1024)
    other = dict(extra, bmc_virtual_media_url=bmcs.image_url.replace("installer", "reinstall"))
    swap = bmcs.play("playbooks/bmc.yml", "--limit", FAKE_NODE, extra=other)
    assert swap.rc == 0, swap.failed_tasks()
    assert results(swap, "Eject the ISO the virtual CD holds")[FAKE_NODE]["changed"]
    assert "/reinstall.iso" in bmcs.images.requests
    system = bmcs.system(FAKE_NODE)
    media = bmcs.get(FAKE_NODE, system["VirtualMedia"]["@odata.id"])["Members"]
    images = {bmcs.get(FAKE_NODE, m["@odata.id"]).get("Image") for m in media}
    assert other["bmc_virtual_media_url"] in images and bmcs.image_url not in images


def test_validate_reports_the_bios_profile_each_node_runs(bmcs, second_run):
    report = bmcs.workdir / "validate.json"
    run = bmcs.play(
        "playbooks/validate.yml", "--tags", "bmc", extra={"dlperf_validate_report": str(report)}
    )
    rows = {r["node"]: r for r in json.loads(report.read_text())["rows"]}
    assert rows["c4140-01"]["status"] == "pass"
    assert "SysProfile=PerfOptimized" in rows["c4140-01"]["detail"]
    assert rows[FAKE_NODE]["status"] == "skip"
    assert rows[DEAD_NODE]["status"] == "fail" and "did not answer" in rows[DEAD_NODE]["detail"]
    assert run.rc != 0  # the dead BMC fails the table


def test_check_mode_says_what_power_would_do_and_does_nothing(bmcs, second_run):
    assert bmcs.system("c4140-01")["PowerState"] == "On"
    off = bmcs.play("playbooks/bmc.yml", "--check", "--limit", "c4140-01",
                    extra={"bmc_power": "off"})  # fmt: skip
    said = results(off, "Say what this power command would do, power off")["c4140-01"]
    assert said["changed"] and "is On; power off would change it" in said["msg"]
    on = bmcs.play("playbooks/bmc.yml", "--check", "--limit", "c4140-01",
                   extra={"bmc_power": "on"})  # fmt: skip
    assert (
        results(on, "Say what this power command would do, power on")["c4140-01"]["changed"]
        is False
    )
    assert bmcs.system("c4140-01")["PowerState"] == "On"
