"""benchmarks/gpu_proof.sh, run whole on this CPU machine before a GPU node's minutes go to it.

The script is meant for one short run on a lent or new GPU node, where a wrong flag or a broken
summary would waste the run. Here it runs with DEVICE=cpu, a tiny network and the fixture
nvidia-smi of a C4140 configuration M: every step, its saved outputs and its summary are real.
"""

from __future__ import annotations

import re
import signal
import subprocess
import tarfile
from pathlib import Path

from .conftest import BIN, ENV, run

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "nvidia-smi" / "c4140-m"
PYTORCH_RUNS = ["pytorch-nhwc", "pytorch-nhwc-compile", "pytorch-nchw"]
RECORD_RUNS = ["pytorch-dali", "pytorch-native"]


def proof_env(tmp_path: Path, **settings: str) -> dict:
    """The script's environment on this CPU machine: its scratch directory under tmp_path."""
    (tmp_path / "scratch").mkdir()
    return dict(
        ENV,
        PATH=f"{ROOT / 'tests' / 'fixtures' / 'bin'}:{ENV['PATH']}",
        NVSMI_FIXTURE=str(FIXTURE),
        PYTHON=str(BIN / "python"),
        DEVICE="cpu",
        BATCH="8",
        ITERS="6",
        WARMUP="2",
        IMAGES="48",
        MODEL_ARGS="--model resnet18_v1.5 --width-multiplier 0.125 --image-size 32",
        SCRATCH=str(tmp_path / "scratch"),  # not TMPDIR: torch.compile keeps its cache there
        **settings,
    )


def test_gpu_proof_runs_every_step_and_summarises(tmp_path):
    out = tmp_path / "proof"
    env = proof_env(tmp_path)
    proc = run(["bash", str(ROOT / "benchmarks" / "gpu_proof.sh"), str(out)], env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    # 1. nvidia-smi's outputs are saved byte for byte, in the fixture layout
    for name in ("query.csv", "q.txt", "topo.txt"):
        assert (out / "fixture" / name).read_bytes() == (FIXTURE / name).read_bytes(), name

    # 3.-5. one row per run: every PyTorch run measured a rate; MXNet's NHWC run, refused on a
    # CPU, is reported with the refusal instead of silently missing
    summary = (out / "summary.txt").read_text()
    # the node as this Python sees it: its torch, the CUDA it is built for, the GPUs it sees
    node = re.search(
        r"^python 3\.\d+\S*; torch (\S+) \(CUDA (\S+)\): (.+); /dev/shm", summary, re.M
    )
    assert node, summary
    import torch

    assert node.groups()[:2] == (torch.__version__, str(torch.version.cuda)), summary
    assert (node.group(3) == "no GPU seen") is not torch.cuda.is_available(), summary
    rows = {line.split()[0]: line for line in summary.splitlines() if line.strip()}
    for name in [*PYTORCH_RUNS, *RECORD_RUNS, "mxnet-nchw"]:
        assert re.match(rf"{name}\s+ok\s+\d+ img/s", rows.get(name, "")), (name, summary)
    assert "dali" in rows["pytorch-dali"] and "native" in rows["pytorch-native"], summary
    assert re.search(r"no result: .*--layout NHWC", rows.get("mxnet-nhwc", "")), summary
    # one rank's allreduce through each backend, checked
    assert re.match(r"allreduce-pytorch\s+correct 64 MB on 1 rank\(s\), gloo cpu", rows.get(
        "allreduce-pytorch", "")), summary  # fmt: skip
    assert re.match(r"allreduce-mxnet\s+correct 64 MB on 1 rank\(s\), (gloo|mpi) cpu", rows.get(
        "allreduce-mxnet", "")), summary  # fmt: skip
    # the compiled run's first step holds its compile time, longer than an eager first step
    first = {
        n: float(re.search(r"first step ([\d.]+) s", rows[n]).group(1))
        for n in ("pytorch-nhwc", "pytorch-nhwc-compile")
    }
    assert first["pytorch-nhwc-compile"] > first["pytorch-nhwc"], summary
    # the best synthetic-data rate set against the goal and the MLPerf-class rate
    best = re.search(
        r"^best synthetic rate: (\d+) img/s \((pytorch-n\S+)\): ([\d.]+) of", summary, re.M
    )
    assert best and best.group(2) in PYTORCH_RUNS, summary
    assert abs(float(best.group(3)) - int(best.group(1)) / 3000) < 0.01
    # telemetry sampled during the runs (no GPU source on this machine)
    samples = int(re.search(r"telemetry: (\d+) samples", summary).group(1))
    assert samples >= 3, summary

    # 2. gpu_facts over the saved outputs, and the module through Ansible (installed here)
    with tarfile.open(out / "runs.tar.gz") as tar:
        names = set(tar.getnames())
        facts = tar.extractfile("runs/gpu_facts.json").read().decode()
        module = tar.extractfile("runs/gpu_facts_module.txt").read().decode()
    assert '"layout": "direct_both_cpus"' in facts, facts
    assert "SUCCESS" in module and "direct_both_cpus" in module, module
    for name in [*PYTORCH_RUNS, *RECORD_RUNS, "mxnet-nchw"]:
        assert f"runs/{name}/result.json" in names, name
    assert "runs/telemetry.jsonl" in names
    assert {"runs/allreduce-pytorch.json", "runs/allreduce-mxnet.json"} <= names
    # the scratch records and images are gone; only the fixture, summary and archive stay
    assert sorted(p.name for p in out.iterdir()) == ["fixture", "runs.tar.gz", "summary.txt"]
    assert not list((tmp_path / "scratch").glob("gpu_proof.*"))


def test_a_run_past_its_step_limit_is_stopped_and_a_stopped_script_still_summarises(tmp_path):
    """A hang in one step (NCCL's set-up, a compile) must not take a GPU node's whole lease:
    each run is stopped after STEP_S seconds and says so; SIGTERM to the script part-way stops
    the run in progress and still writes the summary and the archive."""
    out = tmp_path / "proof"
    env = proof_env(tmp_path, STEP_S="1")  # no dlperf run is done within a second here
    proc = subprocess.Popen(
        ["bash", str(ROOT / "benchmarks" / "gpu_proof.sh"), str(out)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    seen = []
    for line in proc.stdout:  # two runs stopped at their limit, then the script itself
        seen.append(line)
        if line.startswith("=== train pytorch-nchw"):
            proc.send_signal(signal.SIGTERM)
            break
    seen += proc.stdout.readlines()
    assert proc.wait(timeout=120) == 143, "".join(seen)
    summary = (out / "summary.txt").read_text()
    rows = {line.split()[0]: line for line in summary.splitlines() if line.strip()}
    for name in ("pytorch-nhwc", "pytorch-nhwc-compile"):
        assert "no result: gpu_proof: stopped after STEP_S=1 s" in rows.get(name, ""), summary
    assert "gpu_proof: stopped\n" in "".join(seen)
    with tarfile.open(out / "runs.tar.gz") as tar:
        assert "runs/pytorch-nhwc.log" in tar.getnames()
    assert not list((tmp_path / "scratch").glob("gpu_proof.*"))
