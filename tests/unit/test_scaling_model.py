"""`dlperf model`: the alpha-beta scaling model against hand-computed cases, and its CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from dlperf.model import ModelInputs, comm_time, predict

BIN = Path(sys.executable).parent
# ResNet-50 v1.5 in float16: 25,557,032 parameters x 2 bytes
S16 = 51_114_064


def seed_node(**overrides) -> ModelInputs:
    # one C4140-M at DLE's published 4-V100 AMP rate, EDR
    values = dict(
        node_throughput=5357.0,
        gpus_per_node=4,
        batch_per_gpu=192,
        gradient_bytes=S16,
        bandwidth_gbit=100.0,
        latency_us=5.0,
    )
    return ModelInputs(**{**values, **overrides})


def test_the_ring_over_two_nodes_by_hand():
    # One ring over the 8 GPUs of two nodes, as NCCL and Horovod run it: each node's link
    # carries 2 x 7/8 of the gradients. t1 = 768 / 5357 = 143.364 ms;
    # t_comm = 14 x 5 us + (14/8) x 51.114 MB / 12.5 GB/s = 0.070 ms + 7.1560 ms = 7.2260 ms;
    # step 150.590 ms; 1536 / 0.150590 = 10200 img/s
    inputs = seed_node()
    assert inputs.step_time_1 == pytest.approx(0.143364, abs=1e-6)
    t, source = comm_time(inputs, 2)
    assert source == "alpha-beta" and t == pytest.approx(0.0072260, abs=1e-7)
    one, two = predict(inputs, [1, 2])
    assert one["throughput"] == pytest.approx(5357.0) and one["comm_s"] == 0.0
    assert two["step_s"] == pytest.approx(0.150590, abs=1e-6)
    assert two["throughput"] == pytest.approx(10200.0, abs=1.0)
    assert two["efficiency"] == pytest.approx(10200.0 / 10714.0, abs=1e-4)
    assert two["largest_loss"] == "communication"


def test_eight_nodes_of_four_gpus_move_thirty_one_thirty_seconds_twice():
    # 62 x 5 us + (62/32) x 51.114 MB / 12.5 GB/s = 0.31 ms + 7.9227 ms
    t, _ = comm_time(seed_node(), 8)
    assert t == pytest.approx(0.0082327, abs=1e-7)


def test_one_gpu_per_node_is_a_ring_over_the_nodes():
    # 2 x 1 x 5 us + (2/2) x 51.114 MB / 12.5 GB/s = 0.01 ms + 4.0891 ms
    t, _ = comm_time(seed_node(gpus_per_node=1), 2)
    assert t == pytest.approx(0.0040991, abs=1e-7)


def test_overlap_hides_that_share_of_the_allreduce():
    hidden = predict(seed_node(overlap=0.5), [2])[0]
    assert hidden["step_s"] == pytest.approx(0.143364 + 0.0072260 / 2, abs=1e-6)


def test_a_measured_allreduce_replaces_the_fabrics_nominal_numbers():
    # dlperf allreduce moved 4 MB in 1 ms between 8 nodes: 4 GB/s algbw -> 51.114 MB in 12.78 ms
    inputs = seed_node(allreduce={8: (4_000_000.0, 0.001)})
    t, source = comm_time(inputs, 8)
    assert source == "measured" and t == pytest.approx(0.0127785, abs=1e-7)
    assert comm_time(inputs, 4)[1] == "alpha-beta"


def test_the_input_ceiling_caps_throughput_and_is_named():
    # 4800 img/s a node: the ceiling takes 1 - 9600/10200 = 5.9 %, more than the ring's 4.8 %
    rows = predict(seed_node(input_ceiling=4800.0), [1, 2])
    assert rows[0]["throughput"] == 4800.0 and rows[1]["throughput"] == 9600.0
    assert rows[1]["largest_loss"] == "input"
    assert rows[1]["loss_input"] == pytest.approx(1 - 9600.0 / 10200.0, abs=1e-4)


def test_time_to_accuracy_takes_the_epochs_per_node_count():
    rows = predict(seed_node(epochs={1: 61, 8: 81}), [1, 8])
    # 61 epochs x 1,281,167 images / 5357 img/s = 14589 s
    assert rows[0]["tta_s"] == pytest.approx(61 * 1_281_167 / 5357.0)
    assert rows[1]["loss_convergence"] == pytest.approx(1 - 61 / 81)
    assert rows[1]["tta_speedup"] == pytest.approx(
        rows[1]["throughput"] / 5357.0 * 61 / 81, rel=1e-9
    )
    assert rows[1]["largest_loss"] == "convergence"


def test_time_to_accuracy_without_one_nodes_epochs_is_still_predicted():
    rows = predict(seed_node(epochs={2: 62, 8: 81}), [1, 2, 8])
    assert rows[0]["tta_s"] is None
    assert rows[1]["tta_s"] == pytest.approx(62 * 1_281_167 / rows[1]["throughput"])
    assert rows[2]["tta_s"] == pytest.approx(81 * 1_281_167 / rows[2]["throughput"])
    assert rows[1]["loss_convergence"] is None  # no one-node epochs to lose against


def dlperf(*args, check=True):
    proc = subprocess.run([str(BIN / "dlperf"), "model", *args], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_the_command_prints_its_inputs_and_writes_json(tmp_path):
    summary = tmp_path / "allreduce.json"
    summary.write_text(json.dumps({"hosts": ["a", "b"], "world_size": 8, "correct": True,
                                   "bytes": 4e6, "median_s": 0.002}))  # fmt: skip
    out = tmp_path / "model.json"
    proc = dlperf("--node-throughput", "5357", "--seed-epochs", "--nodes", "2,8", "--allreduce",
                  str(summary), "--json", str(out), "--label", "what-if")  # fmt: skip
    head = proc.stdout.splitlines()[0]
    assert head.startswith("what-if: 5357 img/s on one node (4 GPUs x 192") and "100 Gb/s" in head
    record = json.loads(out.read_text())
    assert [r["nodes"] for r in record["rows"]] == [1, 2, 8]
    assert [r["comm_source"] for r in record["rows"]] == ["one node", "measured", "alpha-beta"]
    assert record["inputs"]["epochs"] == {"1": 61, "2": 62, "4": 65, "8": 81}


def test_a_narrow_model_moves_its_own_gradients():
    # ResNet-18 at width 0.125 with 10 classes (the virtual cluster's): 177,362 parameters
    proc = dlperf("--node-throughput", "45", "--model", "resnet18_v1.5", "--width-multiplier",
                  "0.125", "--classes", "10", "--precision", "float32", "--gpus-per-node", "1",
                  "--batch-per-gpu", "16", "--nodes", "1,2")  # fmt: skip
    assert "gradients 0.7 MB" in proc.stdout.splitlines()[0], proc.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--node-throughput", "0"], "--node-throughput 0.0: must be > 0"),
        (["--node-throughput", "10", "--nodes", "0,2"], "--nodes '0,2'"),
        (["--node-throughput", "10", "--overlap", "2"], "--overlap 2.0"),
        (["--node-throughput", "10", "--epochs", "1=x"], "--epochs '1=x'"),
        (["--node-throughput", "10", "--model", "vgg"], "--model vgg"),
        (["--node-throughput", "10", "--width-multiplier", "0"], "--width-multiplier 0.0"),
        (
            ["--node-throughput", "10", "--allreduce", "/nonexistent.json"],
            "--allreduce /nonexistent",
        ),
        # what is not a finite number is refused too (NaN passes every comparison's "not")
        (["--node-throughput", "inf"], "--node-throughput inf: must be > 0"),
        (["--node-throughput", "nan"], "--node-throughput nan: must be > 0"),
        (["--node-throughput", "10", "--width-multiplier", "inf"], "--width-multiplier inf"),
        (["--node-throughput", "10", "--bandwidth-gbit", "nan"], "--bandwidth-gbit nan"),
        (["--node-throughput", "10", "--latency-us", "inf"], "--latency-us inf"),
        (["--node-throughput", "10", "--input-ceiling", "nan"], "--input-ceiling nan"),
        (["--node-throughput", "10", "--epochs", "1=nan,2=62"], "--epochs '1=nan,2=62'"),
        (
            ["--node-throughput", "10", "--epochs", "1=61", "--seed-epochs"],
            "--epochs '1=61' and --seed-epochs: give one",
        ),
        (["--node-throughput", "10", "--json", "/"], "--json /: cannot be written"),
    ],
)
def test_bad_input_is_refused_naming_the_flag(args, needle):
    proc = dlperf(*args, check=False)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("summary", "needle"),
    [
        ({"correct": False, "world_size": 8}, "was WRONG"),
        ({"median_s": 0, "world_size": 8}, "is no bandwidth"),
        ({"bytes": 0}, "is no bandwidth"),
        # validate.yml's check runs one rank per node: not the ring of 4 GPUs per node
        ({"world_size": 2}, "measured 2 rank(s) on 2 node(s), the model's ring has 8"),
    ],
)
def test_an_allreduce_summary_that_cannot_stand_for_the_ring_is_refused(tmp_path, summary, needle):
    path = tmp_path / "allreduce.json"
    base = {"hosts": ["a", "b"], "correct": True, "bytes": 4e6, "median_s": 0.002}
    path.write_text(json.dumps({**base, **summary}))
    args = ("--node-throughput", "10", "--gpus-per-node", "4", "--allreduce", str(path))
    proc = dlperf(*args, check=False)
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


def test_two_summaries_of_one_node_count_are_refused_and_an_unused_one_is_named(tmp_path):
    paths = []
    for name, hosts in (("a", ["a", "b"]), ("b", ["c", "d"]), ("c", ["a", "b", "c"])):
        paths.append(tmp_path / f"{name}.json")
        summary = {"hosts": hosts, "world_size": 4 * len(hosts), "correct": True, "bytes": 4e6}
        paths[-1].write_text(json.dumps({**summary, "median_s": 0.002}))
    both = ("--allreduce", str(paths[0]), "--allreduce", str(paths[1]))
    proc = dlperf("--node-throughput", "10", *both, check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"--allreduce {paths[1]}: a second summary of 2 node(s) (the first: {paths[0]})" in (
        proc.stderr
    )
    # a 3-node summary on --nodes 1,2,4 stands for no row: said, and the fabric's numbers used
    proc = dlperf("--node-throughput", "10", "--nodes", "1,2,4", "--allreduce", str(paths[2]))
    assert f"--allreduce {paths[2]}: 3 node(s) is not among --nodes 1,2,4; not used" in proc.stderr
    assert "measured" not in proc.stdout


def test_the_printout_names_each_measured_allreduce_and_the_rows_it_stands_for(tmp_path):
    summary = tmp_path / "allreduce.json"
    summary.write_text(json.dumps({"hosts": ["a", "b"], "world_size": 8, "correct": True,
                                   "bytes": 4e6, "median_s": 0.002}))  # fmt: skip
    proc = dlperf("--node-throughput", "5357", "--nodes", "2,4", "--allreduce", str(summary),
                  "--train-images", "1000")  # fmt: skip
    lines = proc.stdout.splitlines()
    assert f"allreduce measured on 2 node(s): 4.0 MB in 2.00 ms, algbw 2.00 GB/s ({summary})" in (
        lines
    ), lines
    assert "1,000 training images per epoch" in lines[0], lines[0]
    rows = {line.split()[0]: line for line in lines if line.strip()[:1].isdigit()}
    assert rows["2"].endswith("measured") and rows["4"].endswith("alpha-beta"), rows
