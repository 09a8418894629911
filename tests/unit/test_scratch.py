"""scripts/lib/scratch.sh: the image builds' scratch directories are cleared after a killed
build, mounts inside them first, and never while the build that owns them is running."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "scripts" / "lib" / "scratch.sh"


def bash(script: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail; . {LIB}; {script}"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def mounted(path: Path) -> bool:
    return any(
        line.split()[1] == str(path) for line in Path("/proc/self/mounts").read_text().splitlines()
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a file system needs root")
def test_a_killed_builds_directory_is_unmounted_and_removed(tmp_path):
    cache = tmp_path / "cache"
    stale = cache / "rootfs.k1ll3d"
    (stale / "usr" / "bin").mkdir(parents=True)
    (stale / "usr" / "bin" / "tool").write_text("x")
    (stale / "proc").mkdir()
    # what debootstrap leaves mounted when it is killed, with a file the removal must not reach
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(stale / "proc")], check=True)
    try:
        (stale / "proc" / "keep").write_text("inside another file system")
        other = cache / "build.0ther"  # another kind's scratch: not this lock's to clear
        other.mkdir()
        proc = bash(f"scratch_lock {cache} rootfs")
        assert proc.returncode == 0, proc.stderr
        assert f"removing {stale}" in proc.stderr
        assert not mounted(stale / "proc")
        assert not stale.exists()
        assert other.is_dir() and (cache / "rootfs.lock").is_file()
    finally:
        if mounted(stale / "proc"):
            subprocess.run(["umount", str(stale / "proc")], check=False)


def test_a_running_builds_directory_is_left_alone(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    live = cache / "build.l1ve"
    ready = tmp_path / "ready"
    # a build holding the lock with its scratch directory, until it is told to stop
    holder = subprocess.Popen(
        [
            "bash",
            "-c",
            f". {LIB}; scratch_lock {cache} build; mkdir {live}; touch {ready}; exec sleep 30",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ready.exists()
        # a second build waits for the lock instead of clearing the running one's directory
        proc = subprocess.run(
            ["timeout", "2", "bash", "-c", f". {LIB}; scratch_lock {cache} build"], check=False
        )
        assert proc.returncode == 124  # still waiting when timeout stopped it
        assert live.is_dir()
    finally:
        holder.kill()
        holder.wait()
    # once the holder is gone (killed, as a stopped build is), its directory is cleared
    proc = bash(f"scratch_lock {cache} build")
    assert proc.returncode == 0, proc.stderr
    assert not live.exists()
