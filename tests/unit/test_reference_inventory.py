"""The seed's cluster inventory is whole: 1 head + 8 compute nodes, and site.yml parses on it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))


def ansible(tool: str, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / tool), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**ENV, **env},
        check=False,
    )


def test_reference_inventory_has_one_head_and_eight_compute_nodes():
    proc = ansible("ansible-inventory", "-i", "inventory/reference", "--list")
    assert proc.returncode == 0, proc.stderr
    inv = json.loads(proc.stdout)
    assert inv["head"]["hosts"] == ["head01"]
    assert len(inv["compute"]["hosts"]) == 8
    hostvars = inv["_meta"]["hostvars"]
    addresses = [hostvars[h]["cluster_ip"] for h in inv["head"]["hosts"] + inv["compute"]["hosts"]]
    assert len(set(addresses)) == 9


def test_a_vault_file_added_as_the_inventory_says_keeps_every_other_variable(tmp_path):
    # Ansible reads group_vars/all/ or group_vars/all.yml, not both: the vault file the
    # comments ask for goes beside the cluster's variables, in the same directory.
    import shutil

    inventory = tmp_path / "reference"
    shutil.copytree(REPO / "inventory" / "reference", inventory)
    (inventory / "group_vars" / "all" / "vault.yml").write_text("vault_bmc_password: s3cret\n")
    proc = ansible("ansible-inventory", "-i", str(inventory), "--host", "c4140-01")
    assert proc.returncode == 0, proc.stderr
    hostvars = json.loads(proc.stdout)
    assert hostvars["ansible_user"] == "admin" and hostvars["cluster_subnets"] == ["198.18.0.0/24"]
    assert hostvars["vault_bmc_password"] == "s3cret"


def test_validate_refuses_a_check_run_before_it_reaches_a_node():
    proc = ansible(
        "ansible-playbook", "-i", "inventory/reference", "playbooks/validate.yml", "--check"
    )
    assert proc.returncode == 2, proc.stdout
    assert "run it without --check" in proc.stdout, proc.stdout
    assert "c4140-01" not in proc.stdout  # no node was contacted


def test_inventory_graph_renders():
    proc = ansible("ansible-inventory", "-i", "inventory/reference", "--graph")
    assert proc.returncode == 0, proc.stderr
    assert "@compute:" in proc.stdout and "c4140-08" in proc.stdout


def test_site_playbook_is_syntactically_whole_on_the_reference_inventory():
    proc = ansible("ansible-playbook", "-i", "inventory/reference", "site.yml", "--syntax-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dlperf_reports_its_version():
    proc = subprocess.run(
        [str(BIN / "dlperf"), "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    assert proc.stdout.startswith("dlperf 0.1.0")


def flat(tasks: list[dict]) -> list[dict]:
    """TASKS with every block's tasks in its place (its rescue and always parts left out)."""
    return [t for task in tasks for t in (flat(task["block"]) if "block" in task else [task])]


def dry_plays(playbook: str) -> list[dict]:
    """PLAYBOOK's plays reduced to what needs no node, run on the controller with the reference
    inventory's variables: every play variable rendered, every command's argv rendered (same
    loop and condition), and the plays' own precondition asserts run as they are."""
    plays = []
    for play in yaml.safe_load((REPO / playbook).read_text()):
        imported = play.get("ansible.builtin.import_playbook")
        # an imported playbook's plays stand in its place (validate.yml's BIOS rows)
        source = REPO / Path(playbook).parent / imported if imported else None
        plays += yaml.safe_load(source.read_text()) if source else [play]
    dry = []
    for play in plays:
        tasks = [
            {"name": f"Render {name}", "ansible.builtin.debug": {"msg": f"{{{{ {name} }}}}"}}
            for name in play.get("vars", {})
        ]
        for task in flat(play["tasks"]):
            keep = {k: task[k] for k in ("loop", "when") if k in task}
            # (the validation table's verdict is no precondition: it judges rows, which a dry run
            # has none of, and counts a node without rows as failed)
            if "ansible.builtin.assert" in task and "loop" not in task:
                if play["name"] != "The validation table":
                    tasks.append(task)
            elif "argv" in task.get("ansible.builtin.command", {}):
                argv = task["ansible.builtin.command"]["argv"]
                msg = (
                    {"argv": argv, "environment": task["environment"]}
                    if "environment" in task
                    else argv
                )
                tasks.append({"name": f"Render {task['name']}",
                              "ansible.builtin.debug": {"msg": msg}, **keep})  # fmt: skip
        dry.append(
            {"name": play["name"], "hosts": play["hosts"], "connection": "local",
             "gather_facts": False, "vars": play.get("vars", {}), "tasks": tasks}
        )  # fmt: skip
    return dry


@pytest.mark.parametrize(
    ("playbook", "torch_on", "gpus_found", "address_var"),
    [
        ("playbooks/validate.yml", [], 0, None),
        ("playbooks/validate.yml", ["c4140-01", "c4140-02"], 0, None),
        # the nodes' fabric addresses in a variable of the site's own naming
        ("playbooks/validate.yml", ["c4140-01", "c4140-02"], 0, "fabric_ip"),
        ("playbooks/validate.yml", ["c4140-01"], 0, None),
        ("playbooks/validate.yml", [], 4, None),
        ("playbooks/benchmark.yml", [], 0, None),
    ],
    ids=[
        "validate",
        "validate-pytorch",
        "validate-pytorch-address-var",
        "validate-pytorch-on-one",
        "validate-gpus",
        "benchmark",
    ],
)
def test_every_variable_the_cluster_playbooks_read_is_set_for_the_reference_cluster(
    playbook, torch_on, gpus_found, address_var, tmp_path
):
    dry = tmp_path / Path(playbook).name
    dry.write_text(yaml.safe_dump(dry_plays(playbook), sort_keys=False))
    # PyTorch beside MXNet on the nodes named, as host variables in an inventory of its own;
    # the GPUs each node's check found (gpu_facts' answer, registered by the node checks)
    torch = {h: {"dl_stack_backends": ["mxnet", "pytorch"]} for h in torch_on}
    if gpus_found:
        found = {"validate_gpu": {"gpus": [{"index": i} for i in range(gpus_found)]}}
        torch |= {h: torch.get(h, {}) | found for h in ("c4140-01", "c4140-02")}
    extra = []
    if address_var:
        torch = {h: v | {address_var: f"198.19.0.{i}"} for i, (h, v) in enumerate(torch.items(), 1)}
        extra = ["-e", f"common_cluster_address_var={address_var}"]
    (tmp_path / "torch.yml").write_text(yaml.safe_dump({"all": {"hosts": torch}}))
    proc = ansible(
        "ansible-playbook", "-i", "inventory/reference", "-i", str(tmp_path / "torch.yml"),
        str(dry), "-e", "dlperf_run_id=reference",
        "-e", f"ansible_python_interpreter={sys.executable}",
        "-e", f"dlperf_validate_report={tmp_path}/validate.json", *extra,
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
    )  # fmt: skip
    # An undefined variable or a false precondition fails the play; nothing reaches a node.
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "c4140-01" in proc.stdout and "failed=0" in proc.stdout
    out = re.sub(r"\s+", " ", proc.stdout)
    if playbook.endswith("validate.yml"):
        # whose allreduce: Horovod's on MXNet (the seed's stack), torch.distributed's where
        # both nodes of the check have PyTorch, its ranks meeting at c4140-01 over ib0
        meet = [
            f'"MASTER_ADDR": "{"198.19.0.1" if address_var else "198.18.0.101"}"',
            '"MASTER_PORT": "29500"',
            '"NCCL_SOCKET_IFNAME": "ib0"',
        ]
        if len(torch_on) == 2:
            assert '"--backend", "pytorch"' in out and all(m in out for m in meet), out
            assert '"msg": "PyTorch allreduce"' in out
        else:
            assert '"--backend", "mxnet"' in out and not any(m in out for m in meet), out
            assert '"msg": "Horovod allreduce"' in out
        # one rank per GPU found on each of the two nodes, one where none was
        slots = max(gpus_found, 1)
        ranks = rf'"-np", "?{2 * slots}"?, "-H", "c4140-01:{slots},c4140-02:{slots}"'
        assert re.search(ranks, out), out
        # Slurm's MPI row reduces host tensors: it checks PMIx and MPI on any GPU generation
        assert '"allreduce", "--device", "cpu"' in out
    if playbook.endswith("benchmark.yml"):
        # one process per V100, the sweep over 1-8 nodes on ib0, the seed's recipe and target
        for needle in ('"--procs-per-node", "4"', '"--nodes", "1,2,4,8"',
                       '"--network-interface", "ib0"', '"--target-top1", "0.749"',
                       '"/mnt/isilon/imagenet/val.rec"', '"--batch-size", "192"',
                       '"--launcher", "slurm"', '"--gpus-per-node", "4"'):  # fmt: skip
            assert needle in out, needle
        assert '"--hosts"' not in out  # Slurm chooses the nodes of each point


def test_the_reference_cluster_expects_four_gpus_per_compute_node():
    proc = ansible("ansible-inventory", "-i", "inventory/reference", "--host", "c4140-05")
    assert proc.returncode == 0, proc.stderr
    hostvars = json.loads(proc.stdout)
    assert hostvars["dlperf_gpus_per_node"] == 4
    assert hostvars["dlperf_network_interface"] == hostvars["ipoib_interface"] == "ib0"
    assert set(hostvars["dlperf_benchmark_train_args"]) == set(hostvars["dlperf_benchmark_modes"])
    # the benchmark runs as Slurm jobs, with the V100s confined to their jobs
    assert hostvars["dlperf_benchmark_launcher"] == "slurm"
    assert hostvars["slurm_cgroup"] == "required"


def test_a_limit_that_leaves_out_the_launch_node_stops_benchmark_yml_naming_it():
    # Both of benchmark.yml's plays run on c4140-01: limited to other nodes it would end at once
    # with nothing run and exit 0. It stops before reaching any node instead.
    proc = ansible(
        "ansible-playbook", "-i", "inventory/reference", "playbooks/benchmark.yml",
        "--limit", "c4140-02,c4140-03", "-e", "dlperf_run_id=r1",
    )  # fmt: skip
    assert proc.returncode != 0
    out = re.sub(r"\s+", " ", proc.stdout)
    assert "sweeps from the first compute node, c4140-01, which --limit (c4140-02,c4140-03)" in out
    assert "Sweep from the launch node" not in out
