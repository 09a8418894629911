"""`dlperf train`: its flags, their validation and the run (the engine is imported last)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from dlperf.usage import UsageError

MODELS = ["resnet18_v1.5", "resnet34_v1.5", "resnet50_v1.5", "resnet101_v1.5"]
BACKENDS = ["mxnet", "pytorch"]


def add_train_parser(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train ResNet v1.5 (run under horovodrun/mpirun for >1 worker)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="mxnet",
        help="framework: mxnet (the seed's; Horovod) or pytorch (DDP; today's GPUs)",
    )
    p.add_argument("--model", default="resnet50_v1.5", help=f"one of {', '.join(MODELS)}")
    p.add_argument("--width-multiplier", type=float, default=1.0, help="scale every channel count")
    p.add_argument("--image-size", type=int, default=224, help="crop size in pixels")
    p.add_argument("--batch-size", type=int, default=192, help="images per worker per step")
    p.add_argument("--data", default="synthetic", help="'synthetic' or a training .rec file")
    p.add_argument("--val-data", default=None, help="validation .rec file (needed by --mode tta)")
    p.add_argument(
        "--classes", type=int, default=None, help="classes (default: 1000 synthetic, from the data)"
    )
    p.add_argument(
        "--mode",
        choices=["throughput", "tta"],
        default="throughput",
        help="img/s after warm-up, or train until --target-top1",
    )
    p.add_argument(
        "--target-top1", type=float, default=0.749, help="tta: stop at this top-1 (0, 1]"
    )
    p.add_argument("--max-epochs", type=int, default=90, help="tta: give up after this many epochs")
    p.add_argument(
        "--iterations", type=int, default=100, help="throughput: steps, warm-up included"
    )
    p.add_argument(
        "--warmup-iterations", type=int, default=20, help="throughput: untimed first steps"
    )
    p.add_argument("--lr-per-256", type=float, default=0.256, help="learning rate per 256 images")
    p.add_argument("--momentum", type=float, default=0.875, help="SGD momentum")
    p.add_argument("--weight-decay", type=float, default=1.0 / 32768, help="L2, not on BN/bias")
    p.add_argument("--label-smoothing", type=float, default=0.1, help="label smoothing")
    p.add_argument(
        "--lr-schedule",
        choices=["cosine", "poly"],
        default="cosine",
        help="after warm-up: cosine to 0 (NVIDIA's recipe) or polynomial, power 2, to 0.0001 "
        "(the decay MLPerf's closed ResNet rules accept)",
    )
    p.add_argument("--warmup-epochs", type=float, default=5.0, help="tta: linear LR warm-up epochs")
    p.add_argument(
        "--dtype",
        choices=["auto", "float32", "float16", "bfloat16"],
        default="auto",
        help="mixed precision, with dynamic loss scaling; auto on GPU: float16 AMP (mxnet), "
        "bfloat16 AMP, or float16 AMP where the GPU lacks bf16 (pytorch); float32 on CPU. "
        "mxnet: float16 on GPU only, bfloat16 on CPU only (oneDNN)",
    )
    p.add_argument(
        "--layout",
        choices=["auto", "NCHW", "NHWC"],
        default="auto",
        help="memory layout; auto: NHWC (channels_last) for pytorch on GPU, else NCHW; mxnet "
        "takes NHWC on GPUs only",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="pytorch: torch.compile the model (its compile time is result.json's first_step_s)",
    )
    p.add_argument(
        "--device", choices=["auto", "cpu", "gpu"], default="auto", help="where to train"
    )
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="data-decoding threads (mxnet, pytorch with DALI) or DataLoader workers (pytorch) "
        "per worker; default: cores / ranks on the node",
    )
    p.add_argument(
        "--loader",
        choices=["auto", "native", "dali"],
        default="auto",
        help="pytorch's input pipeline for .rec data: NVIDIA DALI (GPU decoding; CPU operators "
        "on a CPU) or native (DataLoader workers); auto: dali on GPUs where DALI is installed",
    )
    p.add_argument(
        "--output", type=Path, required=True, help="directory for result.json and mllog.txt"
    )


class _Refused(Exception):
    pass


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and exit
        raise _Refused(message)


def check_train_argv(argv: list[str]) -> None:
    """`dlperf train`'s parsing and flag checks on ARGV, as a launcher will pass it on (its
    --output added), without the data files or a framework: what `dlperf sweep` checks before
    its first point, so that a mistyped flag is named instead of failing every point."""
    parser = _RaisingParser(prog="dlperf", add_help=False)
    add_train_parser(parser.add_subparsers(dest="command"))
    try:
        args = parser.parse_args(["train", *argv, "--output", "point"])
    except _Refused as exc:
        unknown = str(exc).removeprefix("unrecognized arguments: ")
        if unknown != str(exc):
            raise UsageError(
                f"{unknown}: neither a dlperf sweep flag nor a dlperf train one (the sweep "
                "passes on to dlperf train every flag it does not know)"
            ) from None
        raise UsageError(f"{exc} (passed on to dlperf train)") from None
    check_train_flags(args)


def check_train_flags(args) -> None:
    """The checks of `dlperf train`'s flags that need neither the data files nor a framework."""
    if args.model not in MODELS:
        raise UsageError(f"--model {args.model!r}: unknown model; choose from {', '.join(MODELS)}")
    checks = [
        (args.batch_size > 0, f"--batch-size {args.batch_size}: must be > 0"),
        (args.image_size >= 16, f"--image-size {args.image_size}: must be >= 16"),
        (args.width_multiplier > 0, f"--width-multiplier {args.width_multiplier}: must be > 0"),
        (0 < args.target_top1 <= 1, f"--target-top1 {args.target_top1}: must be in (0, 1]"),
        (args.max_epochs >= 1, f"--max-epochs {args.max_epochs}: must be >= 1"),
        (args.iterations >= 1, f"--iterations {args.iterations}: must be >= 1"),
        (
            1 <= args.warmup_iterations < args.iterations,
            f"--warmup-iterations {args.warmup_iterations}: must be >= 1 (the first step builds "
            f"and tunes kernels and is never timed) and below --iterations {args.iterations}",
        ),
        (
            0 <= args.label_smoothing < 1,
            f"--label-smoothing {args.label_smoothing}: must be in [0, 1)",
        ),
        (args.classes is None or args.classes >= 2, f"--classes {args.classes}: must be >= 2"),
        (
            args.threads is None or args.threads >= (1 if args.backend == "mxnet" else 0),
            f"--threads {args.threads}: must be >= 1 (mxnet) or >= 0 (pytorch)",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise UsageError(message)
    if args.backend == "mxnet":
        from dlperf.train.mxnet import BFLOAT16_ON_GPU, FLOAT16_ON_CPU, NHWC_ON_CPU

        unsupported = [
            (args.compile, "--compile: only the pytorch backend compiles (MXNet hybridizes)"),
            (
                args.loader == "dali",
                "--loader dali: DALI feeds the pytorch backend; mxnet reads through MXNet's own "
                "record iterator",
            ),
            (args.layout == "NHWC" and args.device == "cpu", NHWC_ON_CPU),
            (args.dtype == "bfloat16" and args.device == "gpu", BFLOAT16_ON_GPU),
            (args.dtype == "float16" and args.device == "cpu", FLOAT16_ON_CPU),
        ]
        for bad, message in unsupported:
            if bad:
                raise UsageError(message)
    if args.mode == "tta" and (args.val_data is None or args.data == "synthetic"):
        raise UsageError("--mode tta needs real --data and --val-data .rec files to measure top-1")


def validate_train(args) -> None:
    check_train_flags(args)
    if args.data != "synthetic" and not Path(args.data).is_file():
        raise UsageError(f"--data {args.data}: no such file (give 'synthetic' or a .rec file)")
    if args.val_data is not None and not Path(args.val_data).is_file():
        raise UsageError(
            f"--val-data {args.val_data}: no such file (give the validation .rec file that "
            "`dlperf data prepare` or `dlperf data digits` wrote)"
        )
    if args.val_data is not None and args.data != "synthetic":
        from dlperf.data.recordio import class_names

        train_names, val_names = class_names(Path(args.data)), class_names(Path(args.val_data))
        if train_names and val_names and train_names != val_names:
            differ = sorted(set(train_names) ^ set(val_names))[:5] or ["their order"]
            raise UsageError(
                f"--val-data {args.val_data}: its classes are not those of --data {args.data} "
                f"({len(val_names)} against {len(train_names)}; they differ in "
                f"{', '.join(differ)}): the labels would not match; prepare both from folders "
                "with the same class sub-folders"
            )
    if args.classes is not None and args.data != "synthetic":
        from dlperf.data.recordio import class_count

        held = class_count(Path(args.data), lambda _path: None)  # the header's; no scan here
        if held is not None and args.classes < held:
            # MXNet's one-hot makes a label past --classes a row of zeros: it would train on
            # nothing for those images, and report a low top-1 as a finished run
            raise UsageError(
                f"--classes {args.classes}: {args.data} holds {held} classes (labels 0 to "
                f"{held - 1}); give at least {held}, or leave --classes out to use the data's"
            )


def _launched_count(*names: str) -> int:
    """The first of NAMES the launcher set, as a count; srun's per-node lists such as "4(x2)"
    or "4,2" give their first entry."""
    for name in names:
        value = os.environ.get(name)
        if value:
            try:
                return int(value.split("(")[0].split(",")[0])
            except ValueError:
                continue
    return 1


def _set_runtime_defaults(args) -> None:
    """Environment MXNet reads when it loads: set before the first `import mxnet`."""
    local = _launched_count(
        "OMPI_COMM_WORLD_LOCAL_SIZE", "HOROVOD_LOCAL_SIZE", "SLURM_STEP_TASKS_PER_NODE"
    )
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // local)))
    # oneDNN (MKLDNN) is off for CPU runs of more than one worker: MXNet 1.9.1 with Horovod's
    # DistributedTrainer intermittently aborts with "Check failed: !IsMKLDNNData()" when the
    # allreduce reads a gradient still in oneDNN layout (seen in 3 of 3 two-rank gloo runs on one
    # loaded 2-core machine, never on another). Off costs 4-5x on CPU; CPU runs here are checks
    # and demos, the reference runs on GPUs, where oneDNN plays no part. A single worker keeps
    # it; MXNET_MKLDNN_ENABLED in the environment still wins. bfloat16 keeps it: MXNet has
    # bfloat16 kernels only in oneDNN.
    if args.backend != "mxnet":
        return
    from dlperf.train.mxnet.comm import launched_distributed

    if args.device != "gpu" and args.dtype != "bfloat16" and launched_distributed():
        world = _launched_count("OMPI_COMM_WORLD_SIZE", "HOROVOD_SIZE", "SLURM_STEP_NUM_TASKS")
        if world > 1:
            os.environ.setdefault("MXNET_MKLDNN_ENABLED", "0")
    if args.device != "gpu":
        os.environ.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")


def run_train(args) -> int:
    validate_train(args)
    _set_runtime_defaults(args)
    from dlperf.train.config import TrainConfig
    from dlperf.train.driver import train

    fields = {k: v for k, v in vars(args).items() if k not in ("command", "func")}
    result = train(TrainConfig(**fields))
    code = 0
    if result.mode == "tta" and not result.reached_target:
        print(
            f"target top-1 {args.target_top1} not reached in {args.max_epochs} epochs",
            file=sys.stderr,
        )
        code = 3
    if args.backend == "pytorch" and result.world_size > 1 and result.status == "ok":
        # The process group is gone (the engine barriers, then destroys it) and result.json
        # and the MLPerf log are written, but Gloo's threads can still abort a rank while the
        # interpreter exits ("terminate called without an active exception": seen once in a
        # loaded CI run, a finished job then failing). A finished rank leaves without running
        # destructors again.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
