"""dlperf.cuda_libs: libraries under site-packages/nvidia/<part>/lib/ loaded globally before a
module whose shared library names them, with real shared objects built by the C compiler and
loaded by the real dynamic loader, in a fresh interpreter each."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from dlperf.cuda_libs import CUDA11_LIBRARIES, CUDA11_WHEELS

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmark"
TABLE = (("dep", "libdlperfdep.so.1"),)


def cc(*args) -> None:
    subprocess.run(["gcc", "-shared", "-fPIC", *map(str, args)], check=True)


@pytest.fixture
def site(tmp_path) -> Path:
    """A site directory as the wheels leave it: nvidia/dep/lib/libdlperfdep.so.1, and a package
    `fakemx` whose library needs it by soname and carries no path to it (as libmxnet.so)."""
    lib = tmp_path / "nvidia" / "dep" / "lib"
    lib.mkdir(parents=True)
    (tmp_path / "dep.c").write_text("int dlperf_dep(void) { return 42; }\n")
    cc("-Wl,-soname,libdlperfdep.so.1", "-o", lib / "libdlperfdep.so.1", tmp_path / "dep.c")
    pkg = tmp_path / "fakemx"
    pkg.mkdir()
    (tmp_path / "mx.c").write_text(
        "int dlperf_dep(void);\nint answer(void) { return dlperf_dep(); }\n"
    )
    cc("-o", pkg / "libfakemx.so", tmp_path / "mx.c", f"-L{lib}", "-l:libdlperfdep.so.1")
    (pkg / "__init__.py").write_text(
        textwrap.dedent(
            """
            import ctypes, os
            lib = ctypes.CDLL(os.path.join(os.path.dirname(__file__), "libfakemx.so"))
            answer = lib.answer
            """
        )
    )
    return tmp_path


def python(site: Path, code: str) -> subprocess.CompletedProcess:
    path = os.pathsep.join(map(str, (site, BENCHMARK)))
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("LD_LIBRARY_PATH", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env
    )


def loaded(soname: str) -> str:
    return f"any(l.rstrip().endswith('/{soname}') for l in open('/proc/self/maps'))"


def test_without_the_hook_the_loader_cannot_find_the_library(site):
    proc = python(site, "import fakemx")
    assert proc.returncode != 0
    assert "libdlperfdep.so.1: cannot open shared object file" in proc.stderr


def test_the_hook_loads_the_libraries_when_the_module_is_first_imported(site):
    proc = python(
        site,
        f"""
        import sys
        from dlperf import cuda_libs
        cuda_libs.install_import_hook("fakemx", {TABLE!r}, dists=())
        cuda_libs.install_import_hook("fakemx", {TABLE!r}, dists=())  # once only
        hooks = [f for f in sys.meta_path if type(f).__name__ == "_PreloadBeforeImport"]
        print(len(hooks), {loaded("libdlperfdep.so.1")})
        import json  # another module loads nothing
        print({loaded("libdlperfdep.so.1")})
        # a finder after the hook is still asked (the hook does not leave sys.meta_path while
        # the import system walks it)
        class Asked:
            names = []
            def find_spec(self, name, path=None, target=None):
                self.names.append(name)
        sys.meta_path.insert(sys.meta_path.index(hooks[0]) + 1, Asked())
        import fakemx
        print(fakemx.answer(), {loaded("libdlperfdep.so.1")})
        print("fakemx" in Asked.names, hooks[0].done)
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:4] == ["1 False", "False", "42 True", "True True"]


def test_a_module_already_imported_gets_its_libraries_at_once(site):
    proc = python(
        site,
        f"""
        import sys, types
        sys.modules["fakemx"] = types.ModuleType("fakemx")
        from dlperf import cuda_libs
        cuda_libs.install_import_hook("fakemx", {TABLE!r}, dists=())
        print({loaded("libdlperfdep.so.1")})
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


def test_a_library_that_does_not_load_is_named(site):
    (site / "nvidia/dep/lib/libdlperfdep.so.1").write_bytes(b"not an ELF file")
    proc = python(
        site,
        f"""
        from dlperf import cuda_libs
        cuda_libs.install_import_hook("fakemx", {TABLE!r}, dists=())
        import fakemx
        """,
    )
    assert proc.returncode != 0
    assert f"dlperf: cannot load {site}/nvidia/dep/lib/libdlperfdep.so.1 for MXNet" in proc.stderr


def test_where_no_wheel_put_the_libraries_nothing_is_loaded(tmp_path):
    proc = python(
        tmp_path,
        f"""
        from dlperf import cuda_libs
        print(cuda_libs.library_paths(search=[{str(tmp_path)!r}]),
              cuda_libs.preload(search=[{str(tmp_path)!r}]))
        """,
    )
    assert proc.stdout.strip() == "[] {}", proc.stderr


def test_where_a_gpu_build_is_installed_the_hook_loads_from_its_site_directory(site):
    # the default: only where mxnet-cu112 is installed, and from where it was installed
    info = site / "mxnet_cu112-1.9.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mxnet-cu112\nVersion: 1.9.1\n")
    proc = python(
        site,
        f"""
        from dlperf import cuda_libs
        cuda_libs.install_import_hook("fakemx", {TABLE!r})
        import fakemx
        print(fakemx.answer())
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42"


def test_without_a_gpu_build_of_mxnet_installed_the_hook_loads_nothing(site):
    # the CPU build's venv, even where PyTorch's CUDA wheels have put libraries there
    proc = python(
        site,
        f"""
        from dlperf import cuda_libs
        cuda_libs.install_import_hook("fakemx", {TABLE!r}, dists=("no-such-mxnet-build",))
        import fakemx
        """,
    )
    assert proc.returncode != 0
    assert "libdlperfdep.so.1: cannot open shared object file" in proc.stderr


def test_the_working_directory_is_not_searched(site, tmp_path):
    # sys.path holds the working directory as "" under -c and by its path under -m: a library
    # there is not loaded; the same directory is searched when it is not the working one
    def found(cwd) -> str:
        proc = subprocess.run(
            [sys.executable, "-c", "from dlperf import cuda_libs; print(cuda_libs.library_paths("
             f"{TABLE!r}, search=['', 'nvidia/..', {str(site)!r}]))"],
            capture_output=True, text=True, cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(BENCHMARK)},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    assert found(site) == "[]"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert found(elsewhere) == str([f"{site}/nvidia/dep/lib/libdlperfdep.so.1"])


def test_the_first_directory_on_the_path_that_has_a_library_wins(tmp_path):
    for root in ("a", "b"):
        (tmp_path / root / "nvidia/nccl/lib").mkdir(parents=True)
        (tmp_path / root / "nvidia/nccl/lib/libnccl.so.2").touch()
    (tmp_path / "b/nvidia/cudnn/lib").mkdir(parents=True)
    (tmp_path / "b/nvidia/cudnn/lib/libcudnn.so.9").touch()  # PyTorch's CUDA 12 cuDNN: not ours
    from dlperf.cuda_libs import library_paths

    found = library_paths(search=[str(tmp_path / "a"), str(tmp_path / "b")])
    assert found == [str(tmp_path / "a/nvidia/nccl/lib/libnccl.so.2")]


def test_the_cuda11_table_loads_each_librarys_dependencies_before_it():
    order = [soname for _, soname in CUDA11_LIBRARIES]
    # cuSOLVER needs cuBLAS and cuBLASLt, cuBLAS needs cuBLASLt (their NEEDED entries)
    assert order.index("libcublasLt.so.11") < order.index("libcublas.so.11")
    assert order.index("libcublas.so.11") < order.index("libcusolver.so.11")


def installed(site: Path, wheel: str, files: dict[str, int]) -> None:
    """A dist-info for WHEEL in SITE whose RECORD gives FILES their sizes, as pip writes it."""
    info = site / f"{wheel.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {wheel}\nVersion: 1.0\n")
    (info / "RECORD").write_text("".join(f"{f},sha256=x,{size}\n" for f, size in files.items()))


@pytest.mark.parametrize("now", ["its own", "written over", "removed"])
def test_a_library_another_wheel_wrote_over_or_removed_is_named(site, now):
    # a torch for CUDA 12 brings nvidia-curand-cu12, whose libcurand.so.10 replaces CUDA 11's
    installed(site, "mxnet-cu112", {})
    library = site / "nvidia" / "dep" / "lib" / "libdlperfdep.so.1"
    size = library.stat().st_size
    installed(site, "nvidia-dep-cu11", {"nvidia/dep/lib/libdlperfdep.so.1": size})
    if now == "written over":
        library.write_bytes(library.read_bytes() + b"\0" * 64)
    elif now == "removed":
        library.unlink()
    proc = python(
        site,
        f"""
        from dlperf import cuda_libs
        cuda_libs.install_import_hook("fakemx", {TABLE!r}, wheels={{"dep": "nvidia-dep-cu11"}})
        import fakemx
        print(fakemx.answer())
        """,
    )
    named = f"{library} ({{}}; nvidia-dep-cu11 installed {size})"
    if now == "its own":  # loaded, nothing said
        assert proc.returncode == 0 and proc.stdout.strip() == "42", proc.stderr
        assert "dlperf:" not in proc.stderr
    elif now == "written over":  # loaded all the same, with a warning naming it
        assert proc.returncode == 0 and proc.stdout.strip() == "42", proc.stderr
        said = "RuntimeWarning: dlperf: mxnet-cu112 loads CUDA 12's libraries in place of CUDA 11's"
        assert f"{said}: {named.format(f'{size + 64} bytes')}" in proc.stderr, proc.stderr
    else:  # refused naming it, not the loader's "cannot open shared object file" later
        assert proc.returncode != 0
        said = "ImportError: dlperf: mxnet-cu112 needs CUDA 11 libraries that another wheel removed"
        assert f"{said}: {named.format('gone')}" in proc.stderr, proc.stderr
        assert "cannot open shared object file" not in proc.stderr


def test_the_cuda11_wheels_are_the_ones_the_gpu_extra_pins():
    import tomllib

    extras = tomllib.loads((BENCHMARK.parent / "pyproject.toml").read_text())
    pinned = {r.split("==")[0] for r in extras["project"]["optional-dependencies"]["gpu"]}
    assert set(CUDA11_WHEELS.values()) <= pinned
    assert set(CUDA11_WHEELS) <= {part for part, _ in CUDA11_LIBRARIES}
