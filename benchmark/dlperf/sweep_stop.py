"""`dlperf sweep --stop`: end the sweep of a run id that runs on this host, as its own Ctrl-C
would (its launcher stops the ranks or cancels the batch job; the point is left to run again).

A sweep started over SSH by Ansible (benchmark.yml) outlives an ansible-playbook that is
stopped: a remote command gets no signal when its SSH client dies. The sweep's lock
(RUN/sweep.lock, held for as long as it runs) names its process; this finds it there."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import socket
import time
from pathlib import Path

import psutil

from dlperf.sweep import SweepError

STOP_WAIT_S = 120.0  # horovodrun gets 15 s before SIGKILL, a Slurm job 30 s to be cancelled
HOLDER = re.compile(r"pid (\d+) on (\S+)")


def _running(fh, lock: Path) -> bool:
    """Whether a process holds the lock FH is open on (probed without keeping it)."""
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError as exc:  # ENOLCK: an NFSv3 mount whose lock manager does not run
        raise SweepError(
            f"{lock}: cannot be locked ({exc.strerror}), so whether its sweep runs is unknown: "
            "find it with ps on the host it names and stop it with SIGTERM"
        ) from None
    fcntl.flock(fh, fcntl.LOCK_UN)
    return False


def stop_sweep(results: Path, run_id: str, wait_s: float = STOP_WAIT_S) -> tuple[bool, str]:
    """SIGTERM to the sweep of RUN_ID under RESULTS, then wait for it to end (SIGKILL after
    WAIT_S). (stopped, what was done); SweepError when it runs elsewhere or its lock names a
    process that is not a dlperf sweep."""
    lock = results / run_id / "sweep.lock"
    try:
        fh = lock.open("r+")  # NFS emulates flock with POSIX locks: LOCK_EX needs write access
    except FileNotFoundError:
        return _stop_unlocked(results, run_id, f"no sweep of it under {results}", wait_s)
    except OSError as exc:
        raise SweepError(
            f"{lock}: {exc.strerror}; run this as the user the sweep runs as"
        ) from None
    with fh:
        # A sweep that has just taken the lock writes its line a moment later.
        deadline = time.monotonic() + 5
        while True:
            if not _running(fh, lock):
                return _stop_unlocked(results, run_id, "its sweep is not running", wait_s)
            fh.seek(0)
            holder = fh.read().strip()
            named = HOLDER.fullmatch(holder)
            here = named and named[2] == socket.gethostname()
            if (named and (not here or psutil.pid_exists(int(named[1])))) or (
                time.monotonic() > deadline
            ):
                break
            time.sleep(0.2)
    if not named:
        raise SweepError(f"{lock}: held, but it names no sweep ({holder!r}); nothing stopped")
    pid, host = int(named[1]), named[2]
    if host != socket.gethostname():
        raise SweepError(
            f"--run-id {run_id}: its sweep runs on {host} (pid {pid}), not on "
            f"{socket.gethostname()}: stop it there"
        )
    try:
        proc = psutil.Process(pid)
        command = proc.cmdline()
    except psutil.Error as exc:
        raise SweepError(
            f"{lock}: held, but its holder, pid {pid}, cannot be read ({exc}); nothing stopped"
        ) from None
    if not _is_sweep(command):
        raise SweepError(
            f"{lock}: pid {pid} is not a dlperf sweep ({' '.join(command)[:200]}); nothing stopped"
        )
    # A holder that ended leaves its line until the next one writes its own: its pid may be
    # another sweep's by then.
    if not _sweeps_here(proc, command, results, run_id, unreadable=True):
        raise SweepError(
            f"{lock}: pid {pid} is a sweep of --run-id {_flag(command, '--run-id')} under "
            f"{_flag(command, '--results') or 'results'}, not of this one (the lock's holder "
            "has ended, or has not written its line yet); nothing stopped"
        )
    try:
        proc.send_signal(signal.SIGTERM)
    except psutil.NoSuchProcess:
        return False, f"--run-id {run_id}: its sweep (pid {pid}) ended: nothing to stop"
    except psutil.Error as exc:
        raise SweepError(f"--run-id {run_id}: pid {pid} cannot be signalled ({exc})") from None
    # Over when the lock is free: the sweep has ended (a process that has exited but is not yet
    # reaped by its parent still has a pid, not the lock).
    if _released(lock, wait_s):
        return True, (
            f"--run-id {run_id}: stopped its sweep (pid {pid}) and what its running point had "
            "started; the same sweep command resumes it"
        )
    with contextlib.suppress(psutil.NoSuchProcess):
        proc.kill()
    _released(lock, 30)
    return True, (
        f"--run-id {run_id}: its sweep (pid {pid}) had not ended {wait_s:.0f} s after SIGTERM: "
        "killed; its point's ranks or job are stopped when the point runs again"
    )


def _flag(command: list[str], name: str) -> str | None:
    """The value argparse would take for NAME: its last occurrence, `NAME V` or `NAME=V`."""
    value = None
    for i, arg in enumerate(command):
        if arg == name and i + 1 < len(command):
            value = command[i + 1]
        elif arg.startswith(f"{name}="):
            value = arg.partition("=")[2]
    return value


def _is_sweep(command: list[str]) -> bool:
    """`dlperf sweep ...` (the console script, or Python running it), not one of its wrappers
    (ssh, sudo) nor a --stop or --dry-run of it."""
    script = next((i for i, arg in enumerate(command[:2]) if Path(arg).name == "dlperf"), None)
    if script is None and command[1:3] == ["-m", "dlperf"]:
        script = 2
    return (
        script is not None
        and command[script + 1 : script + 2] == ["sweep"]
        and not {"--stop", "--dry-run"} & set(command)
    )


def _sweeps_here(
    proc: psutil.Process, command: list[str], results: Path, run_id: str, unreadable=False
) -> bool:
    """Whether the sweep COMMAND (of PROC) runs RUN_ID under RESULTS: its --results is read
    relative to its working directory (UNREADABLE: the answer where that cannot be read)."""
    if _flag(command, "--run-id") != run_id:
        return False
    given = Path(_flag(command, "--results") or "results")
    try:
        cwd = proc.cwd()
    except psutil.Error:
        cwd = None
    if not given.is_absolute() and not cwd:
        return unreadable  # relative to a working directory that cannot be read
    return (Path(cwd or "/") / given).resolve() == results.resolve()


def _stop_unlocked(
    results: Path, run_id: str, why: str, wait_s: float = STOP_WAIT_S
) -> tuple[bool, str]:
    """No sweep holds the lock: one may be starting (it has not taken it yet), or run where
    locks are not served. Such processes of this host, `dlperf sweep --results RESULTS
    --run-id RUN_ID`, are stopped (none has launched a point: that comes after the lock)."""
    found = [
        proc
        for proc in psutil.process_iter(["cmdline"])
        if proc.pid != os.getpid()
        and _is_sweep(proc.info["cmdline"] or [])
        and _sweeps_here(proc, proc.info["cmdline"], results, run_id)
    ]
    if not found:
        return False, f"--run-id {run_id}: {why}: nothing to stop"
    for proc in found:
        try:
            proc.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
        except psutil.Error as exc:
            raise SweepError(
                f"--run-id {run_id}: a sweep of it, pid {proc.pid}, cannot be signalled ({exc}); "
                "run this as the user the sweep runs as"
            ) from None
    deadline = time.monotonic() + wait_s
    while (alive := [p for p in found if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    pids = ", ".join(str(p.pid) for p in found)
    killed = f"; killed {len(alive)} not ended {wait_s:.0f} s after SIGTERM" if alive else ""
    return True, (
        f"--run-id {run_id}: stopped its sweep (pid {pids}), which had not started a point{killed}"
    )


def _alive(proc: psutil.Process) -> bool:
    """Running, not ended (an ended process its parent has not reaped yet is a zombie)."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _released(lock: Path, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    with lock.open("r+") as fh:
        while _running(fh, lock):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
    return True
