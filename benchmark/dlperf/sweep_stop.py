"""`dlperf sweep --stop`: end the sweep of a run id that runs on this host, as its own Ctrl-C
would (its launcher stops the ranks or cancels the batch job; the point is left to run again).

A sweep started over SSH by Ansible (benchmark.yml) outlives an ansible-playbook that is
stopped: a remote command gets no signal when its SSH client dies. The sweep's lock
(RUN/sweep.lock, held for as long as it runs) names its process; this finds it there."""

from __future__ import annotations

import contextlib
import fcntl
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
        return False, f"--run-id {run_id}: no sweep of it under {results}: nothing to stop"
    except OSError as exc:
        raise SweepError(
            f"{lock}: {exc.strerror}; run this as the user the sweep runs as"
        ) from None
    with fh:
        # A sweep that has just taken the lock writes its line a moment later.
        deadline = time.monotonic() + 5
        while True:
            if not _running(fh, lock):
                return False, f"--run-id {run_id}: its sweep is not running: nothing to stop"
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
    if "sweep" not in command or not any("dlperf" in Path(arg).name for arg in command[:3]):
        raise SweepError(
            f"{lock}: pid {pid} is not a dlperf sweep ({' '.join(command)[:200]}); nothing stopped"
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


def _released(lock: Path, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    with lock.open("r+") as fh:
        while _running(fh, lock):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
    return True
