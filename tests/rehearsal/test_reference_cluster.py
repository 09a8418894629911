"""The full-size rehearsal: the real site.yml with inventory/reference's own group_vars and host
names (head01 + c4140-01..08) on nine systemd containers, then validate.yml and benchmark.yml
in check mode, as an operator would run them on the reference cluster.

Only what containers force is overridden (tests/rehearsal/cluster.py: CONTAINER_FORCED): the
connection, and the `*_required` gates of what they cannot have. The Horovod wheel comes
prebuilt (bootstrap's, as the virtual cluster's does): a 9-node rehearsal of the same source
build the dl_stack scenario already runs would cost minutes and prove nothing more.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest
from dlperf.playbooks import run_playbook
from dlperf.reproduce import horovod_wheel
from dlperf.reproduce_progress import PhaseProgress, follow, with_display

from tests.rehearsal.cluster import REPO, Cluster

COMPUTES = [f"c4140-{i:02d}" for i in range(1, 9)]
ALL = ["head01", *COMPUTES]

pytestmark = pytest.mark.skipif(
    shutil.which("podman") is None, reason="podman is missing: run scripts/bootstrap.sh"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(
        tmp_path_factory.mktemp("rehearsal"), 8, {"dl_stack_horovod_wheel": horovod_wheel(REPO)}
    )
    c.up()
    yield c
    if not os.environ.get("DLPERF_KEEP_REHEARSAL"):
        c.down()


def playbook(cluster, name, extravars=None, check=False, results=None):
    """Run NAME on the rehearsal cluster, showing its current task, the hosts through it and the
    elapsed time as `dlperf reproduce` does (a line a minute when not on a terminal)."""

    def run(say, show):
        state = PhaseProgress(f"rehearsal {name}{' --check' if check else ''}")
        show(state)
        return run_playbook(
            REPO,
            name,
            str(cluster.inventory),
            extravars,
            artifacts_dir=cluster.workdir / "runner",
            on_result=results.append if results is not None else None,
            check=check,
            envvars=cluster.ansible_env,
            **follow(state, show),
        )

    return with_display(run, f"rehearsal: {name}")


@pytest.fixture(scope="module")
def first(cluster):
    result = playbook(cluster, "site.yml")
    print(f"\nrehearsal: site.yml, first run on 1+8: {result.duration_s:.0f} s")
    return result


@pytest.fixture(scope="module")
def second(cluster, first):
    assert first.ok, first.output_tail()
    result = playbook(cluster, "site.yml")
    print(f"\nrehearsal: site.yml, no-change re-run on 1+8: {result.duration_s:.0f} s")
    return result


def test_site_converges_on_all_nine_hosts(first):
    assert first.ok, first.output_tail()
    assert sorted(first.changed_by_host()) == sorted(ALL)
    assert not first.count("failures") and not first.count("dark")


def test_what_containers_lack_is_skipped_by_the_roles_own_gates(first):
    out = " ".join(first.stdout_path.read_text().split())  # messages wrap in the YAML output
    for message in (
        "SKIP: c4140-05 cannot load RDMA modules now (no RDMA drivers in its kernel",  # ofed
        "SKIP: c4140-03 has no IPoIB interface ib0; nothing was configured",  # ipoib
        "SKIP: the kernel of head01 (",  # nfs_server: /etc/exports written, nfsd not started
        "SKIP: the kernel of c4140-08 has no NFS client support",  # nfs_client: fstab only
        "SKIP: /mnt/isilon is not an NFS mount on c4140-02",  # isilon
        "NO GPU: c4140-01 has no NVIDIA device on its PCI bus",  # cuda
        "none without a GPU (cuda_install_without_gpu: false)",  # ... and no CUDA parts either
    ):
        assert message in out, message


def test_a_second_run_changes_nothing_on_any_host(second):
    assert second.ok, second.output_tail()
    assert second.changed_by_host() == dict.fromkeys(ALL, 0)


def test_names_resolve_to_the_ipoib_addresses_everywhere(cluster, first):
    for host in ("head01", "c4140-04"):
        hosts = cluster.exec(host, "getent", "ahostsv4", "c4140-08").stdout
        assert hosts.split()[0] == "198.18.0.108", hosts
    assert cluster.exec("c4140-08", "getent", "hosts", "head01").stdout.split()[0] == "198.18.0.10"


def test_the_benchmark_user_reaches_every_node_by_ssh(cluster, first):
    # Same uid everywhere (files on the shared export), keys trusted both ways, no password.
    loop = "for h in " + " ".join(ALL) + "; do ssh -o BatchMode=yes $h 'hostname; id -u'; done"
    out = cluster.exec("c4140-01", "runuser", "-u", "dlperf", "--", "bash", "-c", loop)
    assert out.stdout.split() == [x for host in ALL for x in (host, "2001")]
    sshd = cluster.exec("c4140-04", "sshd", "-T").stdout.splitlines()
    assert "passwordauthentication no" in sshd and "kbdinteractiveauthentication no" in sshd


def test_compute_nodes_take_time_from_the_head(cluster, first):
    conf = cluster.exec("c4140-06", "cat", "/etc/chrony/chrony.conf").stdout
    assert re.findall(r"^(?:server|pool) .*$", conf, re.M) == ["server 198.18.0.10 iburst"], conf
    assert cluster.exec("c4140-06", "systemctl", "is-active", "chrony").stdout.strip() == "active"


def test_exports_and_mounts_are_written_as_the_reference_says(cluster, first):
    exports = cluster.exec("head01", "cat", "/etc/exports").stdout
    assert re.search(
        r"^/export/shared\s+198\.18\.0\.0/24\(rw,sync,root_squash,no_subtree_check", exports, re.M
    )
    fstab = cluster.exec("c4140-03", "cat", "/etc/fstab").stdout
    line = next(line for line in fstab.splitlines() if " /shared " in line)
    assert line.startswith("head01:/export/shared /shared nfs ")
    assert {"nodev", "nosuid", "nconnect=4"} <= set(line.split()[3].split(","))


def test_every_node_has_the_dl_stack_from_the_head_wheelhouse(cluster, first):
    for host in ALL:
        stamp = cluster.exec(host, "cat", "/opt/dlperf/venv/.horovod-check-build").stdout
        built = json.loads(stamp.splitlines()[-1])
        assert built["mxnet"] and built["mpi"] and built["gloo"], (host, built)
    out = cluster.exec("c4140-08", "/opt/dlperf/venv/bin/pip", "download", "--no-index", "--help")
    assert out.returncode == 0


@pytest.fixture(scope="module")
def validation(cluster, second):
    report = cluster.workdir / "validate.json"
    # validate.yml judges the hardware as the reference demands it: RDMA required again.
    result = playbook(
        cluster,
        "playbooks/validate.yml",
        {"dlperf_validate_report": str(report), "ofed_required": True},
    )
    print(f"\nrehearsal: validate.yml on 1+8: {result.duration_s:.0f} s")
    return result, json.loads(report.read_text())["rows"]


def test_validate_fails_the_missing_hardware_by_name_and_passes_the_rest(validation):
    result, rows = validation
    assert not result.ok  # it fails, naming what failed
    failed = {(r["check"], r["node"]) for r in rows if r["status"] == "fail"}
    expected = {("GPUs", h) for h in COMPUTES} | {("RDMA device", h) for h in ALL}
    expected |= {("RDMA bandwidth", "c4140-01 -> c4140-02")}
    # a job step asking for the reference's 4 GPUs per node: Slurm has none to give here
    expected |= {("Slurm GPUs", "c4140-01, c4140-02")}
    assert failed == expected, [r for r in rows if r["status"] == "fail"]
    gpu = next(r for r in rows if r["check"] == "GPUs" and r["node"] == "c4140-07")
    assert "none found, 4 expected" in gpu["detail"]
    passed = {r["check"] for r in rows if r["status"] == "pass"}
    assert {"NFS across nodes", "MPI hello", "Horovod allreduce"} <= passed, rows
    assert {
        r["check"]
        for r in rows
        if (r["node"].startswith("slurm") or "Slurm" in r["check"]) and r["check"] != "Slurm GPUs"
    } <= passed
    slurm_gpus = next(r for r in rows if r["check"] == "Slurm GPUs")
    assert "srun --gres=gpu:4 rc " in slurm_gpus["detail"], slurm_gpus
    # Every node has an iDRAC address but no vault here: the BIOS rows say what is missing.
    bios = [r for r in rows if r["check"] == "BIOS profile"]
    assert {r["node"] for r in bios} == set(ALL), bios
    assert all(r["status"] == "skip" and "bmc_password not set" in r["detail"] for r in bios)


def sweep_plans(cluster, extravars):
    results: list[dict] = []
    run = playbook(cluster, "playbooks/benchmark.yml", {"dlperf_run_id": "rehearsal", **extravars},
                   check=True, results=results)  # fmt: skip
    assert run.ok, run.output_tail()
    sweeps = [r for r in results if r.get("task", "").startswith("Run one sweep per mode")]
    return {item["item"]: item["stdout_lines"] for r in sweeps for item in r["res"]["results"]}


def test_benchmark_check_mode_renders_the_seeds_sweep_through_slurm(cluster, second):
    plans = sweep_plans(cluster, {})
    assert sorted(plans) == ["throughput", "tta"]
    for mode, lines in plans.items():
        assert lines[0].startswith(
            f"sweep {mode}: slurm launcher, nodes 1,2,4,8, 4 process(es) per node"
        )
        for n in (1, 2, 4, 8):
            sbatch = next(line for line in lines if line.startswith(f"{n} node(s): sbatch "))
            for option in (f"--nodes={n}", "--ntasks-per-node=4", "--gres=gpu:4", "--exclusive"):
                assert option in sbatch.split(), (option, sbatch)
        ranks = [line for line in lines if line.startswith("  ranks: srun --mpi=pmix ")]
        assert len(ranks) == 4 and all("--data /mnt/isilon/imagenet/train.rec" in r for r in ranks)
    assert "--target-top1 0.749" in " ".join(plans["tta"])


def test_benchmark_check_mode_with_horovodrun_lists_the_hosts_four_slots_each(cluster, second):
    plans = sweep_plans(cluster, {"dlperf_benchmark_launcher": "hosts"})
    eight = next(line for line in plans["throughput"] if line.startswith("8 node(s): "))
    hosts = ",".join(f"{h}:4" for h in COMPUTES)
    assert f"horovodrun -np 32 -H {hosts} " in eight
    one = next(line for line in plans["throughput"] if line.startswith("1 node(s): "))
    assert "horovodrun -np 4 -H c4140-01:4 " in one
