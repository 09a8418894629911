"""The ``local`` and ``hosts`` launchers: horovodrun over this machine, or over the first N of
--hosts by SSH, with a telemetry sampler on every node of the point (here, or over SSH)."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from dlperf_module_utils.dlperf_job import (
    is_this_machine,
    job_environment,
    launch_command,
    rendezvous_environment,
    run_logged,
    stop_grace,
    stop_stray_ranks,
)

from dlperf.launchers.common import Launch, dlperf_binary


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sampler_command(host: str, directory: Path, interval: float) -> list[str]:
    """The command that samples HOST into DIRECTORY/<host>.jsonl: here, or over SSH (the
    results directory is on shared storage, at the same path everywhere)."""
    name = socket.gethostname() if host == "localhost" else host
    args = [
        dlperf_binary(),
        "telemetry",
        "--output",
        str(directory / f"{name}.jsonl"),
        "--interval",
        str(interval),
        # Every sampler ends when its stdin (a pipe from the sweep) closes: at stop(), or when
        # the sweep itself dies, even by SIGKILL; SSH forwards that EOF, not signals.
        "--stop-on-stdin-eof",
    ]
    if host == "localhost":
        return args
    # The remote shell splits the command line again: quoted, a path keeps its blanks.
    return ["ssh", "-o", "BatchMode=yes", host, shlex.join(args)]


class Telemetry:
    """Samplers on every node of a point (local or over SSH) for the point's duration."""

    def __init__(self, hosts: list[str], directory: Path, interval: float):
        self.procs: list[subprocess.Popen] = []
        self.logs = [directory / f"{host}.log" for host in hosts]
        for host in hosts:
            # What a sampler says (an SSH refusal, an unknown host key, a missing dlperf) goes
            # to telemetry/<host>.log, as the Slurm launcher's sampler step writes it.
            with (directory / f"{host}.log").open("ab") as err:
                self.procs.append(
                    subprocess.Popen(
                        sampler_command(host, directory, interval),
                        stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
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
        for log in self.logs:  # keep only what has something to say
            if log.exists() and log.stat().st_size == 0:
                log.unlink()


def horovod_command(cfg, nodes: int, partial: Path) -> tuple[list[str], list[str], str, str | None]:
    """`local` and `hosts`: (horovodrun's command, the point's hosts, its host list, the
    network interface it is given)."""
    if cfg.launcher == "local":
        node_hosts = ["localhost"]
        hostlist = f"localhost:{nodes * cfg.procs_per_node}"
    else:
        node_hosts = cfg.hosts[:nodes]
        hostlist = ",".join(f"{h}:{cfg.procs_per_node}" for h in node_hosts)
    # Horovod runs a job whose hosts are all this machine on loopback, and refuses a
    # --network-interface without 127.0.0.1 there: the interface only matters between nodes.
    interface = None if all(map(is_this_machine, node_hosts)) else cfg.network_interface
    cmd = launch_command(
        "horovodrun",
        hostlist,
        None,
        [*cfg.train_args, "--output", str(partial)],
        dlperf=dlperf_binary(),
        controller=cfg.controller,
        network_interface=interface,
    )
    return cmd, node_hosts, hostlist, interface


def run(cfg, nodes: int, partial: Path, log: Path) -> Launch:
    """`local` and `hosts`: horovodrun here, over this machine or over --hosts."""
    cmd, node_hosts, hostlist, interface = horovod_command(cfg, nodes, partial)
    # On one host a port free now: points, and tests beside each other, never share one.
    port = free_port() if cfg.launcher == "local" else None
    env = job_environment(
        dict(os.environ),
        {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"},
        defaults=rendezvous_environment(hostlist, interface, port),
    )
    started = time.time()
    telemetry = Telemetry(node_hosts, partial / "telemetry", cfg.telemetry_interval)
    rc = None
    try:
        # horovodrun stays in the sweep's process group: a Ctrl-C, a hangup or a kill of the
        # group reaches it as it reaches the sweep. Past --timeout or on an interrupt it gets
        # SIGTERM (it stops its ranks, 5 s each at most), SIGKILL 15 s later.
        rc = run_logged(
            cmd, str(log), env, None, cfg.timeout, grace=stop_grace("horovodrun"), own_session=False
        )
        if rc is None:
            rc = -9
            note(log, f"the point ran past --timeout {cfg.timeout} s: stopped horovodrun")
    finally:
        if rc != 0:  # ranks over SSH outlive a stopped horovodrun: stop them
            stopped = stop_stray_ranks(node_hosts, str(partial))
            if stopped:
                note(log, f"stopped ranks left running on {', '.join(stopped)}")
        telemetry.stop()
    return Launch(rc, cmd, started, {"launcher": cfg.launcher})


def stop_leftovers(cfg, nodes: int, partial: Path) -> list[str]:
    hosts = ["localhost"] if cfg.launcher == "local" else cfg.hosts[:nodes]
    return stop_stray_ranks(hosts, str(partial))


def note(log: Path, text: str) -> None:
    with log.open("a") as fh:
        fh.write(f"dlperf sweep: {text}\n")


def plan(cfg, nodes: int, partial: Path) -> list[str]:
    """What `run` would start for this point (nothing is started)."""
    return [shlex.join(horovod_command(cfg, nodes, partial)[0])]
