"""The single `dlperf` command: train, data, telemetry, sweep, report, allreduce, reproduce."""

from __future__ import annotations

import argparse
import math
import platform
import sys
from pathlib import Path

from dlperf import __version__
from dlperf.train.command import BACKENDS, add_train_parser, run_train
from dlperf.usage import UsageError


def _data_parser(sub) -> None:
    p = sub.add_parser("data", help="prepare data sets as RecordIO")
    dsub = p.add_subparsers(dest="data_command", metavar="{prepare,digits}", required=True)
    prep = dsub.add_parser(
        "prepare", help="ImageNet-style folder (ROOT/<class>/<image>) -> .rec/.idx"
    )
    prep.add_argument("root", type=Path)
    prep.add_argument("--output", type=Path, required=True, help="the .rec file to write")
    prep.add_argument("--resize", type=int, default=None, help="resize the shorter side to this")
    prep.add_argument(
        "--seed", type=int, default=0, help="seed of the record order (recorded in .meta.json)"
    )
    dig = dsub.add_parser(
        "digits", help="scikit-learn's digits as train.rec/val.rec (tests, demos)"
    )
    dig.add_argument("--output", type=Path, required=True, help="directory to write into")
    dig.add_argument("--image-size", type=int, default=32)


def _telemetry_parser(sub) -> None:
    p = sub.add_parser(
        "telemetry", help="sample storage, fabric, GPU and host counters until stopped"
    )
    p.add_argument("--output", type=Path, required=True, help="JSON-lines file to write")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    p.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    p.add_argument("--max-bytes", type=int, default=64 * 1024 * 1024, help="file size limit")
    p.add_argument(
        "--stop-on-stdin-eof",
        action="store_true",
        help="also stop when standard input closes (samplers started over SSH)",
    )


def _allreduce_parser(sub) -> None:
    p = sub.add_parser(
        "allreduce",
        help="a checked, timed allreduce across the launched ranks (cluster check)",
        description=(
            "Run under horovodrun, mpirun or srun (torchrun too with --backend pytorch); rank 0 "
            "prints the verdict and bandwidths."
        ),
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="mxnet",
        help="whose allreduce: Horovod's on MXNet arrays, or torch.distributed's (NCCL on GPUs, "
        "Gloo on CPUs), as each engine's gradients go",
    )
    p.add_argument("--megabytes", type=float, default=4.0, help="tensor size per rank (MB)")
    p.add_argument("--iterations", type=int, default=5, help="timed allreduces")
    p.add_argument("--warmup", type=int, default=1, help="untimed allreduces first")
    p.add_argument("--output", type=Path, default=None, help="JSON summary to write (rank 0)")
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "gpu"],
        default="auto",
        help="where the tensor lives; auto: the rank's GPU when the backend sees one (NCCL)",
    )


def _report_parser(sub) -> None:
    p = sub.add_parser("report", help="figures 3-6, summary table and HTML from a sweep")
    p.add_argument("results", type=Path, help="RESULTS/RUN_ID directory of a sweep")
    p.add_argument("--output", type=Path, required=True, help="directory for PNGs and index.html")
    p.add_argument(
        "--baseline", type=Path, default=None, help="another sweep to compare throughput with"
    )
    p.add_argument(
        "--tta",
        type=Path,
        default=None,
        help="a --mode tta sweep for Fig. 3 and the time-to-accuracy columns",
    )
    p.add_argument(
        "--note", action="append", default=[], help="a line for the report's notes (repeatable)"
    )
    p.add_argument(
        "--model",
        type=Path,
        default=None,
        help="a `dlperf model --json` prediction to draw and tabulate beside the measurements",
    )


# One example per command, printed at the end of its --help (a unit test parses each one).
EXAMPLES = {
    ("train",): "dlperf train --data /mnt/isilon/imagenet/train.rec "
    "--val-data /mnt/isilon/imagenet/val.rec --mode tta --output results/rn50-1node",
    ("data", "prepare"): "dlperf data prepare /data/imagenet/train --resize 256 "
    "--output /mnt/isilon/imagenet/train.rec",
    ("data", "digits"): "dlperf data digits --output data/digits",
    ("telemetry",): "dlperf telemetry --output c4140-01.jsonl --interval 1 --duration 600",
    ("sweep",): "dlperf sweep --launcher slurm --nodes 1,2,4,8 --procs-per-node 4 "
    "--gpus-per-node 4 --run-id run1 --dry-run --data /mnt/isilon/imagenet/train.rec",
    ("report",): "dlperf report results/run1/throughput --tta results/run1/tta "
    "--output results/run1/report",
    ("allreduce",): "horovodrun -np 8 -H c4140-01:4,c4140-02:4 dlperf allreduce --megabytes 64",
    ("model",): "dlperf model --node-throughput 5400 --gpus-per-node 4 --nodes 1,2,4,8 "
    "--fabric edr",
    ("reproduce",): "dlperf reproduce --inventory inventory/reference --run-id run1",
}


class _KeepExamples(argparse.HelpFormatter):
    """Prints an `example:` epilog as written, so the command can be copied whole."""

    def _fill_text(self, text, width, indent):
        if text.startswith("example:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def subcommand(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _add_examples(parser: argparse.ArgumentParser) -> None:
    for path, example in EXAMPLES.items():
        p = subcommand(parser, path)
        p.epilog = f"example:\n  {example}"
        p.formatter_class = type("Formatter", (_KeepExamples, p.formatter_class), {})


def build_parser() -> argparse.ArgumentParser:
    from dlperf.sweep_command import add_parser as _sweep_parser

    parser = argparse.ArgumentParser(
        prog="dlperf",
        description="Reproduce the ResNet-50 scaling study of the Ready Solutions for AI v1.1 "
        "reference cluster: training, telemetry, sweep and report.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"dlperf {__version__} (Python {platform.python_version()})",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_train_parser(sub)
    _data_parser(sub)
    _telemetry_parser(sub)
    _sweep_parser(sub)
    _report_parser(sub)
    _allreduce_parser(sub)
    from dlperf.model import add_parser as _model_parser
    from dlperf.reproduce_command import add_parser as _reproduce_parser

    _model_parser(sub)
    _reproduce_parser(sub)
    _add_examples(parser)
    return parser


def run_data(args) -> int:
    if args.data_command == "digits":
        if args.image_size < 8:
            raise UsageError(f"--image-size {args.image_size}: must be >= 8")
        from dlperf.data.digits import MissingExtraError, build_digits

        try:
            info = build_digits(args.output, args.image_size)
        except MissingExtraError as exc:
            raise UsageError(str(exc)) from exc
        print(
            f"digits: {info['train']} train + {info['val']} val images "
            f"at {args.image_size}px in {args.output}"
        )
        return 0
    if not args.root.is_dir():
        raise UsageError(
            f"ROOT {args.root}: not a directory (give a folder with one sub-folder of images "
            "per class, as ImageNet's train/ is laid out)"
        )
    if args.output.suffix != ".rec":
        raise UsageError(f"--output {args.output}: must end in .rec")
    if args.resize is not None and args.resize < 8:
        raise UsageError(
            f"--resize {args.resize}: must be >= 8 pixels (the shorter side; leave it out to keep "
            "the images' sizes)"
        )
    from dlperf.data.recordio import prepare_folder

    try:
        n = prepare_folder(args.root, args.output, args.resize, args.seed)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    print(f"wrote {n} images to {args.output} (+ .idx)")
    return 0


def run_telemetry(args) -> int:
    if not (math.isfinite(args.interval) and args.interval > 0):
        raise UsageError(f"--interval {args.interval}: must be > 0")
    if args.max_bytes < 4096:
        raise UsageError(f"--max-bytes {args.max_bytes}: must be >= 4096")
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise UsageError(
            f"--duration {args.duration}: must be > 0 (leave it out to sample until stopped)"
        )
    from dlperf.telemetry.sampler import run_sampler

    try:
        run_sampler(
            args.output, args.interval, args.duration, args.max_bytes, args.stop_on_stdin_eof
        )
    except OSError as exc:
        if exc.filename is None or Path(exc.filename) not in (args.output, *args.output.parents):
            raise
        raise UsageError(f"--output {args.output}: cannot be written ({exc.strerror})") from None
    return 0


def run_allreduce_command(args) -> int:
    checks = [
        (0 < args.megabytes <= 4096, f"--megabytes {args.megabytes}: must be in (0, 4096]"),
        (args.iterations >= 1, f"--iterations {args.iterations}: must be >= 1"),
        (args.warmup >= 0, f"--warmup {args.warmup}: must be >= 0"),
    ]
    for ok, message in checks:
        if not ok:
            raise UsageError(message)
    from dlperf.allreduce import run_allreduce

    summary = run_allreduce(
        args.megabytes, args.iterations, args.warmup, args.output, args.device, args.backend
    )
    return 0 if summary["correct"] else 1


def run_reproduce_command(args) -> int:
    from dlperf.reproduce import ReproduceError, run_command
    from dlperf.reproduce_command import config_from_args

    try:
        cfg = config_from_args(args)
    except ReproduceError as exc:
        raise UsageError(str(exc)) from exc
    return run_command(cfg, quiet=args.quiet)


def run_model_command(args) -> int:
    from dlperf.model import run_model

    return run_model(args)


def run_report(args) -> int:
    from dlperf.report.data import ReportError
    from dlperf.report.html import build_report

    try:
        report = build_report(
            args.results, args.output, args.baseline, args.tta, tuple(args.note), args.model
        )
    except ReportError as exc:
        raise UsageError(str(exc)) from exc
    print(f"report: {report['html']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    if extra and args.command != "sweep":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        if args.command == "sweep":
            from dlperf.sweep_command import run_sweep_command

            return run_sweep_command(args, extra)
        handlers = {
            "train": run_train,
            "data": run_data,
            "telemetry": run_telemetry,
            "report": run_report,
            "allreduce": run_allreduce_command,
            "reproduce": run_reproduce_command,
            "model": run_model_command,
        }
        return handlers[args.command](args)
    except UsageError as exc:
        command = " ".join(filter(None, (args.command, getattr(args, "data_command", None))))
        print(f"dlperf {command}: error: {exc}", file=sys.stderr)
        print(f"(dlperf {command} --help: every flag, and an example)", file=sys.stderr)
        return 2
