"""The iDRAC's one-time boot from its virtual CD, against a stand-in of the part of an iDRAC it
talks to (sushy-tools emulates standard Redfish, not Dell's manager attributes): the service
root, the one manager and its Attributes resource, over HTTPS with the tests' CA and basic
auth, with the attribute names an iDRAC9 has."""

from __future__ import annotations

import json
import ssl
import sys
import threading
from base64 import b64encode
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.bmc.conftest import make_tls
from tests.conftest import run_ansible_playbook

MANAGER = "/redfish/v1/Managers/iDRAC.Embedded.1"
USER, PASSWORD = "root", "calvin-in-the-vault"


class IdracManager(ThreadingHTTPServer):
    def __init__(self, attributes: dict):
        super().__init__(("127.0.0.1", 0), Handler)
        self.attributes = attributes
        self.patches: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    server: IdracManager

    def log_message(self, *args):
        pass

    def _reply(self, code: int, body: dict | None = None):
        data = json.dumps(body or {}).encode()
        self.send_response(code)
        if code == 401:
            self.send_header("WWW-Authenticate", 'Basic realm="iDRAC"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        token = b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != f"Basic {token}":
            self._reply(401)
            return False
        return True

    def do_GET(self):
        if not self._authorised():
            return
        pages = {
            "/redfish/v1/": {"Managers": {"@odata.id": "/redfish/v1/Managers"}},
            "/redfish/v1/Managers": {"Members": [{"@odata.id": MANAGER}]},
            MANAGER: {"Id": "iDRAC.Embedded.1"},
            MANAGER + "/Attributes": {"Attributes": self.server.attributes},
        }
        page = pages.get(self.path.rstrip("/") if self.path != "/redfish/v1/" else self.path)
        if page is None:
            return self._reply(404)
        return self._reply(200, page)

    def do_PATCH(self):
        if not self._authorised():
            return
        if self.path != MANAGER + "/Attributes":
            return self._reply(405)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.patches.append(body["Attributes"])
        # an iDRAC takes only the attributes it has
        known = {k: v for k, v in body["Attributes"].items() if k in self.server.attributes}
        self.server.attributes.update(known)
        self._reply(200)


@pytest.fixture
def idrac(tmp_path):
    def start(attributes: dict) -> IdracManager:
        ca, cert, key = make_tls(tmp_path)
        server = IdracManager(attributes)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.ca = ca
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    servers: list[IdracManager] = []
    yield start
    for server in servers:
        server.shutdown()


def boot_once(tmp_path, server, check: bool = False):
    plays = [{
        "hosts": "c4140-01",
        "gather_facts": False,
        "tasks": [{  # the node's BMC, driven from here (its connection is local)
            "ansible.builtin.include_role": {"name": "bmc", "tasks_from": "boot_idrac"},
        }],
    }]  # fmt: skip
    node = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "bmc_address": f"127.0.0.1:{server.server_address[1]}",
        "bmc_username": USER,
        "bmc_password": PASSWORD,
        "bmc_ca_path": str(server.ca),
    }
    inventory = {"all": {"hosts": {"c4140-01": node}}}
    return run_ansible_playbook(tmp_path, plays, inventory, check=check)


def test_an_idrac_is_set_to_boot_once_from_its_virtual_cd(tmp_path, idrac):
    # An iDRAC9's factory settings: no one-time boot, the normal boot order first.
    server = idrac({"VirtualMedia.1.BootOnce": "Disabled", "ServerBoot.1.FirstBootDevice": "Normal",
                    "ServerBoot.1.BootOnce": "Disabled"})  # fmt: skip
    run = boot_once(tmp_path, server)
    assert run.rc == 0, run.failed_tasks()
    assert server.patches == [
        {"VirtualMedia.1.BootOnce": "Enabled", "ServerBoot.1.FirstBootDevice": "VCD-DVD"}
    ]
    again = boot_once(tmp_path, server)  # already set (not booted yet): nothing written
    assert again.rc == 0 and len(server.patches) == 1
    assert PASSWORD not in run.stderr + json.dumps(run.output)


def test_an_idrac_without_those_attributes_fails_instead_of_booting_the_disk(tmp_path, idrac):
    # firmware that names the attribute otherwise: the module only warns; the read-back fails it
    server = idrac({"ServerBoot.1.FirstBootDevice": "Normal"})
    run = boot_once(tmp_path, server)
    assert run.rc != 0
    [(_name, message)] = run.failed_tasks()
    assert "does not hold {'VirtualMedia.1.BootOnce': 'Enabled'}" in message, message
    assert "the node would not start from the ISO" in message


def test_check_mode_sets_nothing_and_passes(tmp_path, idrac):
    factory = {"VirtualMedia.1.BootOnce": "Disabled", "ServerBoot.1.FirstBootDevice": "Normal"}
    server = idrac(factory)
    run = boot_once(tmp_path, server, check=True)
    assert run.rc == 0, run.failed_tasks()
    assert server.patches == []
