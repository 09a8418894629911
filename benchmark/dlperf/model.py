"""`dlperf model`: where multi-node scaling goes, predicted from measured parts.

For data-parallel training with one gradient allreduce per step, on n nodes of g GPUs (N = n g
ranks):

    t_comm(n) = 2 (N - 1) alpha + 2 (N - 1) / N * S / B     one ring over all N ranks (alpha-beta)
              = S / algbw(n)                                or as `dlperf allreduce` measured it
    t_step(n) = t_step(1) + (1 - overlap) * t_comm(n)       overlap: share hidden by backward
    X(n)      = min(n g b / t_step(n), n * input ceiling)   images/s
    eff(n)    = X(n) / (n X(1))
    TTA(n)    = epochs(n) * images / X(n)

The ring is the one NCCL and Horovod run by default (no hierarchical allreduce): it passes
through every node, so each node's link carries 2 (N - 1) / N of the gradients, not the
2 (n - 1) / n a ring over the nodes alone (HOROVOD_HIERARCHICAL_ALLREDUCE) would. t_step(1) is
the measured one-node step (its intra-node reduction included), b the batch per GPU, S the
gradient bytes (parameters x bytes per element at the allreduce's precision), B the per-node
injection bandwidth of the fabric and alpha its per-step latency. The input ceiling is a node's
sustained read rate over the image size. Each loss is reported on its own: communication
(1 - t_step(1)/t_step(n)), input (throughput the ceiling takes away) and convergence (more epochs
than one node needs).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dlperf.report.data import reference
from dlperf.results import write_atomic
from dlperf.train.architecture import MODELS, parameter_count
from dlperf.usage import UsageError

# Nominal per-node injection bandwidth (Gb/s) and per-step latency (us) of common fabrics.
FABRICS: dict[str, tuple[float, float]] = {
    "1gbe": (1.0, 50.0),
    "10gbe": (10.0, 30.0),
    "25gbe": (25.0, 20.0),
    "100gbe": (100.0, 10.0),
    "fdr": (56.0, 5.0),
    "edr": (100.0, 5.0),
    "hdr": (200.0, 5.0),
    "ndr": (400.0, 5.0),
}
BYTES_PER_ELEMENT = {"float32": 4, "float16": 2, "bfloat16": 2}
IMAGENET_TRAIN_IMAGES = 1_281_167


@dataclass
class ModelInputs:
    node_throughput: float  # images/s of one node, measured
    gpus_per_node: int
    batch_per_gpu: int
    gradient_bytes: float
    bandwidth_gbit: float  # per node, inter-node
    latency_us: float
    overlap: float = 0.0
    # measured allreduce per node count: {nodes: (bytes, median seconds)}, and its file
    allreduce: dict[int, tuple[float, float]] = field(default_factory=dict)
    allreduce_files: dict[int, str] = field(default_factory=dict)
    input_ceiling: float | None = None  # images/s per node
    epochs: dict[int, float] = field(default_factory=dict)
    train_images: int = IMAGENET_TRAIN_IMAGES

    @property
    def step_time_1(self) -> float:
        return self.gpus_per_node * self.batch_per_gpu / self.node_throughput


def comm_time(inputs: ModelInputs, nodes: int) -> tuple[float, str]:
    """Seconds per step spent in the inter-node allreduce, and where the number comes from."""
    if nodes == 1:
        return 0.0, "one node"
    if nodes in inputs.allreduce:
        nbytes, seconds = inputs.allreduce[nodes]
        return inputs.gradient_bytes / (nbytes / seconds), "measured"
    alpha = inputs.latency_us * 1e-6
    beta = inputs.bandwidth_gbit * 1e9 / 8
    ranks = nodes * inputs.gpus_per_node
    steps = 2 * (ranks - 1)
    return steps * alpha + steps / ranks * inputs.gradient_bytes / beta, "alpha-beta"


def predict(inputs: ModelInputs, nodes: list[int]) -> list[dict]:
    t1 = inputs.step_time_1
    x1 = inputs.node_throughput
    if inputs.input_ceiling is not None:
        x1 = min(x1, inputs.input_ceiling)
    rows = []
    for n in nodes:
        t_comm, source = comm_time(inputs, n)
        t_step = t1 + (1.0 - inputs.overlap) * t_comm
        compute = n * inputs.gpus_per_node * inputs.batch_per_gpu / t_step
        ceiling = None if inputs.input_ceiling is None else n * inputs.input_ceiling
        throughput = compute if ceiling is None else min(compute, ceiling)
        row = {
            "nodes": n,
            "gpus": n * inputs.gpus_per_node,
            "comm_s": t_comm,
            "comm_source": source,
            "step_s": t_step,
            "throughput": throughput,
            "efficiency": throughput / (n * x1),
            "loss_communication": 1.0 - t1 / t_step,
            "loss_input": 1.0 - throughput / compute,
            "loss_convergence": None,
            "epochs": inputs.epochs.get(n),
            "tta_s": None,
        }
        if n in inputs.epochs:
            row["tta_s"] = inputs.epochs[n] * inputs.train_images / throughput
            if 1 in inputs.epochs:  # convergence is a loss against one node's epochs
                row["loss_convergence"] = 1.0 - inputs.epochs[1] / inputs.epochs[n]
        rows.append(row)
    base = next((r for r in rows if r["nodes"] == 1), None)
    for row in rows:
        row["speedup"] = row["throughput"] / x1
        if base and base["tta_s"] and row["tta_s"]:
            row["tta_speedup"] = base["tta_s"] / row["tta_s"]
        losses = {
            "communication": row["loss_communication"],
            "input": row["loss_input"],
            "convergence": row["loss_convergence"] or 0.0,
        }
        worst = max(losses, key=losses.get)
        row["largest_loss"] = worst if losses[worst] > 0.005 else "none"
    return rows


def _positive(value: float) -> bool:
    """> 0 and finite: NaN passes every `<= 0` test, and infinity divides into nothing."""
    return math.isfinite(value) and value > 0


def _int_map(text: str, flag: str) -> dict[int, float]:
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        try:
            n, v = int(key), float(value)
        except ValueError:
            n, v = 0, 0.0
        if not sep or n < 1 or not _positive(v):
            raise UsageError(f"{flag} {text!r}: give NODES=VALUE pairs, e.g. 1=61,2=62")
        out[n] = v
    return out


def _read_allreduce(
    paths: list[Path], gpus_per_node: int
) -> tuple[dict[int, tuple[float, float]], dict[int, str]]:
    """{nodes: (bytes, median seconds)} from `dlperf allreduce --output` summaries, and {nodes:
    file}. A wrong reduction, an empty or instant one, a ring of another number of ranks per
    node than the modelled one (its bandwidth is another ring's: each link carries 2(N-1)/N of
    the tensor), or a second summary of a node count is refused, naming the file."""
    measured: dict[int, tuple[float, float]] = {}
    files: dict[int, str] = {}
    for path in paths:
        try:
            summary = json.loads(path.read_text())
            nodes = len(summary["hosts"])
            nbytes, seconds = float(summary["bytes"]), float(summary["median_s"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UsageError(
                f"--allreduce {path}: not a dlperf allreduce summary ({exc})"
            ) from None
        if summary.get("correct") is False:
            raise UsageError(f"--allreduce {path}: that allreduce was WRONG; measure it again")
        if not (nbytes > 0 and seconds > 0 and math.isfinite(nbytes / seconds)):
            raise UsageError(
                f"--allreduce {path}: bytes {summary['bytes']} in median_s "
                f"{summary['median_s']} is no bandwidth (both must be > 0)"
            )
        ranks = summary.get("world_size")
        if ranks is not None and ranks != nodes * gpus_per_node:
            raise UsageError(
                f"--allreduce {path}: measured {ranks} rank(s) on {nodes} node(s), the model's "
                f"ring has {nodes * gpus_per_node} (--gpus-per-node {gpus_per_node}); measure "
                f"with {gpus_per_node} rank(s) per node"
            )
        if nodes in files:
            raise UsageError(
                f"--allreduce {path}: a second summary of {nodes} node(s) (the first: "
                f"{files[nodes]}); give one per node count"
            )
        measured[nodes], files[nodes] = (nbytes, seconds), str(path)
    return measured, files


def inputs_from_args(args) -> ModelInputs:
    if not _positive(args.node_throughput):
        raise UsageError(f"--node-throughput {args.node_throughput}: must be > 0 images/s")
    if args.gpus_per_node < 1 or args.batch_per_gpu < 1:
        raise UsageError("--gpus-per-node and --batch-per-gpu must be >= 1")
    if args.train_images < 1:
        raise UsageError(
            f"--train-images {args.train_images}: must be >= 1 (images in one epoch; ImageNet's "
            f"{IMAGENET_TRAIN_IMAGES:,} by default)"
        )
    if not 0.0 <= args.overlap <= 1.0:
        raise UsageError(f"--overlap {args.overlap}: a fraction between 0 and 1")
    if args.model not in MODELS:
        raise UsageError(f"--model {args.model}: one of {', '.join(sorted(MODELS))}")
    if not _positive(args.width_multiplier) or args.classes < 2:
        raise UsageError(
            f"--width-multiplier {args.width_multiplier} must be > 0 and --classes "
            f"{args.classes} >= 2"
        )
    # The engines' own architecture, counted without a framework (25,557,032 for ResNet-50,
    # 11,689,512 for ResNet-18 at width 1 and 1000 classes, as published).
    parameters = parameter_count(args.model, args.classes, args.width_multiplier)
    bandwidth, latency = FABRICS[args.fabric]
    if args.bandwidth_gbit is not None:
        if not _positive(args.bandwidth_gbit):
            raise UsageError(f"--bandwidth-gbit {args.bandwidth_gbit}: must be > 0")
        bandwidth = args.bandwidth_gbit
    if args.latency_us is not None:
        if not (math.isfinite(args.latency_us) and args.latency_us >= 0):
            raise UsageError(f"--latency-us {args.latency_us}: must be >= 0")
        latency = args.latency_us
    # the seed's published epochs to 74.9 % top-1 (C4140-M, EDR), per node count
    seed = reference()["seed_ready_solution_v1_1"]["epochs_to_converge"]
    if args.epochs and args.seed_epochs:
        raise UsageError(
            f"--epochs {args.epochs!r} and --seed-epochs: give one (the seed's are "
            f"{','.join(f'{n}={e}' for n, e in seed.items())})"
        )
    epochs = {int(n): e for n, e in seed.items()} if args.seed_epochs else {}
    if args.epochs:
        epochs = _int_map(args.epochs, "--epochs")
    if args.input_ceiling is not None and not _positive(args.input_ceiling):
        raise UsageError(f"--input-ceiling {args.input_ceiling}: must be > 0 images/s")
    allreduce, allreduce_files = _read_allreduce(args.allreduce, args.gpus_per_node)
    return ModelInputs(
        node_throughput=args.node_throughput,
        gpus_per_node=args.gpus_per_node,
        batch_per_gpu=args.batch_per_gpu,
        gradient_bytes=parameters * BYTES_PER_ELEMENT[args.precision],
        bandwidth_gbit=bandwidth,
        latency_us=latency,
        overlap=args.overlap,
        allreduce=allreduce,
        allreduce_files=allreduce_files,
        input_ceiling=args.input_ceiling,
        epochs=epochs,
        train_images=args.train_images,
    )


def parse_nodes(text: str) -> list[int]:
    try:
        nodes = sorted({int(x) for x in text.split(",")})
    except ValueError:
        nodes = []
    if not nodes or nodes[0] < 1:
        raise UsageError(f"--nodes {text!r}: give node counts such as 1,2,4,8")
    return nodes if nodes[0] == 1 else [1, *nodes]


def render(inputs: ModelInputs, rows: list[dict], label: str) -> list[str]:
    lines = [
        f"{label}: {inputs.node_throughput:.0f} img/s on one node ({inputs.gpus_per_node} GPUs x "
        f"{inputs.batch_per_gpu}, step {inputs.step_time_1 * 1e3:.1f} ms), gradients "
        f"{inputs.gradient_bytes / 1e6:.1f} MB, fabric {inputs.bandwidth_gbit:g} Gb/s / "
        f"{inputs.latency_us:g} us, overlap {inputs.overlap:g}"
        + (
            f", input ceiling {inputs.input_ceiling:.0f} img/s per node"
            if inputs.input_ceiling
            else ""
        )
        + f", {inputs.train_images:,} training images per epoch",
    ]
    for n, (nbytes, seconds) in sorted(inputs.allreduce.items()):
        lines.append(
            f"allreduce measured on {n} node(s): {nbytes / 1e6:.1f} MB in {seconds * 1e3:.2f} ms, "
            f"algbw {nbytes / seconds / 1e9:.2f} GB/s ({inputs.allreduce_files.get(n, '?')})"
        )
    lines.append(
        f"{'nodes':>5} {'comm ms':>8} {'step ms':>8} {'img/s':>9} {'speedup':>7} {'eff':>6} "
        f"{'epochs':>6} {'TTA min':>8} {'TTA x':>6}  {'largest loss':<13} comm from"
    )
    for r in rows:
        tta = f"{r['tta_s'] / 60:8.1f}" if r["tta_s"] else f"{'-':>8}"
        ttax = f"{r['tta_speedup']:6.2f}" if r.get("tta_speedup") else f"{'-':>6}"
        epochs = f"{r['epochs']:6g}" if r["epochs"] else f"{'-':>6}"
        lines.append(
            f"{r['nodes']:5d} {r['comm_s'] * 1e3:8.2f} {r['step_s'] * 1e3:8.1f} "
            f"{r['throughput']:9.0f} {r['speedup']:7.2f} {r['efficiency']:6.1%} {epochs} {tta} "
            f"{ttax}  {r['largest_loss']:<13} {r['comm_source']}"
        )
    return lines


def add_parser(sub) -> None:
    p = sub.add_parser(
        "model",
        help="predict multi-node throughput, efficiency and time to accuracy from measured parts",
        description="An alpha-beta model of data-parallel scaling (see the module's docs). Every "
        "input is printed with the prediction; nothing here is a measurement.",
    )
    p.add_argument("--node-throughput", type=float, required=True, help="one node's images/s")
    p.add_argument("--gpus-per-node", type=int, default=4)
    p.add_argument("--batch-per-gpu", type=int, default=192)
    p.add_argument("--model", default="resnet50_v1.5", help="as dlperf train names it")
    p.add_argument("--width-multiplier", type=float, default=1.0, help="as dlperf train's")
    p.add_argument("--classes", type=int, default=1000, help="classes of the dense layer")
    p.add_argument("--precision", choices=sorted(BYTES_PER_ELEMENT), default="float16",
                   help="element type of the gradients the allreduce moves: float16 for "
                        "MXNet in float16 (Horovod's fp16 compression, the seed's recipe), "
                        "float32 for every other engine and precision (PyTorch DDP reduces "
                        "float32 gradients under autocast, MXNet's bfloat16 too)")  # fmt: skip
    p.add_argument("--nodes", default="1,2,4,8", help="node counts")
    p.add_argument("--fabric", choices=sorted(FABRICS), default="edr",
                   help="nominal bandwidth and latency per node")  # fmt: skip
    p.add_argument("--bandwidth-gbit", type=float, default=None, help="override the fabric's Gb/s")
    p.add_argument("--latency-us", type=float, default=None, help="override its per-step latency")
    p.add_argument("--overlap", type=float, default=0.0,
                   help="share of the allreduce hidden behind the backward pass (0-1)")  # fmt: skip
    p.add_argument("--allreduce", type=Path, action="append", default=[],
                   help="a `dlperf allreduce --output` summary (for its node count)")  # fmt: skip
    p.add_argument("--input-ceiling", type=float, default=None,
                   help="images/s a node's storage sustains (read rate / image size)")  # fmt: skip
    p.add_argument("--epochs", default="", help="epochs to target per node count: 1=61,2=62,...")
    p.add_argument("--seed-epochs", action="store_true",
                   help="the seed's published epochs (61/62/65/81 on 1/2/4/8 nodes)")  # fmt: skip
    p.add_argument("--train-images", type=int, default=IMAGENET_TRAIN_IMAGES)
    p.add_argument("--label", default="prediction", help="what this prediction is of")
    p.add_argument("--json", type=Path, default=None, help="write inputs and rows as JSON")


def run_model(args) -> int:
    nodes = parse_nodes(args.nodes)
    inputs = inputs_from_args(args)
    for n in sorted(set(inputs.allreduce) - set(nodes[1:])):
        # one node has no inter-node allreduce; another count stands for no row
        why = "one node has no inter-node allreduce" if n == 1 else "not among --nodes"
        print(
            f"dlperf model: --allreduce {inputs.allreduce_files[n]}: {n} node(s) is {why} "
            f"{args.nodes}; not used",
            file=sys.stderr,
        )
        del inputs.allreduce[n], inputs.allreduce_files[n]
    rows = predict(inputs, nodes)
    if args.json is not None:  # before the table: a path that cannot be written leaves no doubt
        try:
            write_atomic(args.json, {"label": args.label, "inputs": asdict(inputs), "rows": rows})
        except OSError as exc:
            raise UsageError(f"--json {args.json}: cannot be written ({exc})") from None
    print("\n".join(render(inputs, rows, args.label)))
    return 0
