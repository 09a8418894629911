"""dlperf[train,gpu,nccl] as a GPU node gets it (the pinned wheels, installed without an index, the
dlperf wheel's import hook), on a machine without a GPU: a stand-in for the driver's
libcuda.so.1 that finds no device, built from the driver functions libmxnet.so calls.

The real GPU build of MXNet loads with every CUDA library from NVIDIA's wheels; what is left to a
GPU machine is the driver and the kernels."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from dlperf.cuda_libs import CUDA11_LIBRARIES
from dlperf.train.mxnet import GPU_ARCHS

from tests.package.conftest import REPO, without_pythonpath

MXNET_DIST = "mxnet-cu112"


def cache_dir() -> Path:
    base = os.environ.get("DLPERF_CACHE") or Path.home() / ".cache" / "dlperf-cluster"
    return Path(base) / "gpu-wheels"


def pins() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [*project["dependencies"], *extras["train"], *extras["gpu"], *extras["nccl"]]


@pytest.fixture(scope="module")
def node(tmp_path_factory, dlperf_wheel):
    """A venv holding dlperf[train,gpu,nccl] installed from a wheelhouse with --no-index (3.7 GB;
    removed afterwards), and a directory with the stand-in libcuda.so.1."""
    work = tmp_path_factory.mktemp("gpu-node")
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    # 2.1 GB the first time; pip looks in the cache first and downloads what it lacks
    subprocess.run(
        [*pip, "download", "-q", "--dest", cache, "--find-links", cache, *pins()],
        check=True,
        capture_output=True,
        text=True,
    )
    subprocess.run([sys.executable, "-m", "venv", work / "venv"], check=True)
    subprocess.run(
        [
            work / "venv/bin/python",
            *pip[1:],
            "install",
            "-q",
            "--no-compile",
            "--no-index",
            "--find-links",
            cache,
            f"{dlperf_wheel}[train,gpu,nccl]",
        ],
        check=True,
        capture_output=True,
        text=True,
        env=without_pythonpath(),
    )
    site = next((work / "venv/lib").glob("python3.*/site-packages"))
    driver = work / "driver"
    driver.mkdir()
    stand_in_driver(site, driver)
    yield site, driver
    shutil.rmtree(work / "venv")


def stand_in_driver(site: Path, out: Path) -> None:
    """libcuda.so.1 with the driver functions libmxnet.so calls directly (those the CUDA
    libraries do not define), and cuInit, each answering CUDA_ERROR_NO_DEVICE (100)."""
    libs = [site / "nvidia" / part / "lib" / soname for part, soname in CUDA11_LIBRARIES]
    defined = set()
    for lib in libs:
        nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True)
        defined |= {line.split()[-1].split("@")[0] for line in nm.stdout.splitlines() if line}
    nm = subprocess.run(
        ["nm", "-D", "--undefined-only", site / "mxnet/libmxnet.so"],
        capture_output=True,
        text=True,
        check=True,
    )
    calls = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
    driver_calls = sorted(n for n in calls if re.match(r"cu[A-Z]", n) and n not in defined)
    assert driver_calls, "libmxnet.so calls no driver function directly: not a GPU build"
    source = out / "cuda.c"
    source.write_text(
        "".join(f"int {n}(void) {{ return 100; }}\n" for n in ["cuInit", *driver_calls])
    )
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", out / "libcuda.so.1", source],
        check=True,
    )


def run(node, code: str) -> subprocess.CompletedProcess:
    site, driver = node
    env = {**without_pythonpath(), "LD_LIBRARY_PATH": str(driver)}
    python = site.parents[2] / "bin" / "python"
    return subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, cwd=driver)


def test_the_gpu_build_of_mxnet_loads_its_cuda_libraries_from_the_wheels(node):
    site, _ = node
    proc = run(
        node,
        "import json, mxnet as mx;"
        "f = mx.runtime.Features();"
        "maps = [l.split()[-1] for l in open('/proc/self/maps') if '/nvidia/' in l];"
        "print(json.dumps({'features': [k for k in ('CUDA', 'CUDNN', 'NCCL') if f.is_enabled(k)],"
        "'gpus': mx.context.num_gpus(), 'libs': sorted(set(maps))}))",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["features"] == ["CUDA", "CUDNN", "NCCL"]
    assert seen["gpus"] == 0  # the stand-in driver finds no device
    expected = {str(site / "nvidia" / part / "lib" / so) for part, so in CUDA11_LIBRARIES}
    assert expected <= set(seen["libs"])


def test_without_the_hook_libmxnet_finds_none_of_them(node):
    proc = run(
        node,
        "import sys;"
        "hook = '_PreloadBeforeImport';"
        "sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != hook];"
        "import mxnet",
    )
    assert proc.returncode != 0
    missing = re.search(r"(lib\S+\.so[.\d]*): cannot open shared object file", proc.stderr)
    assert missing and missing.group(1) in {so for _, so in CUDA11_LIBRARIES}, proc.stderr[-2000:]


def needed(library: Path) -> set[str]:
    readelf = subprocess.run(["readelf", "-d", library], capture_output=True, text=True, check=True)
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf.stdout))


def test_the_hook_loads_exactly_the_cuda_libraries_libmxnet_needs(node):
    site, _ = node
    table = {so: site / "nvidia" / part / "lib" / so for part, so in CUDA11_LIBRARIES}
    mxnet = needed(site / "mxnet/libmxnet.so")
    from_wheels = {n for n in mxnet if list(site.glob(f"nvidia/*/lib/{n}"))}
    assert from_wheels <= set(table)
    # the rest of the table: what those libraries need in turn (cuBLASLt, for cuBLAS)
    assert set(table) - from_wheels <= set().union(*(needed(table[n]) for n in from_wheels))
    bundled = {p.name for p in (site / "mxnet").glob("*.so*")}
    system = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    elsewhere = {n for n in mxnet - from_wheels - bundled if f"{n} (" not in system}
    assert elsewhere <= {"libcuda.so.1"}  # the driver's, on a GPU node


def fatbin_code(library: Path) -> set[tuple[str, int]]:
    """(kind, architecture) of every entry in a library's .nv_fatbin section: kind "sm" for
    machine code, "compute" for PTX (fatbin header 0xBA55ED50; entry kind 1 PTX, 2 ELF)."""
    sections = subprocess.run(["readelf", "-SW", library], capture_output=True, text=True).stdout
    row = next(line for line in sections.splitlines() if " .nv_fatbin " in line)
    offset, size = (int(v, 16) for v in row.split("]", 1)[1].split()[3:5])
    with open(library, "rb") as f:
        f.seek(offset)
        data = f.read(size)
    found, pos = set(), 0
    while pos + 16 <= len(data):
        magic, _, header, fat_size = struct.unpack_from("<IHHQ", data, pos)
        if magic != 0xBA55ED50:
            pos += 8
            continue
        entry, end = pos + header, pos + header + fat_size
        while entry < end:
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", data, entry)
            arch = struct.unpack_from("<I", data, entry + 28)[0]
            found.add(({1: "compute", 2: "sm"}.get(kind, f"kind{kind}"), arch))
            entry += entry_header + payload
        pos = end
    return found


def test_the_engine_knows_which_gpus_the_wheel_has_code_for(node):
    site, _ = node
    code = fatbin_code(site / "mxnet/libmxnet.so")
    assert {f"{kind}_{arch}" for kind, arch in code} == set(GPU_ARCHS[MXNET_DIST])
