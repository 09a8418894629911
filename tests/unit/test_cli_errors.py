"""Every dlperf command refuses bad input with one message that names the flag (or argument) and
says what to give instead, points at the command's --help, exits 2 and writes nothing."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from dlperf.cli import main

REPO = Path(__file__).resolve().parents[2]

# (argv; OUT is a path that must not be created, MISSING one that does not exist, TMP the test's
# directory), the command as the message names it, what the message starts with (the flag and
# the bad value), and the words that say how to fix it.
CASES = [
    (["train", "--model", "nope", "--output", "OUT"], "train", "--model 'nope'", "choose from"),
    (["train", "--batch-size", "0", "--output", "OUT"], "train", "--batch-size 0", "must be > 0"),
    (["train", "--data", "MISSING", "--output", "OUT"], "train", "--data MISSING",
     "give 'synthetic' or a .rec file"),
    (["train", "--val-data", "MISSING", "--output", "OUT"], "train", "--val-data MISSING",
     "give the validation .rec file"),
    (["train", "--mode", "tta", "--output", "OUT"], "train", "--mode tta",
     "needs real --data and --val-data"),
    (["train", "--warmup-iterations", "0", "--output", "OUT"], "train", "--warmup-iterations 0",
     "the first step builds and tunes kernels and is never timed"),
    (["train", "--compile", "--output", "OUT"], "train", "--compile",
     "only the pytorch backend compiles"),
    (["data", "digits", "--image-size", "4", "--output", "OUT"], "data digits",
     "--image-size 4", "must be >= 8"),
    (["data", "prepare", "MISSING", "--output", "OUT.rec"], "data prepare", "ROOT MISSING",
     "give a folder with one sub-folder of images per class"),
    (["data", "prepare", "TMP", "--output", "OUT.txt"], "data prepare", "--output OUT.txt",
     "must end in .rec"),
    (["telemetry", "--interval", "0", "--output", "OUT"], "telemetry", "--interval 0",
     "must be > 0"),
    (["telemetry", "--duration", "0", "--output", "OUT"], "telemetry", "--duration 0.0",
     "leave it out to sample until stopped"),
    (["telemetry", "--interval", "nan", "--output", "OUT"], "telemetry", "--interval nan",
     "must be > 0"),
    (["telemetry", "--duration", "inf", "--output", "OUT"], "telemetry", "--duration inf",
     "leave it out to sample until stopped"),
    (["telemetry", "--duration", "1", "--output", "TMP"], "telemetry", "--output TMP",
     "cannot be written"),
    (["telemetry", "--duration", "1", "--output", "/dev/null/t.jsonl"], "telemetry",
     "--output /dev/null/t.jsonl", "cannot be written"),
    (["sweep", "--nodes", "1,x", "--results", "OUT"], "sweep", "--nodes '1,x'", "e.g. 1,2,4,8"),
    (["sweep", "--launcher", "hosts", "--results", "OUT"], "sweep", "--launcher hosts",
     "needs --hosts h1,h2"),
    (["sweep", "--launcher", "hosts", "--hosts", "n1, n1", "--nodes", "2", "--results", "OUT"],
     "sweep", "--hosts 'n1,n1'", "n1 appears twice"),
    (["sweep", "--launcher", "hosts", "--hosts", "n1:4,n2", "--results", "OUT"], "sweep",
     "--hosts 'n1:4,n2'", "the slots come from --procs-per-node"),
    (["sweep", "--results", "OUT", "--output", "x"], "sweep", "--output",
     "set by the sweep for each point; do not pass it"),
    (["sweep", "--results", "OUT", "--timeout", "0"], "sweep", "--timeout 0",
     "seconds a point may run"),
    (["sweep", "--results", "OUT", "--run_id", "r1"], "sweep", "--run_id r1",
     "neither a dlperf sweep flag nor a dlperf train one"),
    (["sweep", "--results", "OUT", "--batch-size", "0"], "sweep", "--batch-size 0",
     "must be > 0"),
    (["sweep", "--results", "OUT", "--batch-size", "x"], "sweep",
     "argument --batch-size: invalid int value", "passed on to dlperf train"),
    (["sweep", "--results", "OUT", "--mode", "tta"], "sweep", "--mode tta",
     "needs real --data and --val-data"),
    (["sweep", "--results", "OUT", "--telemetry-interval", "nan"], "sweep",
     "--telemetry-interval nan", "must be > 0"),
    (["sweep", "--results", "OUT", "--sbatch-arg=--nodes=1"], "sweep",
     "--sbatch-arg '--nodes=1'", "the point's batch script sets --nodes itself"),
    (["sweep", "--results", "/dev/null/results", "--nodes", "1"], "sweep",
     "--results /dev/null/results: cannot write", "give a results directory you can write"),
    (["report", "MISSING", "--output", "OUT"], "report", "RESULTS MISSING",
     "give the directory of one sweep"),
    (["report", "TMP", "--output", "OUT"], "report", "RESULTS TMP",
     "give the directory of one sweep"),
    (["allreduce", "--megabytes", "0", "--output", "OUT"], "allreduce", "--megabytes 0",
     "must be in (0, 4096]"),
    (["reproduce", "--project", "REPO", "--inventory", "inventory/nowhere", "--results", "OUT"],
     "reproduce", "--inventory inventory/nowhere", "give an inventory directory or file"),
    (["reproduce", "--project", "REPO", "--run-id", "a b", "--results", "OUT"], "reproduce",
     "--run-id 'a b'", "use only letters, digits"),
    (["reproduce", "--project", "REPO", "--run-id", ".hidden", "--results", "OUT"], "reproduce",
     "--run-id '.hidden'", "start with a letter or digit"),
    (["sweep", "--results", "OUT", "--run-id", "../up"], "sweep", "--run-id '../up'",
     "use only letters, digits"),
    (["sweep", "--results", "OUT", "--run-id", "r\u00e9"], "sweep", "--run-id 'r\u00e9'",
     "use only letters, digits"),
    (["reproduce", "--project", "TMP", "--results", "OUT"], "reproduce", "--project TMP",
     "point --project at it"),
    (["model", "--node-throughput", "100", "--overlap", "2"], "model", "--overlap 2",
     "between 0 and 1"),
    (["model", "--node-throughput", "100", "--nodes", "x"], "model", "--nodes 'x'",
     "give node counts such as 1,2,4,8"),
    (["model", "--node-throughput", "100", "--train-images", "0"], "model", "--train-images 0",
     "images in one epoch"),
    (["data", "prepare", "TMP", "--output", "OUT.rec", "--resize", "0"], "data prepare",
     "--resize 0", "must be >= 8 pixels"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "command", "starts", "fix"), CASES, ids=[" ".join(c[0][:3]) for c in CASES]
)
def test_bad_input_names_the_flag_and_the_fix(tmp_path, capsys, argv, command, starts, fix):
    names = {
        "OUT": str(tmp_path / "out"),
        "MISSING": str(tmp_path / "missing"),
        "TMP": str(tmp_path),
        "REPO": str(REPO),
    }

    def fill(text: str) -> str:
        for key, value in names.items():
            text = text.replace(key, value)
        return text

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    assert main([fill(a) for a in argv]) == 2
    # a refused command leaves this process's signal handlers as they were
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith(f"dlperf {command}: error: {fill(starts)}"), lines
    assert fix in lines[0], lines
    assert lines[1:] == [f"(dlperf {command} --help: every flag, and an example)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a refused command wrote something"


def test_a_sweep_without_horovodrun_is_refused_before_anything_starts(
    tmp_path, capsys, monkeypatch
):
    """A controller with the dlperf wheel alone (Horovod is the train extra's): the sweep names
    the missing launcher instead of failing in its first point. Its plan needs none."""
    python = tmp_path / "venv" / "bin" / "python"  # a venv without Horovod, not on PATH
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    results = tmp_path / "results"
    assert main(["sweep", "--nodes", "1", "--results", str(results)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith(
        f"dlperf sweep: error: --launcher local: no horovodrun beside {python} or on PATH"
    ), lines
    assert not results.exists()
    dry = ["sweep", "--nodes", "1", "--results", str(results), "--dry-run"]
    assert main(dry) == 0
    assert "horovodrun" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["train", "allreduce"])
@pytest.mark.parametrize(
    ("backend", "module", "fix"),
    [
        ("mxnet", "mxnet", "MXNet is not installed here; install dlperf[cpu]"),
        ("pytorch", "torch", "PyTorch is not installed here; install dlperf[pytorch]"),
    ],
)
def test_a_backend_whose_framework_is_missing_is_refused(
    tmp_path, capsys, monkeypatch, command, backend, module, fix
):
    """A node without the chosen framework (a GPU node with PyTorch alone, say) gets the install
    hint, not an ImportError traceback."""
    monkeypatch.setitem(sys.modules, module, None)  # `import <module>` fails as if absent
    for part in ("engine", "allreduce"):
        monkeypatch.delitem(sys.modules, f"dlperf.train.{backend}.{part}", raising=False)
    out = tmp_path / "out"
    assert main([command, "--backend", backend, "--output", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith(f"dlperf {command}: error: --backend {backend}: {fix}"), lines
    other = "pytorch" if backend == "mxnet" else "mxnet"
    assert lines[0].endswith(f"or use --backend {other}"), lines
    assert lines[1:] == [f"(dlperf {command} --help: every flag, and an example)"]
    assert not out.exists()


def _gpus(framework: str) -> int:
    if framework == "torch":
        import torch

        return torch.cuda.device_count()
    import mxnet

    return mxnet.context.num_gpus()


@pytest.mark.parametrize(
    ("argv", "command", "framework"),
    [
        (["train", "--backend", "pytorch"], "train", "torch"),
        (["train", "--backend", "mxnet"], "train", "mxnet"),
        (["allreduce", "--iterations", "2", "--warmup", "1"], "allreduce", "mxnet"),
    ],
    ids=["train pytorch", "train mxnet", "allreduce"],
)
def test_device_gpu_without_a_gpu_is_refused(tmp_path, capsys, argv, command, framework):
    """`--device gpu` where the framework sees no GPU says so and what to use instead."""
    if _gpus(framework):
        pytest.skip(f"{framework} sees a GPU here")
    out = tmp_path / "out"
    assert main([*argv, "--device", "gpu", "--output", str(out)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    name = {"torch": "PyTorch", "mxnet": "MXNet"}[framework]
    assert lines[0] == (
        f"dlperf {command}: error: --device gpu: {name} sees no GPU here (a CPU build of "
        f"{framework}, or no NVIDIA driver); use --device auto or cpu"
    ), lines
    assert lines[1:] == [f"(dlperf {command} --help: every flag, and an example)"]
    assert not out.exists()
