"""The reference cluster on systemd containers: head01 and c4140-01..NN of inventory/reference,
each a podman container of the molecule test image plus sshd and an `admin` account with sudo
(tests/rehearsal/Containerfile), on a podman network at the inventory's own IPoIB addresses
(198.18.0.0/24). Ansible reaches them over SSH as the inventory says (admin, become), so
pipelining, ControlPersist and Mitogen behave as on real nodes.

The inventory a run uses is inventory/reference itself (its hosts.yml and group_vars, linked)
plus one file of per-host overrides for what containers force: where to connect, and the
`*_required` flags of what a container cannot have (kernel NFS, RDMA, GPUs, cgroups, the
clock). Host variables outrank the reference's group_vars, so nothing else changes.

Used by the rehearsal tier (tests/rehearsal/) and benchmarks/site_scale.py.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "inventory" / "reference"
NETWORK = "dlperf-rehearsal"
VOLUME = "dlperf-rehearsal-shared"  # the head's export, as /shared on the compute nodes
PREFIX = "dlperf-rh-"

# What a container cannot have, and so the reference's `required` gates are lifted for; the
# roles then skip those parts with their own messages (validate.yml reports them failing).
CONTAINER_FORCED = {
    "ofed_required": False,  # no RDMA devices
    "ipoib_required": False,  # no ib0
    "nfs_server_required": False,  # no kernel nfsd in a container
    "nfs_client_required": False,  # no NFS mounts in a container (the volume stands in)
    "isilon_required": False,  # no Isilon
    "cuda_required": False,  # no GPUs
    "slurm_cgroup": "auto",  # no cgroup subtree of its own
    "common_chrony_control_clock": False,  # the clock is the host's
    "dlperf_network_interface": "eth0",  # the cluster addresses are on eth0, there is no ib0
}


def run(*argv: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kw)


def image() -> str:
    """The node image, built once on the molecule test image and cached by both recipes."""
    base = run(str(REPO / "scripts" / "build-test-image.sh")).stdout.strip().splitlines()[-1]
    recipe = Path(__file__).with_name("Containerfile")
    key = hashlib.sha256(recipe.read_bytes() + base.encode()).hexdigest()[:12]
    tag = f"localhost/dlperf-rehearsal:{key}"
    if run("podman", "image", "exists", tag, check=False).returncode != 0:
        out = run(
            "podman", "build", "--build-arg", f"BASE={base}", "-t", tag, "-f", str(recipe),
            str(recipe.parent), check=False,
        )  # fmt: skip
        if out.returncode != 0:
            raise RuntimeError(
                f"podman build of {tag} failed:\n{out.stdout[-3000:]}{out.stderr[-3000:]}"
            )
    return tag


def reference_hosts() -> tuple[dict, dict]:
    """(head hosts, compute hosts) of inventory/reference/hosts.yml: name -> its variables."""
    inv = yaml.safe_load((REFERENCE / "hosts.yml").read_text())
    groups = inv["all"]["children"]["cluster"]["children"]
    return groups["head"]["hosts"], groups["compute"]["hosts"]


class Cluster:
    """head01 + the first `computes` compute nodes of the reference inventory."""

    def __init__(self, workdir: Path, computes: int = 8, extra_vars: dict | None = None):
        head, compute = reference_hosts()
        if not 1 <= computes <= len(compute):
            raise ValueError(f"computes={computes}: the reference has {len(compute)} compute nodes")
        self.workdir = Path(workdir)
        self.head = dict(head)
        self.compute = dict(list(compute.items())[:computes])
        self.extra_vars = dict(extra_vars or {})
        self.key = self.workdir / "id_ed25519"
        self.known_hosts = self.workdir / "known_hosts"

    @property
    def ansible_env(self) -> dict:
        """ansible-runner's fact cache, shared by this cluster's runs only (the re-run reuses
        the first run's facts); its containers reuse the reference's host names, so another
        cluster's cache would hand them the wrong facts."""
        return {"ANSIBLE_CACHE_PLUGIN_CONNECTION": str(self.workdir / "facts")}

    @property
    def hosts(self) -> dict:
        return {**self.head, **self.compute}

    def container(self, host: str) -> str:
        return PREFIX + host

    # ------------------------------------------------------------------------------ lifecycle
    def up(self, timeout: float = 180) -> None:
        self.down()
        self.workdir.mkdir(parents=True, exist_ok=True)
        tag = image()
        if not self.key.exists():
            run(
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "rehearsal",
                "-f",
                str(self.key),
            )
        subnet = next(iter(self.head.values()))["cluster_ip"].rsplit(".", 1)[0] + ".0/24"
        run("podman", "network", "create", "--subnet", subnet, NETWORK)
        run("podman", "volume", "create", VOLUME)
        for host, hv in self.hosts.items():
            mount = "/export/shared" if host in self.head else "/shared"
            run(
                "podman", "run", "-d", "--name", self.container(host), "--hostname", host,
                "--network", NETWORK, "--ip", hv["cluster_ip"], "--systemd=always",
                "-v", f"{self.key}.pub:/home/admin/.ssh/authorized_keys:ro",
                "-v", f"{VOLUME}:{mount}", tag, "/sbin/init",
            )  # fmt: skip
        self._trust_host_keys(timeout)
        self.write_inventory()

    def _trust_host_keys(self, timeout: float) -> None:
        """Wait for every sshd and record its host key (the controller checks host keys)."""
        ips = [hv["cluster_ip"] for hv in self.hosts.values()]
        deadline = time.monotonic() + timeout
        keys: dict[str, str] = {}
        while len(keys) < len(ips):
            for ip in ips:
                if ip not in keys:
                    out = run("ssh-keyscan", "-T", "2", "-t", "ed25519", ip, check=False)
                    if out.stdout.strip():
                        keys[ip] = out.stdout
            if len(keys) < len(ips):
                if time.monotonic() > deadline:
                    missing = sorted(set(ips) - set(keys))
                    raise TimeoutError(f"sshd did not answer on {missing} within {timeout:.0f} s")
                time.sleep(1)
        self.known_hosts.write_text("".join(keys[ip] for ip in ips))

    def down(self) -> None:
        existing = run(
            "podman", "ps", "-aq", "--filter", f"name=^{PREFIX}", check=False
        ).stdout.split()
        if existing:
            run("podman", "rm", "-f", "-t", "0", *existing, check=False)
        run("podman", "volume", "rm", "-f", VOLUME, check=False)
        run("podman", "network", "rm", "-f", NETWORK, check=False)

    # ------------------------------------------------------------------------------ inventory
    @property
    def inventory(self) -> Path:
        return self.workdir / "inventory"

    def write_inventory(self) -> Path:
        inv = self.inventory
        if inv.exists():
            shutil.rmtree(inv)
        inv.mkdir(parents=True)
        (inv / "group_vars").symlink_to(REFERENCE / "group_vars")
        compute = reference_hosts()[1]
        if len(self.compute) == len(compute):
            (inv / "hosts.yml").symlink_to(REFERENCE / "hosts.yml")
        else:
            hosts = yaml.safe_load((REFERENCE / "hosts.yml").read_text())
            groups = hosts["all"]["children"]["cluster"]["children"]
            groups["compute"]["hosts"] = self.compute
            (inv / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
        connection = {
            "ansible_ssh_private_key_file": str(self.key),
            "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.known_hosts}",
        }
        overrides = {
            host: {
                "ansible_host": hv["cluster_ip"],
                **connection,
                **CONTAINER_FORCED,
                **self.extra_vars,
            }
            for host, hv in self.hosts.items()
        }
        # Read after hosts.yml (alphabetical): host variables, above the reference's group_vars.
        (inv / "zz-containers.yml").write_text(
            "# The rehearsal's overrides: connection and what containers cannot have.\n"
            + yaml.safe_dump({"all": {"hosts": overrides}}, sort_keys=True)
        )
        return inv

    def exec(self, host: str, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        return run("podman", "exec", self.container(host), *argv, check=check)
