#!/usr/bin/env python3
"""Telemetry overhead: `dlperf train` throughput with and without `dlperf telemetry` sampling
on the same machine, alternating runs. Prints img/s of both (median, min-max over the runs), the
slowdown of the medians, and the sampler's own CPU time per sample from its footer (goal: under
1 % of one core at a 1 s interval).

    .venv/bin/python benchmarks/telemetry_overhead.py --interval 1 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dlperf.telemetry.sampler import read_footer

BIN = Path(sys.executable).parent


def train(args, out: Path) -> float:
    cmd = [
        str(BIN / "dlperf"),
        "train",
        "--backend",
        args.backend,
        "--model",
        args.model,
        "--width-multiplier",
        str(args.width),
        "--image-size",
        str(args.image_size),
        "--batch-size",
        str(args.batch_size),
        "--iterations",
        str(args.iterations),
        "--warmup-iterations",
        "5",
        "--output",
        str(out),
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    return json.loads((out / "result.json").read_text())["throughput_img_per_s"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="mxnet", choices=["mxnet", "pytorch"])
    p.add_argument("--model", default="resnet50_v1.5")
    p.add_argument("--width", type=float, default=0.25)
    p.add_argument("--image-size", type=int, default=112)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    plain, sampled, cost = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for i in range(args.repeats):
            plain.append(train(args, tmp / f"plain{i}"))
            out = tmp / f"t{i}.jsonl"
            sampler = subprocess.Popen(
                [str(BIN / "dlperf"), "telemetry", "--output", str(out),
                 "--interval", str(args.interval)]
            )  # fmt: skip
            # As in a sweep, where samplers start before the launcher: the sampler's own start-up
            # (imports, first sample) is not charged to the training run.
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and (
                not out.exists() or len(out.read_text().splitlines()) < 2
            ):
                time.sleep(0.1)
            try:
                sampled.append(train(args, tmp / f"sampled{i}"))
            finally:
                sampler.send_signal(signal.SIGTERM)
                sampler.wait(timeout=30)
            footer = read_footer(out)
            if footer:
                cost.append(footer["cpu_s_per_sample"])
    a, b = statistics.median(plain), statistics.median(sampled)
    print(
        f"workload: {args.backend} {args.model} width {args.width} {args.image_size}px "
        f"batch {args.batch_size}, {args.iterations} steps; sampling every {args.interval} s; "
        f"{args.repeats} runs each, alternating"
    )
    for name, runs in (("without telemetry", plain), ("with telemetry   ", sampled)):
        print(f"{name}: median {statistics.median(runs):8.2f} img/s  "
              f"(min {min(runs):.1f}, max {max(runs):.1f})")  # fmt: skip
    print(f"slowdown of the medians: {100 * (1 - b / a):+.2f} %")
    if cost:
        per = statistics.median(cost)
        print(f"sampler CPU per sample: median {1000 * per:.2f} ms "
              f"(min {1000 * min(cost):.2f}, max {1000 * max(cost):.2f}) = "
              f"{100 * per / args.interval:.2f} % of one core at {args.interval} s")  # fmt: skip


if __name__ == "__main__":
    main()
