"""`dlperf sweep`: one training point per node count, each sampled by telemetry, resumable.

Layout: RESULTS/RUN_ID/sweep.json and RESULTS/RUN_ID/<N>nodes/{result.json, mllog.txt,
train.log, telemetry/<host>.jsonl}. A point is built in a hidden ``.<N>nodes.partial`` directory
and renamed into place only when it has finished (ok or failed), so an interrupted sweep never
leaves a half-written point: on the next run completed points are skipped, failed and
interrupted ones run again.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlperf_module_utils.dlperf_job import (
    job_environment,
    launch_command,
    log_tail,
    rendezvous_environment,
)

from dlperf.results import Result, write_atomic, write_result


class SweepError(Exception):
    """Bad sweep input; the message names the flag."""


@dataclass
class SweepConfig:
    nodes: list[int]
    procs_per_node: int
    launcher: str  # local | hosts
    results: Path
    run_id: str
    train_args: list[str]
    hosts: list[str] = field(default_factory=list)
    controller: str = "gloo"
    network_interface: str | None = None
    telemetry_interval: float = 1.0
    timeout: int = 24 * 3600
    quiet: bool = False


def parse_nodes(text: str) -> list[int]:
    try:
        nodes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise SweepError(f"--nodes {text!r}: give node counts as integers, e.g. 1,2,4,8") from exc
    if not nodes or any(n < 1 for n in nodes):
        raise SweepError(f"--nodes {text!r}: node counts must be >= 1")
    if len(set(nodes)) != len(nodes):
        raise SweepError(f"--nodes {text!r}: a node count appears twice")
    return sorted(nodes)


def validate(cfg: SweepConfig) -> None:
    if cfg.procs_per_node < 1:
        raise SweepError(f"--procs-per-node {cfg.procs_per_node}: must be >= 1")
    if cfg.launcher == "hosts":
        if not cfg.hosts:
            raise SweepError("--launcher hosts needs --hosts h1,h2,...")
        if max(cfg.nodes) > len(cfg.hosts):
            raise SweepError(f"--nodes {max(cfg.nodes)}: only {len(cfg.hosts)} hosts in --hosts")
    if "--output" in cfg.train_args:
        raise SweepError("--output is set by the sweep for each point; do not pass it")
    if cfg.telemetry_interval <= 0:
        raise SweepError(f"--telemetry-interval {cfg.telemetry_interval}: must be > 0")


def point_dir(root: Path, nodes: int) -> Path:
    return root / f"{nodes}nodes"


def is_complete(point: Path) -> bool:
    try:
        return json.loads((point / "result.json").read_text()).get("status") == "ok"
    except (OSError, ValueError):
        return False


class Telemetry:
    """Samplers on every node of a point for the point's duration."""

    def __init__(self, cfg: SweepConfig, hosts: list[str], directory: Path):
        self.procs: list[subprocess.Popen] = []
        dlperf = str(Path(sys.executable).parent / "dlperf")
        for host in hosts:
            name = socket.gethostname() if host == "localhost" else host
            out = directory / f"{name}.jsonl"
            args = [
                dlperf,
                "telemetry",
                "--output",
                str(out),
                "--interval",
                str(cfg.telemetry_interval),
            ]
            # Every sampler ends when its stdin (a pipe from this process) closes: at stop(),
            # or when the sweep itself dies, even by SIGKILL; SSH forwards that EOF, not signals.
            args.append("--stop-on-stdin-eof")
            if host != "localhost":  # results directory on shared storage, same path everywhere
                args = ["ssh", "-o", "BatchMode=yes", host, " ".join(args)]
            self.procs.append(
                subprocess.Popen(
                    args,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )

    def stop(self) -> None:
        for proc in self.procs:
            proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _flag(train_args: list[str], flag: str, default: str) -> str:
    return train_args[train_args.index(flag) + 1] if flag in train_args[:-1] else default


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_point(cfg: SweepConfig, root: Path, nodes: int) -> dict:
    final, partial = point_dir(root, nodes), root / f".{nodes}nodes.partial"
    shutil.rmtree(partial, ignore_errors=True)
    (partial / "telemetry").mkdir(parents=True)
    if cfg.launcher == "local":
        node_hosts = ["localhost"]
        hostlist = f"localhost:{nodes * cfg.procs_per_node}"
    else:
        node_hosts = cfg.hosts[:nodes]
        hostlist = ",".join(f"{h}:{cfg.procs_per_node}" for h in node_hosts)
    # Horovod runs a job whose hosts are all this machine on loopback, and refuses a
    # --network-interface without 127.0.0.1 there: the interface only matters between nodes.
    here = {"localhost", socket.gethostname(), socket.gethostname().split(".")[0], socket.getfqdn()}
    interface = None if set(node_hosts) <= here else cfg.network_interface
    cmd = launch_command(
        "horovodrun",
        hostlist,
        None,
        [*cfg.train_args, "--output", str(partial)],
        dlperf=str(Path(sys.executable).parent / "dlperf"),
        controller=cfg.controller,
        network_interface=interface,
    )
    # On one host a port free now: points, and tests beside each other, never share one.
    port = _free_port() if cfg.launcher == "local" else None
    env = job_environment(
        dict(os.environ),
        {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"},
        defaults=rendezvous_environment(hostlist, interface, port),
    )
    telemetry = Telemetry(cfg, node_hosts, partial / "telemetry")
    start = time.monotonic()
    log = partial / "train.log"
    try:
        with log.open("w") as fh:
            proc = subprocess.run(
                cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=cfg.timeout, check=False
            )
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        rc = -9
    finally:
        telemetry.stop()
    result_file = partial / "result.json"
    if not result_file.exists() or rc != 0:
        previous = json.loads(result_file.read_text()) if result_file.exists() else {}
        write_result(
            result_file,
            Result(
                status="failed",
                mode=_flag(cfg.train_args, "--mode", "throughput"),
                backend=_flag(cfg.train_args, "--backend", "mxnet"),
                world_size=nodes * cfg.procs_per_node,
                nodes=nodes,
                wall_time_s=time.monotonic() - start,
                error=(previous.get("error") or "")
                + f"\nlauncher rc={rc}; log tail:\n{log_tail(str(log))}",
                hyperparameters=previous.get("hyperparameters", {}),
                provenance=previous.get("provenance", {"command": cmd}),
            ),
        )
    if final.exists():
        shutil.rmtree(final)
    os.replace(partial, final)
    return json.loads((final / "result.json").read_text())


def run_sweep(cfg: SweepConfig, progress=None) -> dict[int, str]:
    validate(cfg)
    root = cfg.results / cfg.run_id
    root.mkdir(parents=True, exist_ok=True)
    settings = {
        k: v for k, v in asdict(cfg).items() if k not in ("results", "quiet", "nodes", "timeout")
    }
    stored = root / "sweep.json"
    if stored.exists():
        before = json.loads(stored.read_text())
        if before.get("settings") != json.loads(json.dumps(settings)):
            raise SweepError(
                f"--run-id {cfg.run_id}: {root} holds a sweep with other settings; use a new run id"
            )
        nodes = sorted(set(before.get("nodes", [])) | set(cfg.nodes))
    else:
        nodes = cfg.nodes
    write_atomic(stored, {"settings": settings, "nodes": nodes})
    outcome: dict[int, str] = {}
    for n in cfg.nodes:
        if is_complete(point_dir(root, n)):
            outcome[n] = "skipped"
            if progress:
                progress(n, "skipped (already complete)")
            continue
        if progress:
            progress(n, "running")
        result = run_point(cfg, root, n)
        outcome[n] = result["status"]
        if progress:
            progress(n, result["status"])
    return outcome
