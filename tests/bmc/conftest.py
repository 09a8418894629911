"""Three BMCs on this machine (sushy-tools' Redfish emulator over HTTPS, one process each) and a
fourth address where nothing answers; an inventory of four compute nodes pointing at them, with
the password in an ansible-vault file and the emulators' CA as bmc_ca_path."""

from __future__ import annotations

import datetime
import functools
import http.server
import ipaddress
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from base64 import b64encode
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.bmc.emulator import system_id
from tests.conftest import PlaybookRun, ansible_bin, json_run

REPO = Path(__file__).resolve().parents[2]
PASSWORD = "calvin-in-the-vault"
# Attributes as a 14th-generation PowerEdge's BIOS registry names them, starting away from the
# reference profile on SysProfile and MmioAbove4Gb.
BIOS = {
    "BootMode": "Uefi",
    "LogicalProc": "Enabled",
    "MemOpMode": "OptimizerMode",
    "MmioAbove4Gb": "Disabled",
    "NodeInterleave": "Disabled",
    "ProcCStates": "Enabled",
    "ProcTurboMode": "Enabled",
    "SriovGlobalEnable": "Disabled",
    "SysProfile": "PerfPerWattOptimizedDapc",
}
LIBVIRT_NODES = ("c4140-01", "c4140-02")
# c4140-02's BMC manages a second system beside the node's own: its inventory names the node's
# (bmc_resource_id), and nothing may reach the other.
SHARED_NODE, OTHER_SYSTEM = "c4140-02", "c4140-02-sled-b"
FAKE_NODE = "c4140-03"  # virtual media (the fake backend)
DEAD_NODE = "c4140-04"  # a BMC address where nothing answers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_tls(directory: Path) -> tuple[Path, Path, Path]:
    """A CA and a certificate it signed for 127.0.0.1: (ca.pem, bmc.pem, bmc.key)."""
    now = datetime.datetime.now(datetime.UTC)

    def cert(subject, issuer, key, signer, ca):
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key, bmc_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "dlperf test BMC CA")])
    bmc_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    ca = cert(ca_name, ca_name, ca_key, ca_key, True)
    leaf = cert(bmc_name, ca_name, bmc_key, ca_key, False)
    paths = directory / "ca.pem", directory / "bmc.pem", directory / "bmc.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        bmc_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


class ImageServer(http.server.ThreadingHTTPServer):
    """Serves one ISO-sized file and remembers what was asked for."""

    def __init__(self, directory: Path):
        self.requests: list[str] = []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args):
                server.requests.append(self.path)

        super().__init__(("127.0.0.1", 0), functools.partial(Handler, directory=str(directory)))


@dataclass
class Bmcs:
    workdir: Path
    ca: Path
    ports: dict[str, int]
    image_url: str
    images: ImageServer
    logs: dict[str, Path] = field(default_factory=dict)

    def get(self, node: str, path: str) -> dict:
        """GET a Redfish resource of NODE's BMC, as an independent client would."""
        request = urllib.request.Request(f"https://127.0.0.1:{self.ports[node]}{path}")
        token = b64encode(f"root:{PASSWORD}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
        context = ssl.create_default_context(cafile=str(self.ca))
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return json.load(response)

    def system(self, node: str, name: str | None = None) -> dict:
        """NODE's system on its BMC, or the BMC's system NAME."""
        members = [m["@odata.id"] for m in self.get(node, "/redfish/v1/Systems")["Members"]]
        if node == SHARED_NODE or name:
            wanted = system_id(name or node)
            members = [m for m in members if m.rstrip("/").endswith("/" + wanted)]
        return self.get(node, members[0])

    def bios(self, node: str, name: str | None = None) -> dict:
        return self.get(node, self.system(node, name)["Bios"]["@odata.id"])["Attributes"]

    def play(self, playbook: str, *args: str, extra: dict | None = None) -> PlaybookRun:
        cmd = [
            ansible_bin("ansible-playbook"),
            "-i",
            str(self.workdir / "inventory"),
            "--vault-password-file",
            str(self.workdir / "vault-pass"),
            str(REPO / playbook),
            *args,
        ]
        if extra:
            path = self.workdir / f"extra-{time.monotonic_ns()}.json"
            path.write_text(json.dumps(extra))
            cmd += ["-e", f"@{path}"]
        env = dict(
            os.environ,
            ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
            ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
            ANSIBLE_CALLBACKS_ENABLED="ansible.posix.json",
            ANSIBLE_NOCOLOR="1",
        )
        return json_run(cmd, env, REPO)


def wait_until_up(bmcs: Bmcs, node: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"the {node} emulator exited:\n{bmcs.logs[node].read_text()[-3000:]}"
            )
        try:
            bmcs.get(node, "/redfish/v1/Systems")
            return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"the {node} emulator did not answer in 60 s")


@pytest.fixture(scope="session")
def bmcs(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("bmc")
    ca, cert, key = make_tls(workdir)
    htpasswd = workdir / "htpasswd"
    htpasswd.write_text(
        f"root:{bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()}\n"
    )
    (workdir / "www").mkdir()
    (workdir / "www" / "installer.iso").write_bytes(os.urandom(256 * 1024))
    images = ImageServer(workdir / "www")
    threading.Thread(target=images.serve_forever, daemon=True).start()

    nodes = (*LIBVIRT_NODES, FAKE_NODE, DEAD_NODE)
    bmcs = Bmcs(
        workdir,
        ca,
        {node: free_port() for node in nodes},
        f"http://127.0.0.1:{images.server_address[1]}/installer.iso",
        images,
    )

    # The inventory: the reference compute profile, the password only in a vault file.
    reference = yaml.safe_load((REPO / "inventory/reference/group_vars/compute.yml").read_text())
    inventory = workdir / "inventory"
    (inventory / "group_vars" / "all").mkdir(parents=True)
    (workdir / "vault-pass").write_text("test-vault-key\n")
    (inventory / "hosts.yml").write_text(
        yaml.safe_dump(
            {
                "all": {
                    "children": {
                        "cluster": {
                            "children": {
                                "compute": {
                                    "hosts": {
                                        n: {"bmc_address": f"127.0.0.1:{p}"}
                                        for n, p in bmcs.ports.items()
                                    }
                                }
                            }
                        }
                    }
                }
            }
        )
    )
    (inventory / "group_vars" / "all" / "main.yml").write_text(
        yaml.safe_dump(
            {
                "bmc_username": "root",
                "bmc_password": "{{ vault_bmc_password }}",
                "bmc_ca_path": str(ca),
                "bmc_timeout": 5,
                "bmc_apply_poll": 1,
                "bmc_apply_timeout": 30,
                "bmc_bios_attributes": reference["bmc_bios_attributes"],
            }
        )
    )
    vault = subprocess.run(
        [
            ansible_bin("ansible-vault"),
            "encrypt",
            "--vault-password-file",
            str(workdir / "vault-pass"),
            "--output",
            "-",
            "-",
        ],
        input=yaml.safe_dump({"vault_bmc_password": PASSWORD}),
        capture_output=True,
        text=True,
        check=True,
    )
    (inventory / "group_vars" / "all" / "vault.yml").write_text(vault.stdout)
    (inventory / "host_vars").mkdir()
    (inventory / "host_vars" / f"{FAKE_NODE}.yml").write_text(
        yaml.safe_dump({"bmc_bios_attributes": {}})
    )
    (inventory / "host_vars" / f"{SHARED_NODE}.yml").write_text(
        yaml.safe_dump({"bmc_resource_id": system_id(SHARED_NODE)})
    )

    procs = []
    try:
        for node in nodes[:3]:
            bmcs.logs[node] = workdir / f"{node}.log"
            extra = ["--fake"] if node == FAKE_NODE else ["--bios", json.dumps(BIOS)]
            if node == SHARED_NODE:
                extra += ["--also", OTHER_SYSTEM]
            # sushy keeps its state (power, boot, media) in sqlite files under TMPDIR.
            state = workdir / f"{node}-state"
            state.mkdir()
            procs.append(
                (
                    node,
                    subprocess.Popen(
                        [
                            sys.executable,
                            str(Path(__file__).with_name("emulator.py")),
                            node,
                            str(bmcs.ports[node]),
                            str(cert),
                            str(key),
                            str(htpasswd),
                            *extra,
                        ],
                        stdout=bmcs.logs[node].open("w"),
                        stderr=subprocess.STDOUT,
                        env=dict(os.environ, TMPDIR=str(state)),
                    ),
                )
            )
        for node, proc in procs:
            wait_until_up(bmcs, node, proc)
        yield bmcs
    finally:
        for _, proc in procs:
            proc.terminate()
        for _, proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        images.shutdown()
