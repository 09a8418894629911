#!/usr/bin/env python3
"""Launch overhead: the time from asking a launcher to start a sweep point to the point's first
timed step (mllog's run_start, recorded by every launcher as `launch_to_run_start_s`), for
`--launcher slurm` against horovodrun (`local`, or `hosts` with --hosts), alternating runs of
the same point. Prints both (median, min-max) and the difference of the medians; everything
between the two launchers' start and the first step (imports, data and model setup) is the
same, so the difference is what Slurm's submission, scheduling and step launch add.

On a cluster (run as the benchmark user where sbatch works, results on shared storage):
    python benchmarks/launch_overhead.py --hosts c4140-01 --procs-per-node 4 --results /shared/lo
On one machine, against a one-node Slurm this script starts itself (root; the training tier's):
    .venv/bin/python benchmarks/launch_overhead.py --local-slurm --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[1]
TRAIN = ["--model", "resnet18_v1.5", "--width-multiplier", "0.25", "--image-size", "32"]
TRAIN += ["--batch-size", "16", "--iterations", "6", "--warmup-iterations", "2"]


def point(args, launcher: str, results: Path, run_id: str, env: dict) -> float:
    cmd = [str(BIN / "dlperf"), "sweep", "--quiet", "--launcher", launcher, "--nodes", "1"]
    cmd += ["--procs-per-node", str(args.procs_per_node), "--results", str(results)]
    cmd += ["--run-id", run_id, *(["--hosts", args.hosts] if launcher == "hosts" else []), *TRAIN]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    result = json.loads((results / run_id / "1nodes" / "result.json").read_text())
    if proc.returncode != 0 or result["status"] != "ok":
        sys.exit(f"{launcher} point failed:\n{proc.stdout}{proc.stderr}{result.get('error')}")
    return result["provenance"]["launch"]["launch_to_run_start_s"]


def summary(name: str, values: list[float]) -> str:
    return (
        f"{name:>6}: median {statistics.median(values):6.2f} s "
        f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per launcher (alternating)")
    parser.add_argument("--procs-per-node", type=int, default=2, help="ranks on the node")
    parser.add_argument("--hosts", default="", help="compare with --launcher hosts on this host")
    parser.add_argument("--results", type=Path, default=None, help="results root (shared)")
    parser.add_argument(
        "--local-slurm", action="store_true", help="start a one-node Slurm here for the runs"
    )
    args = parser.parse_args()
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    env.setdefault("OMP_NUM_THREADS", "1")
    cluster = None
    with tempfile.TemporaryDirectory() as tmp:
        if args.local_slurm:
            sys.path.insert(0, str(REPO))
            from tests.training.slurm import LocalSlurm

            cluster = LocalSlurm(Path(tmp) / "slurm").start()
            env["SLURM_CONF"] = cluster.env["SLURM_CONF"]
        results = args.results or Path(tmp) / "results"
        other = "hosts" if args.hosts else "local"
        times: dict[str, list[float]] = {other: [], "slurm": []}
        try:
            for i in range(args.repeats):
                for launcher in (other, "slurm"):
                    times[launcher].append(point(args, launcher, results, f"{launcher}-{i}", env))
                    print(f"run {i + 1}: {launcher} {times[launcher][-1]:.2f} s", flush=True)
        finally:
            if cluster:
                cluster.stop()
    print("launch to first timed step (sweep asks the launcher -> mllog run_start):")
    print(summary(other, times[other]))
    print(summary("slurm", times["slurm"]))
    diff = statistics.median(times["slurm"]) - statistics.median(times[other])
    print(f"slurm - {other}: {diff:+.2f} s (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
