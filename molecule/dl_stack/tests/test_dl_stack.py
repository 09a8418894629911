"""dl_stack: a wheelhouse filled once on the head node, installed offline on every node."""

from __future__ import annotations

import re

import pytest

VENV = "/opt/dlperf/venv"


@pytest.fixture(scope="module", params=["dlstack-head", "dlstack-node"])
def node(request, podman):
    return podman(request.param)


def as_bench_user(node, command: str, *args: str):
    """Run COMMAND (testinfra quotes each %s argument) as the benchmark user."""
    return node.run("runuser -u dlperf -- env OMP_NUM_THREADS=1 " + command, *args)


def test_wheelhouse_holds_one_built_horovod_and_the_pinned_wheels(podman):
    head = podman("dlstack-head")
    wheels = head.check_output("ls /export/shared/wheelhouse").split()
    assert "dlperf-0.1.0-py3-none-any.whl" in wheels
    assert any(w.startswith("mxnet-1.9.1-") for w in wheels), wheels
    assert any(w.startswith("numpy-1.23.5-") for w in wheels), wheels
    built = head.check_output("ls /export/shared/wheelhouse/horovod-cpu").split()
    assert len(built) == 1 and built[0].startswith("horovod-0.28.1-cp311-"), built
    owner = head.file("/export/shared/wheelhouse/horovod-cpu/" + built[0]).user
    assert owner == "dlperf"  # built by the benchmark user, not root


def test_the_horovod_build_ran_in_the_environment_the_inventory_gave_it(podman):
    # dl_stack_horovod_build_env routes the compiler through ccache (molecule.yml): every
    # compilation of this run's build went to it, hit or miss.
    stats = podman("dlstack-head").check_output("CCACHE_DIR=/var/cache/ccache ccache --print-stats")
    counters = dict(line.split("\t") for line in stats.splitlines() if "\t" in line)
    calls = sum(
        int(counters.get(k, 0))
        for k in ("direct_cache_hit", "preprocessed_cache_hit", "cache_miss")
    )
    assert calls >= 50, stats  # Horovod and Gloo: about 77 compilations


def test_the_wheelhouse_record_names_the_dlperf_wheel_and_every_wheel_it_holds(podman):
    # While this record matches, a converge skips pip download (no index is asked).
    head = podman("dlstack-head")
    house = "/export/shared/wheelhouse"
    key, *names = head.file(f"{house}/.dl-stack-downloaded").content_string.splitlines()
    sha1, extras = key.split()[:2]
    assert sha1 == head.check_output(f"sha1sum {house}/dlperf-0.1.0-py3-none-any.whl").split()[0]
    # the head's extras and the compute node's, which asks for the PyTorch engine too
    assert extras == "train,cpu;train,cpu,pytorch", key
    assert names == sorted(head.check_output(f"cd {house} && ls *.whl").split())


def test_compute_node_has_no_compiler(podman):
    # Only the build host gets build-essential: nodes install wheels, they build nothing.
    assert not podman("dlstack-node").package("build-essential").is_installed
    assert podman("dlstack-head").package("build-essential").is_installed


def test_venv_belongs_to_the_benchmark_user_with_the_pinned_versions(node):
    assert node.file(VENV).user == "dlperf"
    freeze = node.check_output(f"{VENV}/bin/pip list --format=freeze").splitlines()
    for pin in ("mxnet==1.9.1", "numpy==1.23.5", "horovod==0.28.1", "dlperf==0.1.0"):
        assert pin in freeze, freeze


def _dist(line: str) -> str:
    name, version = line.split("==")
    return re.sub(r"[-_.]+", "-", name).lower() + "==" + version


def test_the_venv_record_names_its_wheels_and_exactly_what_pip_sees(node):
    # A venv that still holds what this record lists skips pip on the next run.
    record = node.file(f"{VENV}/.dl-stack-installed").content_string.splitlines()
    *checksums, extras = record[0].split()
    expected = "train,cpu,pytorch" if node.backend.hostname == "dlstack-node" else "train,cpu"
    assert extras == expected, record[0]
    # the head holds the wheelhouse on its export, the compute node on the mount
    wheelhouse = next(
        p for p in ("/export/shared/wheelhouse", "/shared/wheelhouse") if node.file(p).is_directory
    )
    sums = node.check_output(
        f"sha256sum {wheelhouse}/dlperf-*.whl {wheelhouse}/horovod-cpu/horovod-*.whl"
    )
    assert sorted(checksums) == sorted(line.split()[0] for line in sums.splitlines())
    freeze = node.check_output(f"{VENV}/bin/pip list --format=freeze").splitlines()
    assert sorted(map(_dist, record[1:])) == sorted(map(_dist, freeze))


def test_horovod_was_built_for_mxnet_with_gloo_and_mpi(node):
    out = as_bench_user(node, f"{VENV}/bin/horovodrun --check-build")
    assert out.rc == 0, out.stderr
    for line in ("[X] MXNet", "[X] MPI", "[X] Gloo"):
        assert line in out.stdout, out.stdout


@pytest.mark.parametrize(
    ("host", "backend"),
    [("dlstack-head", "mxnet"), ("dlstack-node", "mxnet"), ("dlstack-node", "pytorch")],
)
def test_validate_ymls_two_process_allreduce_runs_from_the_venv(podman, host, backend):
    """validate.yml's allreduce as it runs it (horovodrun --gloo, dlperf allreduce), each
    backend where it is installed: the sum of ranks 1 and 2 checked in every element."""
    node, summary = podman(host), f"/tmp/allreduce-{backend}.json"
    node.run(f"rm -f {summary}")  # a summary of an earlier verify proves nothing
    out = as_bench_user(
        node,
        f"{VENV}/bin/horovodrun -np 2 -H localhost:2 --gloo {VENV}/bin/dlperf allreduce "
        f"--backend {backend} --megabytes 1 --iterations 2 --output {summary}",
    )
    assert out.rc == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert f"over 2 rank(s) on 1 host(s) ({backend}, gloo, cpu tensors): correct" in out.stdout
    assert '"correct": true' in node.file(summary).content_string


def test_dlperf_cli_runs_from_the_venv(node):
    out = as_bench_user(node, f"{VENV}/bin/dlperf --help")
    assert out.rc == 0 and "train" in out.stdout, out.stderr


def test_only_the_node_that_asked_for_pytorch_has_it(podman):
    head, node = podman("dlstack-head"), podman("dlstack-node")
    assert "torch==" not in head.check_output(f"{VENV}/bin/pip list --format=freeze")
    freeze = node.check_output(f"{VENV}/bin/pip list --format=freeze").splitlines()
    assert any(line.startswith("torch==2.13.0") for line in freeze), freeze


def test_the_pytorch_engine_trains_from_the_venv(podman):
    node = podman("dlstack-node")
    out = "/tmp/dlperf-pytorch-check"
    command = (
        f"{VENV}/bin/dlperf train --backend pytorch --model resnet18_v1.5 --width-multiplier 0.25 "
        f"--image-size 32 --batch-size 8 --classes 10 --iterations 4 --warmup-iterations 1 "
        f"--output {out}"
    )
    run = as_bench_user(node, command)
    assert run.rc == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "(pytorch, cpu, float32)" in run.stdout
    assert '"backend": "pytorch"' in node.file(f"{out}/result.json").content_string
