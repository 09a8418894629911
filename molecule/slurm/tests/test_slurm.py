"""Slurm deployed by the role on a controller and two compute containers, used as a user would."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

HEAD, COMPUTES = "slurm-head", ["slurm-c1", "slurm-c2"]
USER = "dlperf"


def as_user(host, command: str):
    return host.run(f"runuser -u {USER} -- {command}")


def test_every_node_carries_the_same_munge_key_readable_by_munge_only(podman):
    sums = set()
    for node in [HEAD, *COMPUTES]:
        key = podman(node).file("/etc/munge/munge.key")
        assert (key.user, key.group, key.mode) == ("munge", "munge", 0o400), node
        sums.add(podman(node).check_output("sha256sum /etc/munge/munge.key").split()[0])
    assert len(sums) == 1, "the munge keys differ between nodes"


def test_a_credential_made_on_a_compute_node_is_accepted_on_the_controller():
    cred = subprocess.run(
        ["podman", "exec", COMPUTES[0], "munge", "-n"], capture_output=True, check=True, text=True
    ).stdout
    check = subprocess.run(
        ["podman", "exec", "-i", HEAD, "unmunge"], input=cred, capture_output=True, text=True
    )
    assert check.returncode == 0 and "STATUS:          Success" in check.stdout, check.stdout


def test_nodes_are_described_from_facts_without_gpus_or_cgroups_in_containers(podman):
    conf = podman(HEAD).file("/etc/slurm/slurm.conf").content_string
    cpus = int(podman(COMPUTES[0]).check_output("nproc --all"))
    for node, address in (("slurm-c1", "198.18.111.11"), ("slurm-c2", "198.18.111.12")):
        line = re.search(rf"^NodeName={node} .*$", conf, re.M).group(0)
        assert f"NodeAddr={address}" in line
        fields = dict(f.split("=") for f in line.split())
        per_node = int(fields["Sockets"]) * int(fields["CoresPerSocket"])
        assert per_node * int(fields["ThreadsPerCore"]) == cpus
        assert "Gres=" not in line
    assert "SlurmctldHost=slurm-head(198.18.111.10)" in conf
    assert "ProctrackType=proctrack/linuxproc" in conf and "the nodes are containers" in conf
    assert "TaskPlugin=task/none" in conf  # a container may not set CPU affinity
    for node in COMPUTES:  # one file for the whole cluster
        assert podman(node).file("/etc/slurm/slurm.conf").content_string == conf


def test_sinfo_shows_both_compute_nodes_idle_in_the_default_partition(podman):
    out = podman(HEAD).check_output("sinfo --noheader --Node --format='%N %P %t'")
    assert sorted(out.splitlines()) == ["slurm-c1 batch* idle", "slurm-c2 batch* idle"]


def test_srun_on_two_nodes_runs_on_both(podman):
    out = as_user(podman(HEAD), "srun -N2 --ntasks-per-node=1 hostname")
    assert out.rc == 0, out.stderr
    assert sorted(out.stdout.split()) == COMPUTES


def test_a_batch_job_runs_to_completion_as_the_benchmark_user(podman):
    head = podman(HEAD)
    submit = as_user(head, "sbatch --parsable -N1 --output=/tmp/job-%j.out --wrap='id -un'")
    assert submit.rc == 0, submit.stderr
    job = submit.stdout.strip().split(";")[0]
    state = ""
    for _ in range(60):
        state = head.check_output(f"scontrol show job {job}")
        if re.search(r"JobState=(COMPLETED|FAILED|CANCELLED|TIMEOUT)", state):
            break
        time.sleep(1)
    assert "JobState=COMPLETED" in state and "ExitCode=0:0" in state, state
    assert f"UserId={USER}(" in state
    node = re.search(r"BatchHost=(\S+)", state).group(1)
    assert podman(node).check_output(f"cat /tmp/job-{job}.out") == USER
    # and accounting recorded it (slurmdbd, MariaDB): the job's end reaches it asynchronously.
    # (Its user is not compared: the role registers no accounts or users, and a job of a user
    # without an association was seen recorded under uid 0.)
    for _ in range(30):
        record = as_user(head, f"sacct --noheader --parsable2 -X -j {job} -o JobID,State,ExitCode")
        if "COMPLETED" in record.stdout:
            break
        time.sleep(1)
    assert record.stdout.strip() == f"{job}|COMPLETED|0:0", record.stdout + record.stderr
    # ... and a compute node asks slurmdbd too (the sweep's launch node may be one)
    on_compute = as_user(podman(COMPUTES[0]), f"sacct --noheader --parsable2 -X -j {job} -o State")
    assert on_compute.stdout.strip() == "COMPLETED", on_compute.stdout + on_compute.stderr


def test_accounting_knows_the_cluster_and_keeps_its_password_to_slurm(podman):
    head = podman(HEAD)
    conf = head.file("/etc/slurm/slurmdbd.conf")
    assert (conf.user, conf.mode) == ("slurm", 0o600)
    clusters = head.check_output("sacctmgr --noheader --parsable2 list cluster format=cluster")
    assert clusters.split() == ["dlperf"]
    slurm_conf = head.file("/etc/slurm/slurm.conf").content_string
    assert "AccountingStorageType=accounting_storage/slurmdbd" in slurm_conf
    # by the controller's address (as SlurmctldHost): no node resolves its name to reach it
    assert "AccountingStorageHost=198.18.111.10" in slurm_conf


@pytest.mark.parametrize("launch", ["srun", "mpirun"])
def test_an_mpi_program_spans_both_nodes_under_slurm(podman, launch):
    hello = (
        "python3 -c 'from mpi4py import MPI; c = MPI.COMM_WORLD; "
        "print(c.rank, c.size, sorted(set(c.allgather(MPI.Get_processor_name())))[-1])'"
    )
    # srun starts the ranks itself (PMIx, MpiDefault); mpirun inside an allocation starts its
    # daemons through srun.
    inner = f"srun {hello}" if launch == "srun" else f"mpirun --oversubscribe {hello}"
    out = as_user(podman(HEAD), f"salloc -N2 --ntasks-per-node=1 {inner}")
    assert out.rc == 0, out.stdout + out.stderr
    lines = sorted(line for line in out.stdout.splitlines() if re.match(r"^\d+ \d+ ", line))
    assert lines == ["0 2 slurm-c2", "1 2 slurm-c2"], out.stdout
