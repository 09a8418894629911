"""The cuda role's driver verification: a driver that needs a reboot is said so, or rebooted.

Real ansible-playbook runs (check mode) of the role's verify.yml on this host, against the
stand-in nvidia-smi that serves outputs captured on real nodes, and a sysfs module directory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_gpu_facts import FAKE_SMI, FIXTURES
from .test_role_gating import messages
from .test_role_input_validation import LOCAL

INVENTORY = {"all": {"hosts": {"localhost": LOCAL}}}


def verify(run_playbook, sysfs: Path, fixture: str, **settings):
    plays = [
        {
            "name": "Verify the driver",
            "hosts": "localhost",
            "gather_facts": False,
            "environment": {"NVSMI_FIXTURE": str(FIXTURES / "nvidia-smi" / fixture)
                            if fixture != "nodriver" else "nodriver"},
            "tasks": [
                {
                    "name": "Verify",
                    "ansible.builtin.include_role": {"name": "cuda", "tasks_from": "verify.yml"},
                }
            ],
        }
    ]  # fmt: skip
    extra = {
        "__cuda_gpu_count": 4,
        "__cuda_nvidia_smi": FAKE_SMI,
        "__cuda_sysfs": str(sysfs),
        **settings,
    }
    return run_playbook(plays, INVENTORY, extra)


@pytest.fixture
def sysfs(tmp_path):
    (tmp_path / "sys" / "module").mkdir(parents=True)
    return tmp_path / "sys"


def failure(run) -> str:
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    return message


def test_no_driver_loaded_stops_with_reboot_needed(run_playbook, sysfs):
    message = failure(verify(run_playbook, sysfs, "nodriver"))
    assert message.startswith("REBOOT NEEDED on localhost: no NVIDIA driver is loaded"), message
    assert "couldn't communicate with the NVIDIA driver" in message
    assert "R580 driver is installed and nouveau blacklisted" in message
    assert "cuda_reboot: true" in message


def test_a_module_that_would_not_load_is_quoted_beside_reboot_needed(run_playbook, sysfs):
    # Secure Boot refusing the unsigned module: a reboot alone will not help, so modprobe's
    # own words go with the message.
    refused = "modprobe: ERROR: could not insert 'nvidia': Key was rejected by service"
    message = failure(verify(run_playbook, sysfs, "nodriver", cuda_modprobe={"msg": refused}))
    assert message.startswith("REBOOT NEEDED on localhost: no NVIDIA driver is loaded"), message
    assert f"modprobe nvidia said: {refused}" in message
    assert "Secure Boot refusing an unsigned one, is not cured by a reboot" in message


def test_nouveau_holding_the_gpus_is_named(run_playbook, sysfs):
    (sysfs / "module" / "nouveau").mkdir()
    message = failure(verify(run_playbook, sysfs, "nodriver"))
    assert message.startswith("REBOOT NEEDED on localhost: nouveau is loaded"), message


def test_an_older_driver_still_running_needs_the_reboot(run_playbook, sysfs):
    # the C4140-M capture runs 450.80.02; R580 was just installed
    message = failure(verify(run_playbook, sysfs, "c4140-m"))
    assert "the running driver is 450.80.02, not the installed R580" in message, message


def test_the_driver_that_was_asked_for_passes(run_playbook, sysfs):
    table = {"11.0": {"driver_min": "450.80.02", "nvidia": {}}}
    run = verify(run_playbook, sysfs, "c4140-m", cuda_driver_branch="450", cuda_version="11.0",
                 cuda_versions=table)  # fmt: skip
    assert run.rc == 0, run.failed_tasks()
    assert not [m for m in messages(run) if "REBOOT" in m]


def test_too_few_gpus_fail_even_with_the_right_driver(run_playbook, sysfs):
    table = {"11.0": {"driver_min": "450.80.02", "nvidia": {}}}
    run = verify(run_playbook, sysfs, "c4140-m", cuda_driver_branch="450", cuda_version="11.0",
                 cuda_versions=table, __cuda_gpu_count=8)  # fmt: skip
    message = failure(run)
    assert "sees 4 of 8 GPUs with driver 450.80.02" in message, message


# "true" as `-e cuda_reboot=true` (and `make reproduce EXTRA_VARS=cuda_reboot=true`) gives it: a
# string, which ansible-core's conditionals refuse unless the role makes it a boolean
@pytest.mark.parametrize("reboot", [True, "true"])
def test_with_cuda_reboot_the_role_reboots_instead_of_stopping(run_playbook, sysfs, reboot):
    run = verify(run_playbook, sysfs, "nodriver", cuda_reboot=reboot, cuda_reboot_throttle=2)
    # the reboot module itself refuses to reboot the machine running the playbook: proof that
    # the role went to reboot (with its templated throttle) rather than stop with REBOOT NEEDED
    [(name, message)] = run.failed_tasks()
    assert name.endswith("Reboot to load the driver"), name
    assert "would reboot the control node" in message, message
    assert not [m for m in messages(run) if m.startswith("REBOOT NEEDED")]


def empty_apt(root: Path) -> str:
    """An apt configuration with no package source and nothing installed: apt's answers do not
    depend on this machine's sources or packages (a node the role already set up has them)."""
    for sub in ("sources.list.d", "lists/partial", "cache/archives/partial"):
        (root / sub).mkdir(parents=True)
    (root / "status").write_text("")
    conf = root / "apt.conf"
    conf.write_text(
        f'Dir::Etc::sourcelist "/dev/null";\nDir::Etc::sourceparts "{root}/sources.list.d";\n'
        f'Dir::State::lists "{root}/lists/";\nDir::State::status "{root}/status";\n'
        f'Dir::Cache "{root}/cache/";\n'
    )
    return str(conf)


def install_driver(run_playbook, tmp_path: Path, **settings):
    """The role's driver.yml on this host in check mode, as on a node with a GPU, its apt
    without sources."""
    plays = [
        {
            "name": "Install the driver",
            "hosts": "localhost",
            "environment": {"APT_CONFIG": empty_apt(tmp_path / "apt")},
            "tasks": [
                {
                    "name": "Install",
                    "ansible.builtin.include_role": {"name": "cuda", "tasks_from": "driver.yml"},
                }
            ],
        }
    ]
    extra = {
        "__cuda_sysfs": str(tmp_path / "sys"),
        "__cuda_nouveau_blacklist": str(tmp_path / "blacklist-nouveau.conf"),
        "cuda_repo_result": {"changed": False},
        **settings,
    }
    return run_playbook(plays, INVENTORY, extra)


def test_the_driver_is_held_to_its_branch_before_it_is_installed(run_playbook, tmp_path):
    # apt without sources: its own answer names the first package the role asks for, the
    # branch's pinning package, before the driver itself
    run = install_driver(run_playbook, tmp_path, cuda_source="nvidia", cuda_driver_branch="580")
    [(name, message)] = run.failed_tasks()
    assert name.endswith("Hold the driver's packages to branch 580"), name
    assert "nvidia-driver-pinning-580" in message, message


def test_debians_driver_needs_no_hold_and_brings_the_kernels_headers(run_playbook, tmp_path):
    # Debian's 535 is pinned by its own version patterns; headers of the running kernel and,
    # through its flavour's meta package, of the kernels later upgrades install
    run = install_driver(
        run_playbook, tmp_path, cuda_source="debian", cuda_version="11.8",
        __cuda_kernel="6.1.0-28-cloud-amd64",
    )  # fmt: skip
    [(name, message)] = run.failed_tasks()
    assert "No package matching 'nvidia-driver'" in message, message  # apt without sources
    assert name.endswith(
        "Install the NVIDIA driver, its persistence daemon and the kernel's headers"
    )
    [result] = [r for n, _, r in run.task_results() if n == name]
    asked = result["invocation"]["module_args"]["name"]
    assert asked[-2:] == ["linux-headers-6.1.0-28-cloud-amd64", "linux-headers-cloud-amd64"]
    assert asked[:3] == [
        "nvidia-driver=535.*",
        "nvidia-kernel-dkms=535.*",
        "nvidia-persistenced=535.*",
    ]
    skipped = [n for n, _, r in run.task_results() if r.get("skipped")]
    assert any(n.endswith("Hold the driver's packages to branch 535") for n in skipped), skipped
