"""The ``slurm`` launcher: one batch job per point (sbatch, then scontrol every second until it
ends; time in the queue is not run time), srun starting one sampler per allocated node and the
ranks (PMIx for Horovod's MPI, SLURM_* for PyTorch); scancel on interrupt."""

from __future__ import annotations

import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from dlperf_module_utils.dlperf_job import job_environment, srun_mpi

from dlperf.launchers.common import INTERRUPTS, Launch, dlperf_binary
from dlperf.launchers.slurm_jobs import (
    FINAL_STATES,
    PURGED,
    WAITING_STATES,
    accounted_state,
    cancel,
    exit_status,
    job_state,
    never_starts,
)
from dlperf.results import is_complete, write_bytes_atomic

# The batch script of one point. srun starts a sampler on every allocated node (sharing the
# job's CPUs with --overlap) reading a FIFO this script holds open, then the ranks; closing the
# FIFO when training ends gives every sampler end-of-input, as the hosts launcher's SSH pipes
# do, and they stop after their last sample.
BATCH_SCRIPT = """\
#!/bin/bash
{directives}
# Written by `dlperf sweep --launcher slurm` for one point of sweep {run_id}.
set -u
export PATH={bindir}:$PATH
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
# PyTorch's rank 0 listens on MASTER_ADDR: a port free there, picked here (the batch script
# runs on the allocation's first node).
MASTER_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0))
print(s.getsockname()[1])')
export MASTER_ADDR MASTER_PORT
echo "slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST ($SLURM_NTASKS tasks)"
stop=$(mktemp -u "${{TMPDIR:-/tmp}}/dlperf-telemetry.XXXXXX")
mkfifo -m 0600 "$stop"
srun --overlap --mpi=none --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --input=all \\
  --kill-on-bad-exit=0 --output={telemetry}/telemetry-%N.log \\
  bash -c 'exec "$0" telemetry --output "$1/$SLURMD_NODENAME.jsonl" --interval "$2" \\
    --stop-on-stdin-eof' {dlperf} {telemetry} {interval} <"$stop" &
telemetry=$!
exec 3>"$stop"
rm -f "$stop"
{ranks}
rc=$?
exec 3>&-
for _ in $(seq 60); do kill -0 "$telemetry" 2>/dev/null || break; sleep 1; done
kill -TERM "$telemetry" 2>/dev/null
wait "$telemetry"
exit $rc
"""


def job_name(cfg, nodes: int) -> str:
    return f"dlperf-{cfg.run_id}-{nodes}n"


def slurm_directives(cfg, nodes: int, partial: Path) -> list[str]:
    minutes = max(1, math.ceil(cfg.timeout / 60))
    lines = [
        f"--job-name={job_name(cfg, nodes)}",
        f"--nodes={nodes}",
        f"--ntasks-per-node={cfg.procs_per_node}",
        "--exclusive",
        # Slurm requeues a batch job whose node failed (JobRequeue=1, its default) and runs it
        # again into the same directory, its two runs timed as one point: the point fails
        # instead, and a resumed sweep runs it again.
        "--no-requeue",
        f"--time={minutes}",
        f"--output={partial / 'train.log'}",
        "--open-mode=append",
    ]
    if cfg.gpus_per_node > 0:
        lines.append(f"--gres=gpu:{cfg.gpus_per_node}")
    return lines + cfg.sbatch_args


# Options that would undo what the batch script sets without setting it themselves: a task
# count other than nodes x --procs-per-node, stderr out of the train.log a failure is read from,
# a requeue, a job on another cluster than the one scontrol and scancel answer for.
SBATCH_UNDOING = {
    "--ntasks": "it would undo --nodes and --procs-per-node, which the point's batch script "
    "relies on",
    "--error": "it would undo train.log, which the point's batch script relies on",
    "--requeue": "a requeued point runs again into the same directory, its two runs timed as "
    "one (a failed point is run again by resuming the sweep)",
    "--clusters": "the sweep follows and cancels its jobs on the cluster it runs on; run it on "
    "a login node of that cluster",
}
SBATCH_UNDOING["--cluster"] = SBATCH_UNDOING["--clusters"]  # sbatch takes either


def sbatch_arg_problem(cfg) -> str | None:
    """Why one of the sweep's --sbatch-arg cannot be given, or None: an option the batch script
    sets itself (a later #SBATCH line would win over it silently), or one that undoes it."""
    own = {d.split("=", 1)[0] for d in slurm_directives(replace(cfg, sbatch_args=[]), 1, Path("p"))}
    for arg in cfg.sbatch_args:
        name = arg.split("=", 1)[0]
        if name in own:
            return (
                f"--sbatch-arg {arg!r}: the point's batch script sets {name} itself (from "
                "--nodes, --procs-per-node, --gpus-per-node, --timeout and the point's "
                "directory); give the sweep's flag instead"
            )
        if name in SBATCH_UNDOING:
            return f"--sbatch-arg {arg!r}: {SBATCH_UNDOING[name]}"
        # sbatch takes an unambiguous abbreviation of a long option (getopt_long)
        meant = sorted(o for o in own | SBATCH_UNDOING.keys() if o.startswith(name))
        if meant:
            return (
                f"--sbatch-arg {arg!r}: sbatch would read it as {' or '.join(meant)}, which "
                "cannot be given; give sbatch options by their full names"
            )
    return None


def sbatch_quote(directive: str) -> str:
    """An `--name=value` option as an #SBATCH line carries it: sbatch splits those lines at
    blanks unless a value is in double quotes (which it removes). sweep.validate refuses a value
    with both a blank and a double quote."""
    name, sep, value = directive.partition("=")
    if sep and any(c.isspace() for c in value):
        return f'{name}="{value}"'
    return directive


def srun_ranks(cfg, partial: Path) -> str:
    """The batch script's step that starts the ranks."""
    train = [dlperf_binary(), "train", *cfg.train_args, "--output", str(partial)]
    return f"srun --mpi={srun_mpi(cfg.train_args)} --kill-on-bad-exit=1 {shlex.join(train)}"


def batch_script(cfg, nodes: int, partial: Path) -> str:
    return BATCH_SCRIPT.format(
        directives="\n".join(
            f"#SBATCH {sbatch_quote(d)}" for d in slurm_directives(cfg, nodes, partial)
        ),
        run_id=cfg.run_id,
        bindir=shlex.quote(str(Path(sys.executable).parent)),
        telemetry=shlex.quote(str(partial / "telemetry")),
        dlperf=shlex.quote(dlperf_binary()),
        interval=cfg.telemetry_interval,
        ranks=srun_ranks(cfg, partial),
    )


JOB_ID_FILE = "slurm_job_id"  # in the point's directory: the job an attempt submitted
POLL_S = 1.0  # sbatch --wait backs off to 32 s between looks: too coarse for minute-long points
# Slurm ends a job at its --time (the sweep's --timeout). A job seen running (or not seen at all:
# a controller that stops answering) this long past it is given up on and cancelled.
GRACE_S = 600.0


def run(cfg, nodes: int, partial: Path, log: Path) -> Launch:
    """One batch job per point, submitted with sbatch and followed until it ends."""
    script = partial / "job.sh"
    script.write_text(batch_script(cfg, nodes, partial))
    # The script's directives are given on the command line too: sbatch lets its input
    # environment variables (SBATCH_TIMELIMIT, SBATCH_REQUEUE, ...) override #SBATCH lines, and
    # the command line override those.
    cmd = ["sbatch", "--parsable", *slurm_directives(cfg, nodes, partial), str(script)]
    log.touch()
    # The job inherits this environment (sbatch --export=ALL). With an interface, MPI's TCP
    # transport, Gloo and NCCL's sockets stay on the launch network, as horovodrun's
    # --network-interface keeps them for the other launchers.
    iface = cfg.network_interface
    defaults = (
        {"OMPI_MCA_btl_tcp_if_include": iface, "GLOO_SOCKET_IFNAME": iface}
        | {"NCCL_SOCKET_IFNAME": iface}
        if iface
        else {}
    )
    env = job_environment(dict(os.environ), defaults=defaults)
    started = time.time()
    # An interrupt while sbatch runs would lose a job that is already queued (or running) with
    # no id to cancel it by: Ctrl-C and SIGTERM are held until sbatch has answered, then
    # delivered inside the loop below, which cancels the job. Python's handlers run in the main
    # thread whichever thread the signal reaches (a progress display's refresh thread), which a
    # signal mask, the main thread's alone, could not ensure.
    held: list[int] = []
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for s in INTERRUPTS:
            previous[s] = signal.signal(s, lambda signum, _frame: held.append(signum))
    try:
        # In a session of its own: a Ctrl-C at the terminal goes to the whole foreground process
        # group, and an sbatch killed after slurmctld queued the job would take its id along.
        submit = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=300, check=False,
            start_new_session=True,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        submit = subprocess.CompletedProcess(
            cmd, 1, "", f"no answer within 300 s (a job named {job_name(cfg, nodes)} may "
            "still be queued: squeue --name= finds it)",
        )  # fmt: skip
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    job_id = submit.stdout.strip().split(";")[0]  # JOBID[;CLUSTER]
    details: dict = {"launcher": "slurm", "job_id": job_id or None}
    if submit.returncode != 0 or not job_id.isdigit():
        with log.open("a") as fh:
            fh.write(f"sbatch rc={submit.returncode}: {submit.stderr.strip()}\n")
        for signum in held[:1]:
            signal.raise_signal(signum)  # the interrupt, now that nothing is left behind
        return Launch(submit.returncode or 1, cmd, started, details)
    try:
        # Kept in the point's directory: a sweep killed without its clean-up (SIGKILL, the OOM
        # killer) leaves the job running, and the next attempt cancels it by this id.
        try:
            write_bytes_atomic(partial / JOB_ID_FILE, f"{job_id}\n".encode())
        except OSError as exc:
            with log.open("a") as fh:
                fh.write(f"dlperf sweep: slurm job {job_id}: its id not kept ({exc})\n")
        for signum in held[:1]:
            signal.raise_signal(signum)  # runs the restored handler: raises here
        state = follow_job(job_id, cfg.timeout + GRACE_S, log, details)
    except BaseException:  # Ctrl-C, SIGTERM (the sweep raises): the job goes with the sweep
        cancel(job_id)
        raise
    if state.get("JobState") == PURGED:
        ended = accounted_state(job_id)
        if ended.get("JobState") in FINAL_STATES:
            state = state | ended
    details.update(
        job_state=state.get("JobState"),
        exit_code=state.get("ExitCode"),
        nodelist=state.get("NodeList"),
    )
    rc = exit_status(state)
    if state.get("JobState") == PURGED:
        rc = 0 if is_complete(partial) else 1
        with log.open("a") as fh:
            fh.write(
                f"dlperf sweep: slurm job {job_id} is no longer known to Slurm (purged from "
                "slurmctld MinJobAge after it ended, or lost with the controller's state) and "
                "sacct has no record of its end: its result file decides, "
                f"{'a finished run' if rc == 0 else 'none of a finished run'}\n"
            )
    return Launch(rc, cmd, started, details)


def follow_job(job_id: str, limit_s: float, log: Path, details: dict) -> dict:
    """Poll the job until it ends; its last state. Time in the queue (WAITING_STATES) is not
    counted against LIMIT_S: a busy partition holds a point as long as it must. Each reason it
    waits for goes to the point's log, the time to its start to DETAILS (queued_s). A job seen
    running, or not seen since, for longer than LIMIT_S is cancelled and said so in the log; one
    slurmctld no longer knows has ended (JobState PURGED: run() asks sacct how)."""
    submitted = last = time.monotonic()
    counted = 0.0
    state: dict = {}
    said = None
    gone = 0
    while True:
        answer = job_state(job_id)
        # Said twice in a row, a second apart: not a controller's passing answer. The job has
        # ended (run() asks sacct how).
        gone = gone + 1 if answer.get("JobState") == PURGED else 0
        if gone >= 2:
            return state | answer
        if gone:
            answer = {}
        now = time.monotonic()
        # Time the controller does not answer (overloaded, restarting) counts as running: a
        # controller silent for --timeout plus GRACE_S is not waited on any longer.
        waiting = bool(answer) and answer.get("JobState") in WAITING_STATES
        if not waiting:
            counted += now - last
        last = now
        state = answer or state
        if state.get("JobState") in FINAL_STATES:
            return state
        if waiting and (answer["JobState"], answer.get("Reason")) != said:
            said = (answer["JobState"], answer.get("Reason"))
            with log.open("a") as fh:
                fh.write(f"dlperf sweep: slurm job {job_id} {said[0]} ({said[1] or 'no reason'})\n")
        if waiting and never_starts(answer.get("Reason")):
            with log.open("a") as fh:
                fh.write(
                    f"dlperf sweep: slurm job {job_id} cannot start: {answer['Reason']} does not "
                    "clear without a change to the job or the partition's limits (e.g. a --time "
                    "above the partition's MaxTime: lower --timeout, or give --sbatch-arg "
                    "--partition= of one that allows it); cancelled it\n"
                )
            return _cancelled(job_id, state)
        elif answer and not waiting and "queued_s" not in details:
            details["queued_s"] = round(now - submitted, 1)
        if counted > limit_s:
            break
        time.sleep(POLL_S)
    with log.open("a") as fh:
        fh.write(
            f"dlperf sweep: slurm job {job_id} had not ended after {counted:.0f} s running or "
            f"unseen (its --time plus {GRACE_S:.0f} s; last state "
            f"{state.get('JobState') or 'unknown'}): cancelled it\n"
        )
    return _cancelled(job_id, state)


def _cancelled(job_id: str, state: dict) -> dict:
    """Cancel the job; its state once Slurm has ended it, else the last one Slurm gave within
    30 looks (COMPLETING while its processes are killed and its epilog runs; STATE if Slurm
    did not answer)."""
    cancel(job_id)
    for _ in range(30):
        answer = job_state(job_id)
        state = state | answer
        if answer.get("JobState") in FINAL_STATES | {PURGED}:
            return state
        time.sleep(POLL_S)
    return state


def stop_leftovers(cfg, nodes: int, partial: Path) -> list[str]:
    """The job an interrupted attempt at this point submitted, cancelled if Slurm still has it
    queued or running: ["slurm job N"], or [] when there was none or it had ended. Only a job
    of this point's name: ids start again at 1 on a controller whose state was reset."""
    try:
        job_id = (partial / JOB_ID_FILE).read_text().strip()
    except OSError:
        return []
    if not job_id.isdigit():
        return []
    state = job_state(job_id)
    if not state or state.get("JobState") in FINAL_STATES | {PURGED}:
        return []  # ended (or purged from slurmctld's memory: long ended)
    if state.get("JobName") != job_name(cfg, nodes):
        return []  # the id is another job's now
    _cancelled(job_id, state)
    return [f"slurm job {job_id}"]


def plan(cfg, nodes: int, partial: Path) -> list[str]:
    """What `run` would submit for this point (nothing is submitted)."""
    sbatch = ["sbatch", *slurm_directives(cfg, nodes, partial), str(partial / "job.sh")]
    return [shlex.join(sbatch), f"  ranks: {srun_ranks(cfg, partial)}"]
