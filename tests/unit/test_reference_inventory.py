"""The seed's cluster inventory is whole: 1 head + 8 compute nodes, and site.yml parses on it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))


def ansible(tool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / tool), *args], capture_output=True, text=True, cwd=REPO, env=ENV, check=False
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
