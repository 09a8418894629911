#!/usr/bin/env python3
"""Telemetry overhead: `dlperf train` throughput with and without `dlperf telemetry` sampling
on the same machine, alternating runs. Prints img/s of both and the overhead (goal <= 1 %).

    .venv/bin/python benchmarks/telemetry_overhead.py --interval 1 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent


def train(args, out: Path) -> float:
    cmd = [
        str(BIN / "dlperf"),
        "train",
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
    p.add_argument("--model", default="resnet50_v1.5")
    p.add_argument("--width", type=float, default=0.25)
    p.add_argument("--image-size", type=int, default=112)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    plain, sampled = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for i in range(args.repeats):
            plain.append(train(args, tmp / f"plain{i}"))
            sampler = subprocess.Popen(
                [
                    str(BIN / "dlperf"),
                    "telemetry",
                    "--output",
                    str(tmp / f"t{i}.jsonl"),
                    "--interval",
                    str(args.interval),
                ]
            )
            try:
                sampled.append(train(args, tmp / f"sampled{i}"))
            finally:
                sampler.send_signal(signal.SIGTERM)
                sampler.wait(timeout=30)
            rows = len((tmp / f"t{i}.jsonl").read_text().splitlines()) - 1
    a, b = sum(plain) / len(plain), sum(sampled) / len(sampled)
    print(
        f"workload: {args.model} width {args.width} {args.image_size}px batch {args.batch_size}, "
        f"{args.iterations} steps; sampling every {args.interval} s ({rows} samples last run)"
    )
    print(f"without telemetry: {a:8.2f} img/s  ({', '.join(f'{x:.1f}' for x in plain)})")
    print(f"with telemetry   : {b:8.2f} img/s  ({', '.join(f'{x:.1f}' for x in sampled)})")
    print(f"overhead: {100 * (1 - b / a):+.2f} %")


if __name__ == "__main__":
    main()
