"""A real one-node Slurm cluster on this machine for the launcher's tests: munged, slurmctld and
slurmd from the distribution's packages (scripts/bootstrap.sh installs them), each started in
the foreground with a configuration, key, sockets and ports of its own under a temporary
directory, and stopped again by pid. Nothing of the system's own munge or Slurm is used."""

from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

CONF = """\
ClusterName=dlperftest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
ReturnToService=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""

DAEMONS = ("munged", "slurmctld", "slurmd")


def _die_with_parent() -> None:
    """In the daemon before it execs: SIGTERM when the process that started it dies, so a
    killed test run leaves no daemon behind (stop() is the normal way out)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalSlurm:
    def __init__(self, root: Path):
        missing = [d for d in (*DAEMONS, "sbatch", "srun") if not shutil.which(d)]
        if missing:
            raise RuntimeError(f"{', '.join(missing)} not installed: run scripts/bootstrap.sh")
        self.root = root
        self.host = socket.gethostname().split(".")[0]
        self.conf = root / "slurm.conf"
        self.env = dict(os.environ, SLURM_CONF=str(self.conf))
        self.procs: list[subprocess.Popen] = []

    def start(self) -> LocalSlurm:
        root = self.root
        for sub in ("state", "spool", "pmix"):
            (root / sub).mkdir(parents=True)
        key = root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.conf.write_text(
            CONF.format(
                host=self.host,
                root=root,
                ctld_port=_port(),
                slurmd_port=_port(),
                cpus=os.cpu_count(),
            )
        )
        # PMIx's per-step directories under this instance (by default /tmp/spmix_appdir_<uid>_
        # <job>.<step>): job ids restart at 1 in every instance, and a directory an earlier
        # one left would fail that step's launch ("File exists").
        (root / "mpi.conf").write_text(f"PMIxCliTmpDirBase={root}/pmix\n")
        munge = [
            "munged",
            "--foreground",
            "--force",
            f"--socket={root}/munge.socket",
            f"--key-file={key}",
            f"--pid-file={root}/munged.pid",
            f"--log-file={root}/munged.log",
            f"--seed-file={root}/munged.seed",
        ]
        self.procs.append(self._spawn(munge, "munged"))
        self._wait(lambda: (root / "munge.socket").exists(), "munged")
        self.procs.append(self._spawn(["slurmctld", "-D", "-i"], "slurmctld"))
        self.procs.append(self._spawn(["slurmd", "-D"], "slurmd"))
        self._wait(lambda: self.node_state() == "idle", "the node to register idle")
        return self

    def restart_controller(self) -> None:
        """slurmctld stopped and started again with its state cleared: every job's record gone,
        as MinJobAge's purge of an ended job or a controller's lost state leaves it. Job ids
        start again at 1, and so do PMIx's per-step directories (emptied here too)."""
        ctld = self.procs[1]
        ctld.terminate()
        ctld.wait(timeout=30)
        for sub in ("state", "pmix"):
            shutil.rmtree(self.root / sub)
            (self.root / sub).mkdir()
        self.procs[1] = self._spawn(["slurmctld", "-D", "-i", "-c"], "slurmctld")
        self._wait(lambda: self.node_state() == "idle", "the node to register idle again")

    def _spawn(self, cmd: list[str], name: str) -> subprocess.Popen:
        log = (self.root / f"{name}.out").open("a")
        return subprocess.Popen(
            cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )

    def _wait(self, ready, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.5)
        logs = "\n".join(
            f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted(self.root.glob("*.out"))
        )
        raise RuntimeError(f"local Slurm: no {what} after {timeout:.0f} s\n{logs}")

    def run(self, *cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60)

    def node_state(self) -> str:
        out = self.run("sinfo", "--noheader", "--Node", "--format=%t")
        return out.stdout.strip() if out.returncode == 0 else ""

    def drained(self, within: float) -> list[str]:
        """Wait up to WITHIN seconds for the queue to empty (a job that has ended stays
        COMPLETING until slurmd has reported its last process gone); "ID STATE" of what is
        still there, nothing when it emptied."""
        deadline = time.monotonic() + within
        while True:
            left = self.run("squeue", "--noheader", "--format=%i %T").stdout.splitlines()
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.5)

    def stop(self) -> None:
        # Jobs a failed test left running first: their ranks run under slurmstepd, which
        # outlives slurmd by design and would keep training on the machine's cores.
        if self.procs and self.procs[-1].poll() is None:
            self.run("scancel", "--full", f"--user={pwd.getpwuid(os.getuid()).pw_name}")
            self.drained(within=30)
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
