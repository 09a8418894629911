"""What Slurm says about one batch job: scontrol's fields while slurmctld holds its record,
sacct's once it has purged it (where accounting is on), and how its end becomes an exit
status; scancel."""

from __future__ import annotations

import re
import subprocess

# States in which a job has ended (squeue/scontrol's JobState).
FINAL_STATES = {
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
    "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
}  # fmt: skip
# States in which a job waits to run (or to run again): its time there is not run time. A point
# may wait in the queue as long as the site's scheduler keeps it there.
WAITING_STATES = {
    "PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD",
    "SUSPENDED",
}  # fmt: skip
# Reasons a pending job keeps until someone changes the job or the site's limits: waiting for
# them would hold the sweep for ever (a --time above the partition's MaxTime is accepted when
# EnforcePartLimits is NO, Slurm's default, and pends as PartitionTimeLimit). A user's or an
# admin's hold is not among them: it is released.
NEVER_STARTS = {
    "PartitionTimeLimit", "PartitionNodeLimit", "DependencyNeverSatisfied", "BadConstraints",
    "InvalidQOS", "InvalidAccount",
}  # fmt: skip


def never_starts(reason: str | None) -> bool:
    return bool(reason) and (reason in NEVER_STARTS or "MaxWallDuration" in reason)


# scontrol's answer for a job slurmctld holds no record of: one purged MinJobAge (300 s by
# default) after it ended, or lost with the controller's state. job_state gives it as PURGED.
UNKNOWN_JOB = "Invalid job id specified"
PURGED = "PURGED"


def job_state(job_id: str) -> dict:
    """scontrol's fields of a job (JobState, ExitCode, NodeList, ...); JobState PURGED when
    slurmctld no longer knows the id; empty when it did not answer."""
    try:
        out = subprocess.run(
            ["scontrol", "show", "job", "--oneliner", job_id],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        return {}
    if out.returncode != 0 and UNKNOWN_JOB in out.stderr:
        return {"JobState": PURGED}
    return dict(re.findall(r"(\w+)=(\S*)", out.stdout))


def parse_sacct(text: str) -> dict:
    """The job's allocation line of `sacct --parsable2 --noheader --format=State,ExitCode,
    NodeList` as scontrol's fields; empty when there is none. sacct adds who cancelled a job to
    its state ("CANCELLED by 1000")."""
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) == 3 and fields[0].strip():
            return {
                "JobState": fields[0].split()[0],
                "ExitCode": fields[1],
                "NodeList": fields[2],
            }
    return {}


def accounted_state(job_id: str) -> dict:
    """sacct's record of a job slurmctld has purged; empty without accounting (sacct refuses:
    AccountingStorageType=accounting_storage/none) or without a record of it."""
    try:
        out = subprocess.run(
            ["sacct", "--jobs", job_id, "--allocations", "--noheader", "--parsable2",
             "--format=State,ExitCode,NodeList"],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return parse_sacct(out.stdout) if out.returncode == 0 else {}


def exit_status(state: dict) -> int:
    """The batch script's exit status from ExitCode=RC:SIGNAL (128 + signal when killed)."""
    rc, _, sig = state.get("ExitCode", "").partition(":")
    if sig.isdigit() and int(sig):
        return 128 + int(sig)
    if rc.isdigit() and (int(rc) or state.get("JobState") == "COMPLETED"):
        return int(rc)
    return 1  # ended without a status of its own: cancelled, timed out, node failure


def cancel(job_id: str) -> None:
    # its own session, as sbatch's: a second Ctrl-C at the terminal does not cut it short
    subprocess.run(
        ["scancel", job_id], check=False, timeout=60, capture_output=True, start_new_session=True
    )
