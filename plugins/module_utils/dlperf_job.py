# Building the launch command of a distributed `dlperf train` job and reading its result.
# Pure Python (no Ansible imports) so `dlperf sweep` can build the same command.
from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time


def total_slots(hosts: str) -> int:
    total = 0
    for entry in hosts.split(","):
        name, _sep, slots = entry.strip().rpartition(":")
        if not name or not slots.isdigit() or int(slots) < 1:
            raise ValueError(f"host entry {entry!r} is not HOST:SLOTS")
        total += int(slots)
    return total


def launch_command(
    launcher: str,
    hosts: str,
    np: int | None,
    train_args: list[str],
    dlperf: str = "dlperf",
    controller: str = "gloo",
    network_interface: str | None = None,
    start_timeout: int = 300,
    extra_launcher_args: list[str] | None = None,
    forward_env: list[str] | None = None,
) -> list[str]:
    """The command that starts a `dlperf train` job. mpirun passes ranks on other hosts only
    the variables it is told to (-x): PATH, LD_LIBRARY_PATH, the rendezvous and FORWARD_ENV
    (the job's environment: interfaces, timeouts, NCCL_* settings)."""
    slots = total_slots(hosts)
    np = np or slots
    if np > slots:
        raise ValueError(f"np={np} exceeds the {slots} slots in hosts={hosts}")
    extra = list(extra_launcher_args or [])
    if launcher == "horovodrun":
        cmd = [
            "horovodrun",
            "-np",
            str(np),
            "-H",
            hosts,
            f"--{controller}",
            "--start-timeout",
            str(start_timeout),
        ]
        if network_interface:
            cmd += ["--network-interface", network_interface]
        cmd += extra
    elif launcher == "mpirun":
        cmd = [
            "mpirun",
            "-np",
            str(np),
            "--host",
            hosts,
            "--bind-to",
            "none",
            "--map-by",
            "slot",
        ]
        names = ["PATH", "LD_LIBRARY_PATH", "MASTER_ADDR", "MASTER_PORT"]
        names += sorted(set(forward_env or []) - set(names))
        for name in names:
            cmd += ["-x", name]
        if network_interface:
            cmd += [
                "--mca",
                "btl_tcp_if_include",
                network_interface,
                "--mca",
                "oob_tcp_if_include",
                network_interface,
            ]
        cmd += extra
    elif launcher == "srun":
        cmd = srun_command(hosts, np, train_args) + extra
    else:
        raise ValueError(f"unknown launcher {launcher!r} (horovodrun, mpirun or srun)")
    return [*cmd, dlperf, "train", *train_args]


def train_flag(train_args: list[str], flag: str, default: str) -> str:
    """The value given to FLAG in a `dlperf train` argument list (``--flag value`` or
    ``--flag=value``; the last one given, as argparse takes it), else DEFAULT."""
    value = default
    for i, arg in enumerate(train_args):
        if arg == flag and i + 1 < len(train_args):
            value = train_args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1 :]
    return value


def srun_mpi(train_args: list[str]) -> str:
    """srun's --mpi for a `dlperf train` job: Horovod (the mxnet engine) joins through MPI over
    PMIx; PyTorch ranks read SLURM_PROCID/SLURM_NTASKS and need no PMI."""
    return "pmix" if train_flag(train_args, "--backend", "mxnet") == "mxnet" else "none"


def srun_command(hosts: str, np: int, train_args: list[str]) -> list[str]:
    """srun over exactly the hosts of HOST:SLOTS,... (a job of its own, or a step inside the
    allocation it runs in), the same number of tasks on each (srun_mpi: how ranks join)."""
    entries = [entry.strip().rpartition(":")[::2] for entry in hosts.split(",")]  # (name, slots)
    per_node = sorted({int(slots) for _name, slots in entries})
    if len(per_node) != 1:
        raise ValueError(
            f"srun starts the same number of tasks on every node; hosts={hosts} has "
            f"{', '.join(map(str, per_node))} (give every host the same slots)"
        )
    return [
        "srun",
        f"--nodes={len(entries)}",
        f"--nodelist={','.join(name for name, _slots in entries)}",
        f"--ntasks={np}",
        f"--ntasks-per-node={per_node[0]}",
        f"--mpi={srun_mpi(train_args)}",
        "--kill-on-bad-exit=1",
    ]


# Gloo gives up on a peer after 30 s, shorter than a rank's first steps (oneDNN/cuDNN kernel
# selection, an import from NFS) take on a loaded or emulated node; an environment value wins.
GLOO_TIMEOUT_DEFAULT = {"HOROVOD_GLOO_TIMEOUT_SECONDS": "300"}
MASTER_PORT_DEFAULT = 29500  # PyTorch's default rendezvous port
LOOPBACK = ("localhost", "127.0.0.1")


def rendezvous_environment(hosts: str, network_interface: str | None = None, port=None) -> dict:
    """Where a framework's own process group meets (the PyTorch engine's; Horovod ignores it):
    the first host of HOST:SLOTS,... is rank 0's. With an interface, Gloo's and NCCL's sockets
    use the launch network too."""
    first = hosts.split(",")[0].strip().rpartition(":")[0]
    env = {
        "MASTER_ADDR": "127.0.0.1" if first in LOOPBACK else first,
        "MASTER_PORT": str(port or MASTER_PORT_DEFAULT),
    }
    if network_interface:
        env.update(GLOO_SOCKET_IFNAME=network_interface, NCCL_SOCKET_IFNAME=network_interface)
    return env


def job_environment(base: dict, extra: dict | None = None, defaults: dict | None = None) -> dict:
    """The environment of a launched job: the Gloo timeout and DEFAULTS unless BASE sets them,
    BASE, then EXTRA."""
    env = {**GLOO_TIMEOUT_DEFAULT, **(defaults or {}), **base}
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def stop_grace(launcher: str) -> float:
    """Seconds from SIGTERM to SIGKILL when LAUNCHER's job is stopped: srun waits for its step
    to end (Slurm's KillWait, 30 s by default, plus 2 s) and must not be killed before it has
    ended its job; horovodrun and mpirun pass SIGTERM on to their ranks at once."""
    return 40 if launcher == "srun" else 15


def run_logged(
    cmd: list[str],
    log: str,
    env: dict,
    cwd: str | None,
    timeout: int,
    grace: float,
    own_session: bool = True,
) -> int | None:
    """Run CMD with stdout and stderr into LOG; its return code, or None when it ran past
    TIMEOUT seconds and was stopped: SIGTERM first, which horovodrun, srun and mpirun pass on to
    the ranks (srun also ends its job), then SIGKILL after GRACE seconds (stop_grace gives each
    launcher's). In a session of its own (OWN_SESSION)
    the signals go to CMD's whole process group; otherwise CMD stays in the caller's group and
    gets what the caller's terminal sends (Ctrl-C, a hangup) and a group kill, as the caller
    does. An exception while it waits (Ctrl-C, or a SIGTERM the caller raises) stops it the same
    way before it propagates."""
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd,
            start_new_session=own_session,
        )  # fmt: skip
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc, grace, own_session)
            return None
        except BaseException:
            stop(proc, grace, own_session)
            raise


def stop(proc: subprocess.Popen, grace: float, group: bool) -> None:
    """SIGTERM to PROC (its process group when GROUP), SIGKILL to what is left after GRACE s."""

    def send(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(proc.pid, sig)
            elif proc.poll() is None:
                proc.send_signal(sig)

    try:
        send(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    finally:
        send(signal.SIGKILL)
        proc.wait()


def host_names(hosts: str) -> list[str]:
    """The host names of HOST:SLOTS,..., each once, in order."""
    return list(dict.fromkeys(e.strip().rpartition(":")[0] for e in hosts.split(",")))


@functools.lru_cache(maxsize=1)
def _names_of_this_machine() -> frozenset[str]:
    name = socket.gethostname()
    return frozenset(
        n.lower() for n in (*LOOPBACK, "::1", name, name.split(".")[0], socket.getfqdn())
    )


def is_this_machine(host: str) -> bool:
    return host.lower() in _names_of_this_machine()


def _ere(text: str) -> str:
    """TEXT as a POSIX extended regular expression that matches it literally."""
    return re.sub(r"([.[\]()*+?{}|^$\\])", r"\\\1", text)


def rank_pattern(output: str, dlperf: str = "dlperf") -> str:
    """An extended regular expression (pgrep -f) for the command lines of the `dlperf train`
    ranks that write to OUTPUT, started as `dlperf` or as DLPERF (a path, or a wrapper)."""
    names = sorted({"dlperf", _ere(os.path.basename(dlperf))})
    return f"({'|'.join(names)}) train .*--output {_ere(output)}( |$)"


def _on_host(host: str, argv: list[str]) -> int:
    """ARGV's exit status on HOST (here, or over SSH); -1 when it could not be asked."""
    if not is_this_machine(host):
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", host, shlex.join(argv)]
    try:
        return subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False
        ).returncode
    except (OSError, subprocess.TimeoutExpired):
        return -1


def stop_stray_ranks(
    hosts: list[str], output: str, dlperf: str = "dlperf", grace: float = 10
) -> list[str]:
    """End the `dlperf train` ranks writing to OUTPUT that outlived their launcher on HOSTS;
    the hosts where some were found. A rank that horovodrun or mpirun started over SSH does
    not get a signal when the SSH client is killed: it trains on, holding its GPUs and writing
    into the point's directory, until it next writes to its closed output. SIGTERM first; after
    GRACE seconds (sooner where none is left) SIGKILL on every host, which also ends a rank
    whose remote shell had not started it yet at the first look."""
    pattern = rank_pattern(output, dlperf)
    hosts = list(dict.fromkeys(hosts))
    found = {h for h in hosts if _on_host(h, ["pkill", "-TERM", "-f", pattern]) == 0}
    deadline = time.monotonic() + grace
    left = set(found)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = {h for h in left if _on_host(h, ["pgrep", "-f", pattern]) == 0}
    found |= {h for h in hosts if _on_host(h, ["pkill", "-KILL", "-f", pattern]) == 0}
    return [h for h in hosts if h in found]


def read_result(output: str) -> dict | None:
    """OUTPUT's result.json, or None when there is none or it is not a result (not an object)."""
    path = os.path.join(output, "result.json")
    try:
        with open(path) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def raise_on_termination() -> None:
    """SIGTERM and SIGHUP raise (as SystemExit) instead of ending this process at once, so that
    a module stopped by Ansible (a timeout, the controller going away) stops its job on the way
    out; a launcher in a session of its own gets no signal of the caller's otherwise."""

    def handler(signum, _frame):
        # a second signal (a hangup often comes twice) must not cut the clean-up short
        for again in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(again, signal.SIG_IGN)
        raise SystemExit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def log_tail(path: str, lines: int = 40) -> str:
    """Last lines of a job log (for failure messages); empty when there is no log."""
    try:
        with open(path, errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
    except OSError:
        return ""


def summarise(result: dict) -> dict:
    keys = (
        "status",
        "mode",
        "backend",
        "precision",
        "world_size",
        "nodes",
        "throughput_img_per_s",
        "throughput_img_per_s_per_worker",
        "time_to_accuracy_s",
        "epochs",
        "top1",
        "reached_target",
    )
    return {k: result.get(k) for k in keys}
