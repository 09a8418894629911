"""Hardware a host lacks is skipped with a message, or fails when the inventory requires it.

Real roles on localhost in check mode, reading a host without an IPoIB device or an NVIDIA GPU:
an empty tree in sysfs' layout and an nvidia-smi that is not there, pointed at through the
roles' internal variables, so that the tests hold on a machine that has either.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pytest

from ..conftest import run_ansible_playbook
from .test_role_input_validation import LOCAL, apply_role, case_plays, inventory


def messages(run) -> list[str]:
    return [str(res.get("msg", "")) for _, _, res in run.task_results()]


def bare_sysfs(root: Path) -> Path:
    """A sysfs with an empty PCI bus, no network interface and no module loaded."""
    for sub in ("bus/pci/devices", "class/net", "module"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    return root


def no_ipoib(tmp_path: Path) -> dict:
    return {"__ipoib_sysfs": str(bare_sysfs(tmp_path / "sys"))}


def no_gpu(tmp_path: Path) -> dict:
    return {
        "__cuda_sysfs": str(bare_sysfs(tmp_path / "sys")),
        "__cuda_nvidia_smi": str(tmp_path / "no-driver" / "nvidia-smi"),
    }


def test_ipoib_without_device_skips_with_a_message_and_changes_nothing(run_playbook, tmp_path):
    run = run_playbook(apply_role("ipoib"), inventory(), no_ipoib(tmp_path))
    assert run.rc == 0, run.failed_tasks()
    skips = [m for m in messages(run) if m.startswith("SKIP:")]
    assert len(skips) == 1 and "no IPoIB interface ib0" in skips[0], skips
    assert run.stats["localhost"]["changed"] == 0


def test_ipoib_required_without_device_fails_naming_the_setting(run_playbook, tmp_path):
    run = run_playbook(
        apply_role("ipoib"), inventory(), {"ipoib_required": True, **no_ipoib(tmp_path)}
    )
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert "ipoib_required is true" in message and "no such device" in message, message
    assert run.stats["localhost"]["changed"] == 0


def test_cuda_without_gpu_installs_no_driver_and_says_why(run_playbook, tmp_path):
    parts_off = {f"cuda_install_{p}": False for p in ("runtime", "toolkit", "cudnn", "nccl")}
    settings = {"cuda_source": "debian", **parts_off, **no_gpu(tmp_path)}
    run = run_playbook(apply_role("cuda"), inventory(), settings)
    assert run.rc == 0, run.failed_tasks()
    notes = [m for m in messages(run) if m.startswith("NO GPU:")]
    assert len(notes) == 1 and "no driver is installed" in notes[0], messages(run)
    ran = [name for name, _, res in run.task_results() if not res.get("skipped")]
    assert (
        "cuda : Install the NVIDIA driver, its persistence daemon and the kernel's headers"
        not in ran
    ), ran
    assert "cuda : Decide about the driver" in ran


def test_cuda_without_gpu_gets_no_part_and_no_package_source_by_default(run_playbook, tmp_path):
    # The reference's settings (NVIDIA's repository, every part): none of it on a GPU-less host.
    run = run_playbook(apply_role("cuda"), inventory(), no_gpu(tmp_path))
    assert run.rc == 0, run.failed_tasks()
    [note] = [m for m in messages(run) if m.startswith("NO GPU:")]
    assert "none without a GPU (cuda_install_without_gpu: false)" in note, note
    ran = [name for name, _, res in run.task_results() if not res.get("skipped")]
    for task in ("Fetch the repository's signing key", "Add the package source (nvidia)"):
        assert f"cuda : {task}" not in ran, ran
    assert not any(name.startswith("cuda : Install the CUDA parts") for name in ran), ran
    assert run.stats["localhost"]["changed"] == 0


def test_cuda_required_without_gpu_fails_naming_the_setting(run_playbook, tmp_path):
    run = run_playbook(apply_role("cuda"), inventory(), {"cuda_required": True, **no_gpu(tmp_path)})
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert "cuda_required is true" in message and "0x10de" in message, message
    assert run.stats["localhost"]["changed"] == 0


def test_cuda_counts_the_gpus_on_the_bus_it_is_pointed_at(run_playbook, tmp_path):
    """The seam the tests above rely on: a V100 in the tree is seen, and the driver wanted."""
    settings = no_gpu(tmp_path)
    device = Path(settings["__cuda_sysfs"]) / "bus/pci/devices/0000:3b:00.0"
    device.mkdir()
    (device / "vendor").write_text("0x10de\n")
    (device / "class").write_text("0x030200\n")
    run = run_playbook(apply_role("cuda"), inventory(), {"cuda_required": True, **settings})
    [decided] = [
        res["ansible_facts"]
        for task, _, res in run.task_results()
        if task == "cuda : Decide about the driver"
    ]
    assert int(decided["__cuda_gpu_count"]) == 1, decided
    assert decided["__cuda_driver_wanted"] is True, decided
    assert not [m for m in messages(run) if m.startswith("NO GPU:")]


def test_dl_stack_node_without_the_wheelhouse_fails_before_any_change(run_playbook):
    # localhost is a compute node; the build host (head01) is not in this play, and the
    # wheelhouse's file system (the head's export) is not mounted here.
    inv = inventory()
    inv["all"]["children"]["cluster"]["children"]["head"]["hosts"] = {"head01": {}}
    inv["all"]["children"]["compute"]["hosts"] = {"localhost": dict(LOCAL)}
    extra = {"dl_stack_wheelhouse": "/nonexistent/wheelhouse"}
    run = run_playbook(apply_role("dl_stack"), inv, extra, check=False)
    assert run.rc != 0
    [(name, message)] = run.failed_tasks()
    assert name.split(" : ", 1)[-1].startswith("Check "), name
    assert "dl_stack_wheelhouse '/nonexistent/wheelhouse'" in message, message
    assert "mounted" in message
    assert run.stats["localhost"]["changed"] == 0
    # a check run (site.yml --check on a new cluster, before storage.yml has mounted anything)
    # says so and checks nothing more on this node
    run = run_playbook(apply_role("dl_stack"), inv, extra)
    assert run.rc == 0, run.failed_tasks()
    said = [r.get("msg", "") for t, _, r in run.task_results() if t.endswith("cannot look at yet")]
    assert said == [
        "CHECK MODE: /nonexistent is not on localhost yet (a real run of playbooks/storage.yml "
        "mounts the head node's export there); the DL stack this node installs from "
        "dl_stack_wheelhouse is not checked."
    ]
    assert not [t for t, _, _ in run.task_results() if "Install" in t or "GPUs on the PCI" in t]


EXTRAS = {
    # case: (variables, the extras dlperf is installed with)
    "gpu-pytorch": ({"dl_stack_flavor": "gpu"}, "train,gpu,pytorch,dali"),
    "gpu-pytorch-without-dali": (
        {"dl_stack_flavor": "gpu", "dl_stack_dali": False},
        "train,gpu,pytorch",
    ),
    "cpu-pytorch": ({"dl_stack_flavor": "cpu"}, "train,cpu,pytorch"),
    # MXNet's own NCCL wheel only where torch's newer one is not there (both write the same file)
    "gpu-mxnet-only": (
        {"dl_stack_flavor": "gpu", "dl_stack_backends": ["mxnet"]},
        "train,gpu,nccl",
    ),
}


def test_dl_stack_gives_pytorch_gpu_nodes_dali_unless_told_not_to(tmp_path):
    # localhost is a compute node that sees the wheelhouse's directory; the flavor is forced,
    # as an inventory may. Each case is a play; what the role does after choosing does not
    # matter here (check mode, rescued).
    inv = inventory()
    inv["all"]["children"]["cluster"]["children"]["head"]["hosts"] = {"head01": {}}
    inv["all"]["children"]["compute"]["hosts"] = {"localhost": dict(LOCAL)}
    base = {"dl_stack_backends": ["mxnet", "pytorch"], "dl_stack_wheelhouse": str(tmp_path / "wh")}
    cases = [(name, base | variables) for name, (variables, _) in EXTRAS.items()]
    run = run_ansible_playbook(tmp_path, case_plays("dl_stack", cases), inv)
    for name, (_, expected) in EXTRAS.items():
        chosen = [
            res["ansible_facts"]["__dl_stack_extras"]
            for task, _, res in run.play(name).task_results()
            if task == "dl_stack : Choose dlperf's extras for this node"
        ]
        assert chosen == [expected], (name, chosen)
    # the wheelhouse also holds what the GPU flavor's Horovod build venv installs
    [wheelhouse] = [
        res["ansible_facts"]["__dl_stack_extras_all"]
        for task, _, res in run.play("gpu-pytorch").task_results()
        if task == "dl_stack : Work out who builds what"
    ]
    assert wheelhouse == ["train,gpu,nccl", "train,gpu,pytorch,dali"]


def _dl_stack_torch_check(run_playbook, flavor: str, seen: dict, stderr: str = ""):
    """The dl_stack role's own PyTorch check (its task, read from the role), fed what the venv's
    torch would answer on a node: there is no GPU here to ask."""
    import json
    from pathlib import Path

    import yaml

    tasks = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "roles/dl_stack/tasks/install.yml").read_text()
    )
    [check] = [t for t in tasks if str(t.get("name", "")).startswith("Check that PyTorch imports")]
    plays = [
        {
            "name": "dl_stack's PyTorch check",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "__dl_stack_flavor": flavor,
                "dl_stack_torch": {"rc": 0, "stdout_lines": [json.dumps(seen)], "stderr": stderr},
            },
            "tasks": [check],
        }
    ]
    return run_playbook(plays, {"all": {"hosts": {"localhost": LOCAL}}}, {}, check=False)


def test_dl_stack_refuses_a_torch_build_without_code_for_the_nodes_gpu(run_playbook):
    v100 = {"gpus": 4, "gpu": "Tesla V100-SXM2-32GB", "capability": [7, 0]}
    cuda13 = {"torch": "2.13.0+cu130", "cuda_build": "13.0", "archs": ["sm_75", "sm_80", "sm_90"]}
    run = _dl_stack_torch_check(run_playbook, "gpu", {**cuda13, **v100, "runs": False})
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert message.startswith("PyTorch on localhost is 2.13.0+cu130 (CUDA 13.0), built for ")
    assert "sm_75 sm_80 sm_90, which has no code for this node's Tesla V100-SXM2-32GB" in message
    assert "(compute capability 7.0): put a torch 2.13.0 built for a CUDA release" in message
    assert message.endswith("in dl_stack_pip_find_links"), message
    # the same node with a build that has code for it passes; so does a CPU node
    cuda12 = {"torch": "2.13.0+cu126", "cuda_build": "12.6", "archs": ["sm_70", "sm_80"]}
    assert _dl_stack_torch_check(run_playbook, "gpu", {**cuda12, **v100, "runs": True}).rc == 0
    cpu = {"torch": "2.13.0+cpu", "cuda_build": None, "archs": [], "gpus": 0, "runs": None}
    assert _dl_stack_torch_check(run_playbook, "cpu", cpu).rc == 0
    # and a GPU node whose torch sees no GPU still says so, with torch's own word where it has one
    run = _dl_stack_torch_check(run_playbook, "gpu", cpu)
    assert run.failed_tasks()[0][1].endswith(
        "sees no GPU on a GPU node: a CPU-only wheel in the wheelhouse, no NVIDIA driver loaded, "
        "or one older than the build's CUDA needs"
    )
    old_driver = "UserWarning: CUDA initialization: The NVIDIA driver on your system is too old"
    run = _dl_stack_torch_check(run_playbook, "gpu", {**cuda13, "gpus": 0}, stderr=old_driver)
    assert run.failed_tasks()[0][1].endswith(f"CUDA needs; torch said: {old_driver}")


def _dl_stack_mxnet_gpu_check(run_playbook, flavor: str, backends: list, seen: dict):
    """The dl_stack role's check of MXNet on a GPU node (its three tasks, read from the role), fed
    what the venv's Horovod and MXNet would answer there."""
    import json
    from pathlib import Path

    import yaml

    tasks = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "roles/dl_stack/tasks/install.yml").read_text()
    )
    names = (
        "Read Horovod's answer",
        "Check that MXNet sees this GPU node's GPUs",
        "Say which GPUs the MXNet engine",
    )
    chosen = [t for t in tasks if str(t.get("name", "")).startswith(names)]
    assert len(chosen) == 3
    built = {"mxnet": True, "mpi": True, "gloo": True, "nccl": True, "cuda": True, **seen}
    answer = json.dumps(built, sort_keys=True)
    plays = [
        {
            "name": "dl_stack's MXNet GPU check",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "__dl_stack_flavor": flavor,
                "dl_stack_backends": backends,
                "dl_stack_check_build": {"rc": 0, "stdout": answer, "stdout_lines": [answer]},
            },
            "tasks": chosen,
        }
    ]
    return run_playbook(plays, {"all": {"hosts": {"localhost": LOCAL}}}, {}, check=False)


def test_dl_stack_fails_a_gpu_node_where_no_engine_can_use_the_gpus(run_playbook):
    from dlperf.train.mxnet import no_gpu_code

    h200 = no_gpu_code("mxnet-cu112", (9, 0))
    # MXNet on V100s: fine
    ok = _dl_stack_mxnet_gpu_check(run_playbook, "gpu", ["mxnet"], {"gpus": 4, "no_gpu_code": []})
    assert ok.rc == 0
    # no GPU seen through the driver
    run = _dl_stack_mxnet_gpu_check(run_playbook, "gpu", ["mxnet"], {"gpus": 0, "no_gpu_code": []})
    [(_name, message)] = run.failed_tasks()
    assert message == (
        "MXNet on localhost sees no GPU (no NVIDIA driver loaded, or one too old for CUDA 11)"
    )
    # H200s with MXNet alone: nothing could train there
    hopper = {"gpus": 1, "no_gpu_code": [h200]}
    run = _dl_stack_mxnet_gpu_check(run_playbook, "gpu", ["mxnet"], hopper)
    [(_name, message)] = run.failed_tasks()
    assert message == f"{h200} (add pytorch to dl_stack_backends)"
    # ... with PyTorch beside it: the node is fine, and the run says what MXNet cannot do there
    run = _dl_stack_mxnet_gpu_check(run_playbook, "gpu", ["mxnet", "pytorch"], hopper)
    assert run.rc == 0
    said = [
        res.get("msg")
        for task, _, res in run.task_results()
        if task.endswith("Say which GPUs the MXNet engine cannot run on")
    ]
    assert said == [h200]
    # a CPU node is not asked
    cpu = _dl_stack_mxnet_gpu_check(run_playbook, "cpu", ["mxnet"], {"gpus": 0, "no_gpu_code": []})
    assert cpu.rc == 0


def test_dl_stack_check_run_before_the_wheels_exist_says_so_instead_of_failing(run_playbook):
    """After a version change a check run has built and copied nothing: the node's install is
    not checked further (a message says why); a real run without the wheels still fails."""
    from pathlib import Path

    import yaml

    tasks = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "roles/dl_stack/tasks/install.yml").read_text()
    )
    names = ("Say what a check run cannot install from yet", "End the check of this node's venv",
             "Check that the wheelhouse has them")  # fmt: skip
    chosen = [t for t in tasks if t.get("name") in names]
    assert len(chosen) == 3
    after = {"name": "Install the venv", "ansible.builtin.debug": {"msg": "installing"}}
    old_wheels = [{"path": "/w/dlperf-0.0.9-py3-none-any.whl"}, {"path": "/w/horovod-cpu/x"}]
    plays = [{
        "name": "dl_stack's wheel check", "hosts": "localhost", "gather_facts": False,
        "vars": {"dl_stack_wheels": {"files": old_wheels}, "dl_stack_wheelhouse": "/w",
                 "__dl_stack_dlperf_version": "0.1.0", "__dl_stack_horovod_version": "0.28.1",
                 "__dl_stack_flavor": "cpu", "dl_stack_build_host": "head01"},
        "tasks": [*chosen, after],
    }]  # fmt: skip
    inventory = {"all": {"hosts": {"localhost": LOCAL}}}
    check = run_playbook(plays, inventory, {}, check=True)
    assert check.rc == 0, check.failed_tasks()
    said = [res.get("msg", "") for task, _, res in check.task_results()
            if task == "Say what a check run cannot install from yet"]  # fmt: skip
    assert said and said[0].startswith("CHECK MODE: the wheelhouse /w has no dlperf 0.1.0"), said
    assert "installing" not in [res.get("msg") for _, _, res in check.task_results()]
    real = run_playbook(plays, inventory, {}, check=False)
    [(name, message)] = real.failed_tasks()
    assert name == "Check that the wheelhouse has them" and "lacks the dlperf 0.1.0" in message


def test_dl_stack_keeps_a_package_index_url_off_every_command_line(run_playbook):
    """An index URL with credentials reaches pip through its environment; the arguments a run
    shows and the download stamp hold only its hash."""
    from pathlib import Path

    url = "https://builder:s3cret@pypi.example.org/simple"
    vars_file = Path(__file__).resolve().parents[2] / "roles/dl_stack/vars/main.yml"
    plays = [{
        "name": "dl_stack's pip sources", "hosts": "localhost", "gather_facts": False,
        "vars": {"dl_stack_pip_index_url": url, "dl_stack_pip_no_index": False,
                 "dl_stack_pip_find_links": ["/srv/wheels"]},
        "tasks": [
            {"name": "Load the role's vars", "ansible.builtin.include_vars": str(vars_file)},
            {"name": "Show them", "ansible.builtin.debug": {
                "msg": "{{ {'sources': __dl_stack_pip_sources, 'env': __dl_stack_pip_env,"
                       " 'key': __dl_stack_pip_key} }}"}},
        ],
    }]  # fmt: skip
    run = run_playbook(plays, {"all": {"hosts": {"localhost": LOCAL}}}, {}, check=False)
    assert run.rc == 0, run.failed_tasks()
    [shown] = [res["msg"] for task, _, res in run.task_results() if task == "Show them"]
    assert shown["sources"] == ["--find-links=/srv/wheels"]
    assert shown["env"] == {"PIP_INDEX_URL": url}
    assert "s3cret" not in str(shown["key"]) and shown["key"][-1].startswith("index-sha256:")


def _kernel_serves_nfs() -> bool:
    listed = Path("/proc/filesystems").read_text().split()
    module = f"/lib/modules/{platform.release()}/kernel/fs/nfsd"
    return "nfsd" in listed or os.path.exists(module)


def test_nfs_server_required_without_kernel_support_fails_before_installing(run_playbook):
    if _kernel_serves_nfs():
        pytest.skip("this machine's kernel serves NFS: nothing to refuse")
    run = run_playbook(apply_role("nfs_server"), inventory(), {"nfs_server_required": True})
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert "nfs_server_required is true" in message and "nothing was exported" in message
    ran = [name for name, _, res in run.task_results() if not res.get("skipped")]
    assert "nfs_server : Install the NFS server" not in ran, ran
    assert run.stats["localhost"]["changed"] == 0
