"""`dlperf sweep`: one training point per node count, each sampled by telemetry, resumable.

Layout: RESULTS/RUN_ID/sweep.json and RESULTS/RUN_ID/<N>nodes/{result.json, mllog.txt,
train.log, telemetry/<host>.jsonl}. A point is built in a hidden ``.<N>nodes.partial`` directory
and renamed into place only when it has finished (ok or failed), so an interrupted sweep never
leaves a half-written point: on the next run completed points are skipped, failed and
interrupted ones run again.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlperf_module_utils.dlperf_job import log_tail, train_flag

from dlperf import launchers
from dlperf.launchers import Launch
from dlperf.launchers.slurm import sbatch_arg_problem
from dlperf.results import (
    Result,
    is_complete,
    launch_environment,
    put_in_place,
    write_atomic,
    write_result,
)
from dlperf.train.command import check_train_argv
from dlperf.usage import UsageError


class SweepError(Exception):
    """Bad sweep input; the message names the flag."""


@dataclass
class SweepConfig:
    nodes: list[int]
    procs_per_node: int
    launcher: str  # local | hosts | slurm
    results: Path
    run_id: str
    train_args: list[str]
    hosts: list[str] = field(default_factory=list)
    controller: str = "gloo"
    network_interface: str | None = None
    telemetry_interval: float = 1.0
    timeout: int = 24 * 3600
    quiet: bool = False
    gpus_per_node: int = 0  # slurm: GRES gpu:N per node
    sbatch_args: list[str] = field(default_factory=list)  # slurm: e.g. --partition=batch


# A run id names a directory under RESULTS on every host: benchmark.yml checks the same pattern.
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def check_run_id(run_id: str) -> str:
    if not RUN_ID.fullmatch(run_id):
        raise SweepError(
            f"--run-id {run_id!r}: start with a letter or digit and use only letters, digits, "
            "'-', '_' and '.'"
        )
    return run_id


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
        odd = [h for h in cfg.hosts if not h or ":" in h or h != h.strip()]
        if odd:
            raise SweepError(
                f"--hosts {','.join(cfg.hosts)!r}: {odd[0]!r} is not a host name (the slots come "
                "from --procs-per-node, not host:slots)"
            )
        twice = sorted({h for h in cfg.hosts if cfg.hosts.count(h) > 1})
        if twice:
            raise SweepError(
                f"--hosts {','.join(cfg.hosts)!r}: {', '.join(twice)} appears twice (a 2-node "
                "point would run on one node)"
            )
        if max(cfg.nodes) > len(cfg.hosts):
            raise SweepError(f"--nodes {max(cfg.nodes)}: only {len(cfg.hosts)} hosts in --hosts")
    if cfg.launcher not in launchers.NAMES:
        raise SweepError(f"--launcher {cfg.launcher}: choose from {', '.join(launchers.NAMES)}")
    if cfg.launcher == "slurm" and not shutil.which("sbatch"):
        raise SweepError("--launcher slurm: no sbatch on PATH (run on a Slurm login or head node)")
    if cfg.gpus_per_node < 0:
        raise SweepError(f"--gpus-per-node {cfg.gpus_per_node}: must be >= 0")
    bad = [a for a in cfg.sbatch_args if not a.startswith("--")]
    if bad:
        raise SweepError(f"--sbatch-arg {bad[0]!r}: give sbatch options as --name=value")
    overriding = sbatch_arg_problem(cfg)
    if overriding:
        raise SweepError(overriding)
    if cfg.launcher == "slurm":
        # #SBATCH lines keep a blank inside double quotes, but cannot hold both.
        for flag, value in [("--results", str(cfg.results))] + [
            ("--sbatch-arg", a) for a in cfg.sbatch_args
        ]:
            if '"' in value and any(c.isspace() for c in value):
                raise SweepError(
                    f"{flag} {value!r}: a blank and a double quote together cannot be written "
                    "into an #SBATCH line; rename it without one of them"
                )
    if "--output" in cfg.train_args:
        raise SweepError("--output is set by the sweep for each point; do not pass it")
    try:
        check_train_argv(cfg.train_args)
    except UsageError as exc:
        raise SweepError(str(exc)) from None
    if not (math.isfinite(cfg.telemetry_interval) and cfg.telemetry_interval > 0):
        raise SweepError(f"--telemetry-interval {cfg.telemetry_interval}: must be > 0")
    if cfg.timeout <= 0:
        raise SweepError(f"--timeout {cfg.timeout}: must be > 0 (seconds a point may run)")


def point_dir(root: Path, nodes: int) -> Path:
    return root / f"{nodes}nodes"


def _launch_record(launch: Launch, result_file: Path) -> dict:
    """What the sweep adds to a point's provenance: the launcher, its job, and the time from
    asking it to start to the first timed step (mllog's run_start, which rank 0 records)."""
    record = {"launcher": launch.details.get("launcher", "horovodrun"), **launch.details}
    record["requested_at"] = round(launch.started_at, 3)
    try:
        run_start_ms = json.loads(result_file.read_text())["provenance"]["run_start_ms"]
        record["launch_to_run_start_s"] = round(run_start_ms / 1000 - launch.started_at, 3)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return record


def ran_out(result: dict) -> bool:
    """A time-to-accuracy run that used up its epochs below the target: its result is whole and
    stays ok, without a time to accuracy, whatever its launcher's exit status (rank 0 exits 3;
    horovodrun passes that on as 1, srun as 137 when Slurm kills a rank still ending). Run
    again, it would train all its epochs again to the same end."""
    return (
        result.get("status") == "ok"
        and result.get("mode") == "tta"
        and result.get("reached_target") is False
    )


def run_point(cfg: SweepConfig, root: Path, nodes: int) -> dict:
    final, partial = point_dir(root, nodes), root / f".{nodes}nodes.partial"
    if partial.exists():
        stopped = launchers.stop_leftovers(cfg, nodes, partial)
        if stopped:
            print(
                f"dlperf sweep: {nodes} node(s): stopped ranks of an earlier attempt still "
                f"running on {', '.join(stopped)}",
                file=sys.stderr,
            )
        if is_complete(partial):
            # Interrupted after its ranks finished (while the samplers stopped, or before the
            # rename): the run is whole and is kept, not trained again.
            msg = f"{nodes} node(s): the earlier attempt had finished: kept, not run again"
            print(f"dlperf sweep: {msg}", file=sys.stderr)
            stored = json.loads((partial / "result.json").read_text())
            stored.setdefault("provenance", {})["launch"] = {
                "note": "the sweep was interrupted after this run had finished; its launch "
                "details were not recorded"
            }
            write_atomic(partial / "result.json", stored)
            put_in_place(root, nodes, partial, final)
            return stored
    try:
        shutil.rmtree(partial)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise SweepError(
            f"{partial}: an earlier attempt's files cannot be removed ({exc}); a process still "
            "holding them (a rank or sampler of that attempt, NFS's .nfs files) must end first"
        ) from exc
    (partial / "telemetry").mkdir(parents=True)
    log = partial / "train.log"
    launch = launchers.run(cfg, nodes, partial, log)
    result_file = partial / "result.json"
    previous = json.loads(result_file.read_text()) if result_file.exists() else {}
    if not result_file.exists() or (launch.rc != 0 and not ran_out(previous)):
        write_result(
            result_file,
            Result(
                status="failed",
                mode=train_flag(cfg.train_args, "--mode", "throughput"),
                backend=train_flag(cfg.train_args, "--backend", "mxnet"),
                world_size=nodes * cfg.procs_per_node,
                nodes=nodes,
                wall_time_s=time.time() - launch.started_at,
                error=(previous.get("error") or "")
                + f"\nlauncher rc={launch.rc}; log tail:\n{log_tail(str(log))}",
                hyperparameters=previous.get("hyperparameters", {}),
                provenance=previous.get("provenance", {"command": launch.command}),
            ),
        )
    stored = json.loads(result_file.read_text())
    stored.setdefault("provenance", {})["launch"] = _launch_record(launch, result_file)
    write_atomic(result_file, stored)
    put_in_place(root, nodes, partial, final)
    return stored


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that launchers stop what they started."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum


def _raise_interrupted(signum, frame):
    # A hangup often comes twice (the kernel's to the foreground group, the shell's to its
    # jobs): a second signal must not cut short the clean-up the first one started.
    for again in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(again, signal.SIG_IGN)
    raise Interrupted(signum)


def hold_run(root: Path, run_id: str):
    """An exclusive lock on RUN/sweep.lock for as long as the returned file stays open: a second
    sweep of the same run id (an Ansible rerun while the first still runs on the node) would
    remove the running point's directory under it. The lock file names its holder."""
    import fcntl

    # Read and written in place, not opened to append: an append-mode write lands after the last
    # holder's line whatever the position, and the line must replace it.
    fh = os.fdopen(os.open(root / "sweep.lock", os.O_RDWR | os.O_CREAT, 0o644), "r+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "another process"
        fh.close()
        raise SweepError(
            f"--run-id {run_id}: another sweep of it is running ({holder}); wait for it, or stop "
            "it (it resumes later with the same run id)"
        ) from None
    except OSError as exc:  # ENOLCK: an NFSv3 mount whose lock manager does not run
        print(
            f"dlperf sweep: {root / 'sweep.lock'}: cannot be locked ({exc.strerror}); going on "
            "without the guard against a second sweep of this run id",
            file=sys.stderr,
        )
    fh.seek(0)  # written over the last holder's line, then cut: never read empty
    fh.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    fh.truncate()
    fh.flush()
    return fh


def run_sweep(cfg: SweepConfig, progress=None) -> dict[int, str]:
    validate(cfg)
    # Only a run needs the launcher itself; a plan (--dry-run) is made anywhere. Looked for
    # where the launcher runs it from: this Python's bin directory first, then PATH.
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    if cfg.launcher in ("local", "hosts") and not shutil.which("horovodrun", path=search):
        raise SweepError(
            f"--launcher {cfg.launcher}: no horovodrun beside {sys.executable} or on PATH "
            "(install Horovod into this venv, as the dl_stack role does)"
        )
    root = cfg.results / cfg.run_id
    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / "sweep.lock").open("a").close()
    except OSError as exc:
        raise SweepError(
            f"--results {cfg.results}: cannot write the sweep's directory {root} "
            f"({exc.strerror or exc}); give a results directory you can write"
        ) from None
    with hold_run(root, cfg.run_id):
        return _run_held(cfg, root, progress)


def sweep_settings(cfg: SweepConfig) -> dict:
    """What makes two sweeps of a run id the same sweep (sweep.json's settings)."""
    settings = {
        k: v for k, v in asdict(cfg).items() if k not in ("results", "quiet", "nodes", "timeout")
    }
    for default_only in ("gpus_per_node", "sbatch_args"):  # sweeps stored before these existed
        if not settings[default_only]:
            del settings[default_only]
    return json.loads(json.dumps(settings))


def stored_sweep(cfg: SweepConfig, root: Path) -> dict:
    """sweep.json as this run writes it: CFG's settings, the node counts ROOT's sweep holds
    with CFG's, and the launch environment (NCCL_*, HOROVOD_*, ...) the run id's first sweep
    had. Refused when ROOT holds a sweep with other settings; a changed environment is said
    on stderr, since the points already complete were measured under the old one."""
    settings, environment = sweep_settings(cfg), launch_environment()
    stored = root / "sweep.json"
    if not stored.exists():
        return {"settings": settings, "nodes": cfg.nodes, "environment": environment}
    try:
        before = json.loads(stored.read_text())
    except (OSError, ValueError) as exc:
        before = exc
    if not isinstance(before, dict):
        why = before if isinstance(before, Exception) else f"a JSON {type(before).__name__}"
        raise SweepError(
            f"{stored} is not a sweep's record ({why}); move it away, or use a new run id"
        )
    if before.get("settings") != settings:
        raise SweepError(
            f"--run-id {cfg.run_id}: {root} holds a sweep with other settings; use a new run id"
        )
    first = before.get("environment", environment)
    changed = [
        f"{k}={environment.get(k, '(unset)')} (was {first.get(k, '(unset)')})"
        for k in sorted(set(first) | set(environment))
        if first.get(k) != environment.get(k)
    ]
    if changed:
        print(
            f"dlperf sweep: --run-id {cfg.run_id}: the launch environment differs from its first "
            f"sweep's: {', '.join(changed)}; the points already complete ran under the old one",
            file=sys.stderr,
        )
    nodes = sorted(set(before.get("nodes", [])) | set(cfg.nodes))
    return {"settings": settings, "nodes": nodes, "environment": first}


def _run_held(cfg: SweepConfig, root: Path, progress) -> dict[int, str]:
    write_atomic(root / "sweep.json", stored_sweep(cfg, root))
    # SIGTERM (a batch system's, systemd's, Ansible's timeout) stops the running point as
    # Ctrl-C does: its launcher cancels what it started; the point is left to run again.
    # SIGHUP (the terminal or SSH session the sweep ran from going away) likewise.
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is signal.SIG_IGN:
                continue  # `nohup dlperf sweep`: the user asked it to outlive the session
            previous[signum] = signal.signal(signum, _raise_interrupted)
    try:
        return _run_points(cfg, root, progress)
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)


def plan_sweep(cfg: SweepConfig) -> list[str]:
    """The sweep's points and what each would launch, as lines; nothing is started or written
    (`dlperf sweep --dry-run`, and benchmark.yml in check mode)."""
    validate(cfg)
    root = cfg.results / cfg.run_id
    stored_sweep(cfg, root)  # a run id holding other settings is refused here too
    lines = [
        f"sweep {cfg.run_id}: {cfg.launcher} launcher, nodes {','.join(map(str, cfg.nodes))}, "
        f"{cfg.procs_per_node} process(es) per node, results in {root}"
    ]
    for n in cfg.nodes:
        if is_complete(point_dir(root, n)):
            lines.append(f"{n} node(s): complete, kept")
            continue
        first, *rest = launchers.plan(cfg, n, root / f".{n}nodes.partial")
        lines += [f"{n} node(s): {first}", *rest]
    return lines


def _run_points(cfg: SweepConfig, root: Path, progress) -> dict[int, str]:
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
