"""`dlperf sweep` on the command line: its flags, a run (or its plan), and `--stop`. The
sweep itself is dlperf.sweep, the stop dlperf.sweep_stop."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from dlperf.usage import UsageError


def add_parser(sub) -> None:
    """`dlperf sweep`'s flags (the CLI's subcommand)."""
    p = sub.add_parser(
        "sweep",
        help="one training point per node count, with telemetry; resumable",
        description="Any further flags are passed to every `dlperf train`.",
    )
    p.add_argument("--nodes", default="1,2,4,8", help="node counts, e.g. 1,2,4,8")
    p.add_argument("--procs-per-node", type=int, default=1, help="workers per node (GPUs per node)")
    p.add_argument(
        "--launcher",
        choices=["local", "hosts", "slurm"],
        default="local",
        help="local: N x P processes here; hosts: over --hosts by SSH (Horovod); slurm: one "
        "batch job per point (sbatch; srun starts the ranks, PMIx for Horovod)",
    )
    p.add_argument(
        "--gpus-per-node",
        type=int,
        default=0,
        help="slurm: GPUs to request per node (--gres=gpu:N); 0 on CPU nodes",
    )
    p.add_argument(
        "--sbatch-arg",
        action="append",
        default=[],
        dest="sbatch_args",
        help="slurm: an sbatch option for every point, e.g. --sbatch-arg=--partition=gpu "
        "(repeatable)",
    )
    p.add_argument("--hosts", default="", help="hosts in launch order (--launcher hosts)")
    p.add_argument(
        "--controller",
        choices=["gloo", "mpi"],
        default="gloo",
        help="Horovod controller (local, hosts; under slurm Horovod always uses MPI over PMIx)",
    )
    p.add_argument("--network-interface", default=None, help="interface for Horovod traffic")
    p.add_argument("--results", type=Path, default=Path("results"), help="results root")
    p.add_argument(
        "--run-id", default=None, help="sweep id (default: a timestamp); reuse it to resume"
    )
    p.add_argument("--telemetry-interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--timeout", type=int, default=24 * 3600, help="seconds per point")
    p.add_argument("--quiet", action="store_true", help="plain lines instead of a progress display")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print each point's launch command (sbatch and srun, or horovodrun); start nothing",
    )
    p.add_argument(
        "--stop",
        action="store_true",
        help="stop the sweep of --run-id under --results that runs on this host (as its Ctrl-C "
        "would: its ranks or batch job stopped, the point left to run again) and wait for it",
    )


def run_sweep_command(args, train_args: list[str]) -> int:
    import time

    from dlperf.progress import point_progress
    from dlperf.sweep import (
        SweepConfig,
        SweepError,
        check_run_id,
        parse_nodes,
        plan_sweep,
        run_sweep,
    )

    if args.stop:
        return stop_sweep_command(args, train_args)
    run_id = args.run_id or time.strftime("%Y%m%d-%H%M%S")
    try:
        check_run_id(run_id)
        cfg = SweepConfig(
            nodes=parse_nodes(args.nodes),
            procs_per_node=args.procs_per_node,
            launcher=args.launcher,
            results=args.results.resolve(),  # the same path for ranks and remote samplers
            run_id=run_id,
            train_args=train_args,
            hosts=[h.strip() for h in args.hosts.split(",") if h.strip()],
            controller=args.controller,
            network_interface=args.network_interface,
            telemetry_interval=args.telemetry_interval,
            timeout=args.timeout,
            quiet=args.quiet,
            gpus_per_node=args.gpus_per_node,
            sbatch_args=args.sbatch_args,
        )
        if args.dry_run:
            print("\n".join(plan_sweep(cfg)))
            return 0
        with point_progress(cfg.run_id, args.quiet) as progress:
            outcome = run_sweep(cfg, progress)
    except SweepError as exc:
        raise UsageError(str(exc)) from exc
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (sweep.Interrupted)
        signum = getattr(exc, "signum", signal.SIGINT)
        print(
            f"dlperf sweep: stopped by {signal.Signals(signum).name}; the running point's job was "
            f"stopped and nothing of it kept: the same command with --run-id {run_id} "
            "runs it again and keeps the points that completed",
            file=sys.stderr,
        )
        return 128 + signum
    print(f"results in {cfg.results / cfg.run_id}")
    return 0 if all(v in ("ok", "skipped") for v in outcome.values()) else 1


def stop_sweep_command(args, train_args: list[str]) -> int:
    from dlperf.sweep import SweepError, check_run_id
    from dlperf.sweep_stop import stop_sweep

    if args.run_id is None:
        raise UsageError("--stop: give the --run-id of the sweep to stop")
    if args.dry_run:
        raise UsageError("--stop and --dry-run: a stop is never a dry run; give one of them")
    if train_args:
        raise UsageError(f"--stop takes --results and --run-id only, not {' '.join(train_args)}")
    try:
        check_run_id(args.run_id)
        _, said = stop_sweep(args.results.resolve(), args.run_id)
    except SweepError as exc:
        raise UsageError(str(exc)) from exc
    except KeyboardInterrupt:
        print(f"dlperf sweep --stop: interrupted; the sweep of --run-id {args.run_id} was sent "
              "SIGTERM and may still be ending", file=sys.stderr)  # fmt: skip
        return 130
    print(said)
    return 0
