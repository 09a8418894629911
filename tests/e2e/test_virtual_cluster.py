"""The virtual cluster on real QEMU VMs: up, again with nothing changed, the VMs' kernels,
identities and cluster network; then `dlperf reproduce` on them - site.yml (soft-RoCE, kernel
NFS, the Isilon stand-in, the DL stack from the head's wheelhouse), validate.yml, the sweep over
1 and 2 compute nodes, fetch and report; then torn down, leaving nothing behind but the cached
image.

Runs in file order: the teardown test is last."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from dlperf.playbooks import run_playbook
from dlperf.reproduce import (
    VIRTUAL_STRATEGY,
    ReproduceError,
    horovod_wheel,
    phase_table,
)

from tests.e2e.vms import (
    BRIDGE,
    FULL,
    INVENTORY,
    KILL_AT,
    KILLED,
    NODES,
    PLAYBOOK,
    QUICK,
    REPO,
    STATE,
    kill_vm,
    links,
    outcomes,
    reproduce,
    reproduce_config,
    timed,
    vm,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    run = run_playbook(REPO, PLAYBOOK, INVENTORY, artifacts_dir=tmp_path_factory.mktemp("up"))
    timed("virtual cluster up (image, boot, SSH)", run)
    yield run
    # Whatever the tests did, leave no VM running.
    run_playbook(REPO, PLAYBOOK, INVENTORY, {"state": "absent"},
                 artifacts_dir=tmp_path_factory.mktemp("down-final"))  # fmt: skip


def test_a_second_run_changes_nothing(cluster, tmp_path):
    if not QUICK:
        pytest.skip("dlperf reproduce's cluster phase is the second run (checked there)")
    again = timed(
        "virtual cluster up again", run_playbook(REPO, PLAYBOOK, INVENTORY, artifacts_dir=tmp_path)
    )
    assert again.total_changed() == 0, again.count("changed")


def test_every_vm_runs_its_own_real_kernel_and_identity(cluster):
    machine_ids, host_keys = set(), set()
    for host in NODES:
        assert vm(host, "hostname") == host
        assert vm(host, "systemd-detect-virt") in ("qemu", "kvm")
        assert vm(host, "uname -r").endswith("-amd64")
        assert vm(host, "systemctl is-system-running --wait || true") in ("running", "degraded")
        machine_ids.add(vm(host, "cat /etc/machine-id"))
        host_keys.add(vm(host, "cat /etc/ssh/ssh_host_ed25519_key.pub").split()[1])
        # made at first boot, ed25519 only (the type the cluster records)
        assert vm(host, "ls /etc/ssh/ | grep '^ssh_host_.*_key$'") == "ssh_host_ed25519_key"
        # no periodic apt run takes apt's lock from the roles
        assert vm(host, "systemctl is-enabled apt-daily.timer apt-daily-upgrade.timer || true") == (
            "masked\nmasked"
        )
    assert len(machine_ids) == len(NODES)
    assert len(host_keys) == len(NODES)
    # The recorded keys are exactly the VMs' own.
    known = (STATE / "known_hosts").read_text()
    assert all(key in known for key in host_keys)


def test_the_cluster_network_joins_the_vms_and_nothing_else(cluster):
    for host, spec in NODES.items():
        assert f"inet {spec['cluster_ip']}/24" in vm(host, "ip -4 -o addr show dev eth1")
        for peer, peer_spec in NODES.items():
            if peer != host:
                vm(host, f"ping -c 1 -W 5 {peer_spec['cluster_ip']}")
    all_links = links()
    bridge = all_links[BRIDGE]
    assert bridge["linkinfo"]["info_kind"] == "bridge"
    ports = sorted(name for name, link in all_links.items() if link.get("master") == BRIDGE)
    assert ports == [f"{BRIDGE}t{i}" for i in range(len(NODES))]
    assert all(all_links[p]["linkinfo"]["info_kind"] == "tun" for p in ports)
    addrs = subprocess.run(
        ["ip", "-j", "addr", "show", "dev", BRIDGE], capture_output=True, text=True
    )
    assert json.loads(addrs.stdout)[0]["addr_info"] == [] or all(
        a["family"] == "inet6" and a["scope"] == "link"
        for a in json.loads(addrs.stdout)[0]["addr_info"]
    ), "the host has no address on the cluster bridge"


# `dlperf reproduce` on the VMs, the way a user meets a node crash: the first run loses
# compute02 (killed like a node losing power, while site.yml installs the DL stack, right after
# it wrote a file over NFS); the other nodes finish the play and the run stops naming the lost
# host. The same command again restarts the VM, converges it (the other nodes change nothing:
# their second site.yml), validates and runs the throughput sweep over 1 and 2 compute nodes,
# fetches and reports. DLPERF_E2E=quick leaves all of it out (VM tests only, ~6 min);
# DLPERF_E2E=full adds a third site.yml over all nodes (0 changed) and a training rank killed
# during a sweep point on the VMs.
@pytest.fixture(scope="module")
def crashed(cluster):
    """The first `dlperf reproduce`, with compute02 killed during site.yml."""
    if QUICK:
        pytest.skip("dlperf reproduce on the VMs is left out with DLPERF_E2E=quick")
    cfg = reproduce_config()
    shutil.rmtree(cfg.run_dir, ignore_errors=True)
    fault: dict[str, str] = {}

    def progress(phase: str, text: str) -> None:
        if phase == "site" and text == KILL_AT and not fault:
            token = f"written-on-{KILLED}-before-it-died-{time.time_ns()}"
            vm(KILLED, f"sudo -u dlperf sh -c 'echo {token} > /shared/crash-token'")
            kill_vm(KILLED)
            fault["token"] = token
            print(f"\n[e2e] site: {KILLED} killed at '{KILL_AT}'")

    t0 = time.monotonic()
    with pytest.raises(ReproduceError) as err:
        reproduce(cfg, progress)
    print(f"\n[e2e] dlperf reproduce with {KILLED} lost: {time.monotonic() - t0:.0f} s")
    assert fault, f"site.yml never reached '{KILL_AT}'"
    record = json.loads((cfg.run_dir / "reproduce.json").read_text())
    return fault["token"], str(err.value), record


@pytest.fixture(scope="module")
def reproduced(crashed):
    """The same command again, after the crash: resumes the run to the report."""
    cfg = reproduce_config()
    t0 = time.monotonic()
    record = reproduce(cfg)
    print(f"\n[e2e] dlperf reproduce again: {time.monotonic() - t0:.0f} s")
    print("\n".join(phase_table(record)))
    return record, cfg.run_dir


def test_a_vm_lost_during_site_yml_is_named_while_the_others_finish(crashed):
    token, message, record = crashed
    site = record["phases"]["site"]
    # the cluster phase ran virtual_cluster.yml on the running VMs a second time: 0 changed
    assert record["phases"]["cluster"]["changed"] == 0, record["phases"]["cluster"]
    assert (site["status"], site["unreachable"], site["failed_hosts"]) == ("failed", [KILLED], [])
    assert f"unreachable: {KILLED}" in message and f"Bring {KILLED} back" in message, message
    assert "validate" not in record["phases"]
    for host in ("head01", "compute01"):
        # the play went on to the DL stack's last step there: Horovod verified
        verified = vm(host, "cat /opt/dlperf/venv/.horovod-check-build").splitlines()
        # ... and MXNet (the CPU build) sees no GPU there
        assert json.loads(verified[1]) == {
            "cuda": False, "gloo": True, "mpi": True, "mxnet": True, "nccl": False,
            "gpus": 0, "no_gpu_code": []}  # fmt: skip
        assert vm(host, "/opt/dlperf/venv/bin/dlperf --version").startswith("dlperf ")
    # what compute02 wrote over NFS before it died is on the head's disk
    assert vm("head01", "cat /export/shared/crash-token") == token


def test_the_rerun_brings_the_lost_vm_back_and_converges_it(crashed, reproduced):
    token, _, _ = crashed
    record, _ = reproduced
    assert record["phases"]["cluster"]["changed"] > 0, record  # compute02 booted again
    site = record["phases"]["site"]
    assert site["status"] == "ok" and not site.get("resumed")
    # A second site.yml on the nodes that had finished changes nothing; the lost one converges.
    changed = site["changed_by_host"]
    assert set(changed) == set(NODES), changed
    assert (changed["head01"], changed["compute01"]) == (0, 0), changed
    assert changed[KILLED] > 0, changed
    # and it spends no time there: the venv's record lets pip and the Horovod probe be skipped
    for task in (
        "Install dlperf and its engines from the wheelhouse",
        "Ask Horovod what it was built",
    ):
        ran = outcomes(site["log"], task)
        assert (ran["head01"], ran["compute01"]) == ("skipped", "skipped"), (task, ran)
    # nor on the head's pip download: the wheelhouse's record still matches what it holds
    ran = outcomes(site["log"], "Download dlperf's pinned dependencies")
    assert ran == {"head01": "skipped"}, ran
    assert vm(KILLED, "cat /shared/crash-token") == token
    assert vm(KILLED, "/opt/dlperf/venv/bin/dlperf --version").startswith("dlperf ")


def test_reproduce_ends_with_the_report_of_real_vm_runs(reproduced):
    record, run = reproduced
    assert [p for p, v in record["phases"].items() if v["status"] == "ok"] == [
        "cluster", "site", "validate", "benchmark"]  # fmt: skip
    page = Path(record["report"]).read_text()
    assert page.count('src="data:image/png;base64,') == 4
    assert "TCG" in page or "kvm" in (STATE / "accel").read_text()
    for n in (1, 2):
        result = json.loads((run / "throughput" / f"{n}nodes" / "result.json").read_text())
        assert result["status"] == "ok", result.get("error")
        assert result["nodes"] == n and result["world_size"] == n
        assert result["throughput_img_per_s"] > 0
        # each point was one Slurm job on n compute nodes
        launch = result["provenance"]["launch"]
        assert launch["launcher"] == "slurm" and launch["job_state"] == "COMPLETED", launch
        assert launch["launch_to_run_start_s"] > 0
        used = {"compute01", "compute02"} if n == 2 else {launch["nodelist"]}
        assert used <= {"compute01", "compute02"} and len(used) == n, launch
        # telemetry came from every node of the point, written over NFS
        hosts = {p.stem for p in (run / "throughput" / f"{n}nodes" / "telemetry").glob("*.jsonl")}
        assert hosts == used
    summary = json.loads((run / "report" / "summary.json").read_text())
    assert [r["nodes"] for r in summary["rows"]] == [1, 2]
    if "kvm" not in (STATE / "accel").read_text():
        # TCG VMs cannot train to accuracy: the controller did, with the local launcher
        for n in (1, 2):
            tta = json.loads((run / "tta-controller" / f"{n}nodes" / "result.json").read_text())
            assert tta["status"] == "ok" and tta["reached_target"], tta.get("error")
            assert tta["provenance"]["launch"]["launcher"] == "local"
        assert [r["time_to_accuracy_s"] > 0 for r in summary["rows"]] == [True, True]
        assert "with the local launcher" in page


def test_stop_yml_reaches_the_launch_node_as_the_benchmark_user_and_finds_the_sweeps_ended(
    reproduced, tmp_path
):
    # what `dlperf reproduce` runs when it is stopped in its benchmark phase; the stop of a
    # running sweep itself is in the training tier (tests/training/test_sweep_stop.py)
    _, run = reproduced
    stop = run_playbook(REPO, "playbooks/stop.yml", INVENTORY, {"dlperf_run_id": run.name},
                        strategy=VIRTUAL_STRATEGY, artifacts_dir=tmp_path)  # fmt: skip
    timed("stop.yml", stop)
    assert stop.ok and stop.total_changed() == 0, stop.output_tail()
    assert "--run-id throughput: its sweep is not running: nothing to stop" in stop.output_tail()


def test_validation_passed_every_cross_node_check(reproduced):
    _, run = reproduced
    rows = json.loads((run / "validate.json").read_text())["rows"]
    status = {(r["check"], r["node"]): r["status"] for r in rows}
    assert not [k for k, v in status.items() if v == "fail"], rows
    checks = ["NFS across nodes", "RDMA bandwidth", "MPI hello", "Horovod allreduce"]
    checks += ["Slurm controller", "Slurm nodes idle", "Slurm two-node step", "Slurm MPI job"]
    for check in checks:
        assert [v for (c, _), v in status.items() if c == check] == ["pass"], (check, rows)
    assert all(status[("RDMA device", h)] == "pass" for h in NODES)
    assert all(status[("GPUs", h)] == "skip" for h in NODES)


def test_site_yml_a_second_time_changes_nothing(reproduced, tmp_path):
    if not FULL:
        pytest.skip("a site.yml over all nodes once more (~4 min on TCG) runs with DLPERF_E2E=full")
    wheel = horovod_wheel(REPO)
    again = run_playbook(REPO, "site.yml", INVENTORY, {"dl_stack_horovod_wheel": wheel},
                         strategy=VIRTUAL_STRATEGY, artifacts_dir=tmp_path)  # fmt: skip
    timed("site.yml again", again)
    assert again.total_changed() == 0, again.count("changed")


def test_a_rank_killed_during_a_vm_sweep_point_fails_it_and_a_rerun_repeats_only_it(
    reproduced, tmp_path
):
    if not FULL:
        pytest.skip("a second sweep on the VMs (~11 min on TCG) runs with DLPERF_E2E=full")
    run_id = "e2e-rank"
    results = REPO / "results"
    shutil.rmtree(results / run_id, ignore_errors=True)
    extravars = {"dlperf_run_id": run_id, "dlperf_results_dir": str(results)}
    killed, done = threading.Event(), threading.Event()

    def kill_the_rank() -> None:  # the 1-node point's rank, on whichever node Slurm gave it
        while not (killed.is_set() or done.is_set()):
            for node in ("compute01", "compute02"):
                out = vm(
                    node, "pkill -KILL -f 'python[0-9.]* [^ ]+/dlperf train' && echo killed || true"
                )
                if out == "killed":
                    killed.set()
                    break
            time.sleep(3)

    killer = threading.Thread(target=kill_the_rank, daemon=True)
    killer.start()
    first = run_playbook(REPO, "playbooks/benchmark.yml", INVENTORY, extravars,
                         strategy=VIRTUAL_STRATEGY, artifacts_dir=tmp_path / "first")  # fmt: skip
    done.set()
    killer.join(timeout=60)
    assert killed.is_set(), "the 1-node point's rank never showed up on a compute node"
    timed("benchmark.yml with a rank killed", first)  # a failed point does not fail the play
    run = results / run_id / "throughput"
    one = json.loads((run / "1nodes" / "result.json").read_text())
    assert one["status"] == "failed" and "log tail" in one["error"], one
    assert json.loads((run / "2nodes" / "result.json").read_text())["status"] == "ok"
    kept = (run / "2nodes" / "result.json").read_bytes()
    timed("benchmark.yml again", run_playbook(REPO, "playbooks/benchmark.yml", INVENTORY, extravars,
          strategy=VIRTUAL_STRATEGY, artifacts_dir=tmp_path / "again"))  # fmt: skip
    assert json.loads((run / "1nodes" / "result.json").read_text())["status"] == "ok"
    assert (run / "2nodes" / "result.json").read_bytes() == kept


def test_a_file_written_over_nfs_on_one_node_is_read_on_another(reproduced):
    token = f"written-on-compute01-{time.time_ns()}"
    vm("compute01", f"sudo -u dlperf sh -c 'echo {token} > /shared/e2e-token'")
    assert vm("compute02", "cat /shared/e2e-token") == token
    assert vm("head01", "stat -c %U /export/shared/e2e-token") == "dlperf"
    for host in ("compute01", "compute02"):
        shared = vm(host, "findmnt -n -o FSTYPE,OPTIONS /shared")
        assert shared.startswith("nfs4 ") and "nodev" in shared and "nosuid" in shared, shared
        fstype, source, options = vm(
            host, "findmnt -n -o FSTYPE,SOURCE,OPTIONS /mnt/isilon"
        ).split()
        assert (fstype, source) == (
            "nfs",
            "169.254.100.10:/ifs/data/dlperf",
        ) and "vers=3" in options
    # root on a client is squashed: it cannot write into the benchmark user's directory.
    denied = vm("compute01", "touch /shared/root-was-here 2>&1 || echo denied")
    assert denied.endswith("denied"), denied


def test_the_head_runs_the_nfsd_threads_it_was_given(reproduced):
    # nfs_server_threads for 2 compute nodes: max(16, 2 x 8) = 16; Debian's own default is 8.
    # The kernel's count, not the configuration's: a count on rpc.nfsd's command line would win.
    assert vm("head01", "cat /proc/fs/nfsd/threads") == "16"
    assert vm("head01", "nfsconf --get nfsd threads") == "16"
    assert vm("head01", "grep ^RPCNFSDCOUNT= /etc/default/nfs-kernel-server") == "RPCNFSDCOUNT=16"


def test_every_node_has_an_active_soft_roce_device(reproduced):
    for host in NODES:
        link = vm(host, "rdma link show")
        assert "state ACTIVE" in link and "netdev eth1" in link, link
        assert vm(host, "systemctl is-enabled dlperf-softroce.service") == "enabled"


def test_teardown_removes_what_it_created_and_keeps_the_image(cluster, tmp_path):
    image = Path((STATE / "image").read_text().strip())
    absent = {"state": "absent"}
    down = run_playbook(REPO, PLAYBOOK, INVENTORY, absent, artifacts_dir=tmp_path / "down")
    timed("virtual cluster down", down)
    assert down.total_changed() > 0
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", "process=dlvc-"], capture_output=True, text=True)
    assert left.stdout == "", left.stdout
    assert not {BRIDGE, *(f"{BRIDGE}t{i}" for i in range(len(NODES)))} & set(links())
    assert not STATE.exists()
    assert (image / "base.qcow2").exists()
    again = run_playbook(
        REPO, PLAYBOOK, INVENTORY, {"state": "absent"}, artifacts_dir=tmp_path / "again"
    )
    assert again.ok and again.total_changed() == 0, again.count("changed")
