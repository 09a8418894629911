"""The e2e tier's handles on the virtual cluster: its inventory and state, commands on a VM as
Ansible reaches it, killing one, and `dlperf reproduce` run with the command's own display."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import yaml
from dlperf.playbooks import PlaybookResult
from dlperf.reproduce import ReproduceConfig, run_reproduce
from dlperf.reproduce_progress import with_display

REPO = Path(__file__).resolve().parents[2]
INVENTORY = "inventory/virtual/hosts.yml"
PLAYBOOK = "playbooks/virtual_cluster.yml"
STATE = REPO / ".cache" / "virtual-cluster"
HOSTS = yaml.safe_load((REPO / INVENTORY).read_text())["all"]["children"]["cluster"]["children"]
NODES = {name: v for group in HOSTS.values() for name, v in group["hosts"].items()}
BRIDGE = "dlperfvc0"


def timed(label: str, result: PlaybookResult) -> PlaybookResult:
    print(f"\n[e2e] {label}: {result.duration_s:.0f} s, rc {result.rc}")
    assert result.ok, f"{label} failed:\n{result.output_tail()}"
    return result


def vm(host: str, command: str) -> str:
    """Run COMMAND on a VM the way Ansible reaches it: root, the cluster's key, checked host key."""
    port = NODES[host]["ansible_port"]
    out = subprocess.run(
        ["ssh", "-p", str(port), "-i", str(STATE / "id_ed25519"), "-o", "BatchMode=yes",
         "-o", f"UserKnownHostsFile={STATE / 'known_hosts'}", "-o", "StrictHostKeyChecking=yes",
         "root@127.0.0.1", command],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert out.returncode == 0, f"{host}: {command}: {out.stderr}"
    return out.stdout.strip()


def links() -> dict[str, dict]:
    out = subprocess.run(["ip", "-j", "-d", "link", "show"], capture_output=True, text=True)
    return {link["ifname"]: link for link in json.loads(out.stdout)}


MODE = os.environ.get("DLPERF_E2E", "reproduce")
QUICK = MODE == "quick"
FULL = MODE == "full"
RUN_ID = "e2e"
KILLED = "compute02"
# The first task of the dl_stack role: by then compute02 has the benchmark user and /shared.
KILL_AT = "Install the MPI runtime and what Horovod links"


def kill_vm(host: str) -> None:
    os.kill(int((STATE / f"{host}.pid").read_text()), signal.SIGKILL)


def reproduce_config() -> ReproduceConfig:
    return ReproduceConfig(REPO, Path("inventory/virtual"), RUN_ID, REPO / "results")


def outcomes(log: str, task: str) -> dict[str, str]:
    """Per host, how the task named TASK (or starting so) ended in the run whose log is LOG."""
    found = {}
    for path in (Path(log).parent / "job_events").glob("*.json"):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        kind = event["event"].removeprefix("runner_on_")
        if kind not in (event["event"], "start") and data.get("task", "").startswith(task):
            found[data["host"]] = kind
    return found


def reproduce(cfg: ReproduceConfig, progress=None) -> dict:
    """run_reproduce with the command's own display (each phase's start and end, and its current
    task, hosts and elapsed time live on a terminal, a line a minute in logs); PROGRESS also
    hears every task's name."""

    def run(say, show):
        def both(phase: str, text: str) -> None:
            say(phase, text)
            if progress:
                progress(phase, text)

        return run_reproduce(cfg, both, show)

    return with_display(run, "e2e: dlperf reproduce")
