"""The telemetry sampler: real samples from this machine, missing sources recorded, bounded size."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dlperf.telemetry.sampler import read_footer, read_samples
from dlperf.telemetry.sources import mount_devices, parse_mountstats

from tests.host import nvml_answers

BIN = Path(sys.executable).parent

MOUNTSTATS = """\
device rootfs mounted on / with fstype rootfs
device head01:/export/shared mounted on /shared with fstype nfs4 statvers=1.1
\topts:\trw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,acregmin=3,hard,proto=tcp
\tage:\t1200
\tbytes:\t1000 2000 0 0 4096000 8192 1000 2
\tevents:\t1 2 3
device 198.18.0.201:/ifs/data/dlperf mounted on /mnt/isilon with fstype nfs statvers=1.1
\tbytes:\t5 6 0 0 144000000000 0 35156250 0
device /dev/vda mounted on /boot with fstype ext4
"""


def test_mountstats_gives_server_bytes_per_nfs_mount():
    mounts = parse_mountstats(MOUNTSTATS)
    assert set(mounts) == {"/shared", "/mnt/isilon"}
    # an NFS server's own nfsd file system is no NFS mount
    assert parse_mountstats("device nfsd mounted on /proc/fs/nfsd with fstype nfsd\n") == {}
    assert mounts["/shared"] == {
        "server": "head01:/export/shared",
        "fstype": "nfs4",
        "read_bytes": 4096000,
        "write_bytes": 8192,
    }
    assert mounts["/mnt/isilon"]["read_bytes"] == 144_000_000_000


def test_mounts_that_share_a_superblock_are_counted_once():
    # /data is a bind mount of /shared/data: the kernel prints the superblock's counters under
    # both mount points; summed they would double Fig. 5's read rate.
    stats = MOUNTSTATS.replace(
        "device 198.18.0.201",
        "device head01:/export/shared mounted on /data with fstype nfs4 statvers=1.1\n"
        "\tbytes:\t1000 2000 0 0 4096000 8192 1000 2\n"
        "device 198.18.0.201",
    )
    mountinfo = (
        "1 0 0:21 / / rw - rootfs rootfs rw\n"
        "40 1 0:52 / /shared rw,nodev,nosuid - nfs4 head01:/export/shared rw\n"
        "41 1 0:52 /data /data rw,nodev,nosuid - nfs4 head01:/export/shared rw\n"
        "42 1 0:53 / /mnt/isilon rw,nodev,nosuid - nfs 198.18.0.201:/ifs/data/dlperf rw\n"
    )
    assert set(parse_mountstats(stats)) == {"/shared", "/data", "/mnt/isilon"}
    assert set(parse_mountstats(stats, mount_devices(mountinfo))) == {"/shared", "/mnt/isilon"}


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_sampler_writes_timestamped_rows_and_records_missing_sources(tmp_path):
    out = tmp_path / "t.jsonl"
    proc = subprocess.run(
        [
            str(BIN / "dlperf"),
            "telemetry",
            "--output",
            str(out),
            "--interval",
            "0.2",
            "--duration",
            "1.5",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    header, *samples, footer = rows_of(out)
    assert header["header"] and header["interval_s"] == 0.2
    # the sampler's own cost, measured: CPU seconds per sample over the samples it took
    assert footer["footer"] and footer["samples"] == len(samples)
    assert 0 < footer["cpu_s_per_sample"] == read_footer(out)["cpu_s_per_sample"]
    assert footer["cpu_percent_of_core"] == pytest.approx(100 * footer["cpu_s_per_sample"] / 0.2)
    assert read_samples(out) == (header, samples)
    if nvml_answers():  # a GPU node
        assert "gpu" in header["sources"] and all("gpu" in s for s in samples)
    else:  # recorded as missing, with NVML's reason, and not fatal
        assert "gpu" in header["missing"] and "NVML" in header["missing"]["gpu"]
    assert {"host", "network", "block", "nfs"} <= set(header["sources"])
    assert len(samples) >= 5
    times = [s["t"] for s in samples]
    assert times == sorted(times) and times[-1] - times[0] >= 1.0
    assert all(0 <= s["host"]["cpu_percent"] <= 100 for s in samples)
    assert samples[-1]["network"]["lo"]["sent_bytes"] >= samples[0]["network"]["lo"]["sent_bytes"]


def test_sampler_stops_at_its_size_limit(tmp_path):
    out = tmp_path / "t.jsonl"
    subprocess.run(
        [
            str(BIN / "dlperf"),
            "telemetry",
            "--output",
            str(out),
            "--interval",
            "0.05",
            "--duration",
            "3",
            "--max-bytes",
            "8192",
        ],
        timeout=60,
        check=True,
    )
    assert out.stat().st_size <= 8192 + 200
    assert rows_of(out)[-1].get("truncated") is True


def start_sampler(out: Path, interval: str, lines: int, *flags: str, **popen) -> subprocess.Popen:
    """`dlperf telemetry` running, once its file holds LINES lines (the header and samples)."""
    proc = subprocess.Popen(
        [str(BIN / "dlperf"), "telemetry", "--output", str(out), "--interval", interval, *flags],
        **popen,
    )
    deadline = time.monotonic() + 30
    while not out.exists() or len(out.read_text().splitlines()) < lines:
        assert time.monotonic() < deadline, f"{out}: fewer than {lines} lines after 30 s"
        time.sleep(0.1)
    return proc


def test_sampler_stops_cleanly_on_sigterm(tmp_path):
    out = tmp_path / "t.jsonl"
    proc = start_sampler(out, "0.2", lines=3)
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    rows = rows_of(out)  # every line is whole JSON
    assert rows[0]["header"] and len(rows) >= 3


def test_sampler_started_over_ssh_stops_when_its_stdin_closes(tmp_path):
    # The sweep starts remote samplers as `ssh host dlperf telemetry --stop-on-stdin-eof`: SSH
    # forwards no signal, so the connection closing (sweep done or killed) must end them.
    out = tmp_path / "t.jsonl"
    proc = start_sampler(out, "0.2", 3, "--stop-on-stdin-eof", stdin=subprocess.PIPE)
    assert proc.poll() is None, "the sampler must run while its stdin is open"
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    rows = rows_of(out)
    # a last sample at stop, then the footer with the sampler's cost
    assert rows[0]["header"] and len(rows) >= 4 and "t" in rows[-2] and rows[-1]["footer"]


def test_bad_interval_is_refused(tmp_path):
    proc = subprocess.run(
        [str(BIN / "dlperf"), "telemetry", "--output", str(tmp_path / "t"), "--interval", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and "--interval 0" in proc.stderr


def test_a_source_that_fails_during_the_run_is_dropped_and_the_file_says_so(tmp_path, monkeypatch):
    from dlperf.report.data import Point, missing_sources
    from dlperf.telemetry import sampler

    calls = {"n": 0}

    def flaky() -> dict:
        calls["n"] += 1
        if calls["n"] >= 3:
            raise OSError("NFS mount gone")
        return {"/mnt/isilon": {"read_bytes": 1.0}}

    monkeypatch.setitem(sampler.SOURCES, "nfs", flaky)
    out = tmp_path / "t.jsonl"
    sampler.Sampler(out, interval=0.05).run(duration=0.4)
    header, rows = read_samples(out)
    assert "nfs" in header["sources"] and "nfs" in rows[0] and "nfs" not in rows[-1]
    assert header["missing"]["nfs"] == "dropped during the run: OSError: NFS mount gone"
    point = Point(1, {}, {"node1": (header, rows)})
    assert missing_sources(point, "nfs") == [
        "node1: dropped during the run: OSError: NFS mount gone"
    ]


def test_a_truncated_file_is_named_in_the_report(tmp_path):
    from dlperf.report.data import Point, missing_sources
    from dlperf.telemetry.sampler import Sampler

    out = tmp_path / "t.jsonl"
    Sampler(out, interval=0.01, max_bytes=4096).run(duration=30)
    header, _ = read_samples(out)
    assert header["truncated"]
    [why] = missing_sources(Point(1, {}, {"node1": (header, [])}), "fabric")[-1:]
    assert why == "node1: its file reached the sampler's --max-bytes, later samples lost"


def test_after_a_stall_the_sampler_does_not_catch_up_in_a_burst(tmp_path, monkeypatch):
    from dlperf.telemetry import sampler

    class Stalling(sampler.Sampler):
        """The third sample takes 1 s (a job suspended, an NFS server that hangs)."""

        def _sample(self):
            if self.samples == 2:
                time.sleep(1.0)
            return super()._sample()

    out = tmp_path / "t.jsonl"
    Stalling(out, interval=0.1).run(duration=1.6)
    _, rows = read_samples(out)
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(rows[2:-1])]
    # after the stall: samples at least half an interval apart, never ten at once
    assert gaps and min(gaps) >= 0.05, gaps


def test_a_stop_signal_ends_a_long_interval_at_once(tmp_path):
    out = tmp_path / "t.jsonl"
    proc = start_sampler(out, "60", lines=2)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    assert time.monotonic() - started < 5  # not the rest of the 60 s interval
    assert read_footer(out) is not None


def fake_nvml(lost_at_start: set[int], unsupported: dict[int, str], denied: dict[int, str]):
    """A stand-in of nvidia-ml-py's module (no GPU here): three GPUs, NVML's error classes; a
    GPU's reading UNSUPPORTED, or DENIED to this process."""
    import types

    nvml = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    class NVMLError_NotSupported(NVMLError):
        pass

    class NVMLError_GpuIsLost(NVMLError):
        pass

    class NVMLError_NoPermission(NVMLError):
        pass

    nvml.NVMLError, nvml.NVMLError_NotSupported = NVMLError, NVMLError_NotSupported
    nvml.NVMLError_NoPermission = NVMLError_NoPermission
    nvml.NVMLError_GpuIsLost = NVMLError_GpuIsLost
    nvml.gone = set()  # GPUs that fall off the bus later

    def handle(i):
        if i in lost_at_start:
            raise NVMLError_GpuIsLost("GPU is lost")
        return i

    def reading(kind, make):
        def read(h):
            if h in nvml.gone:
                raise NVMLError_GpuIsLost("GPU is lost")
            if unsupported.get(h) == kind:
                raise NVMLError_NotSupported("Not Supported")
            if denied.get(h) == kind:
                raise NVMLError_NoPermission("Insufficient Permissions")
            return make()

        return read

    nvml.nvmlInit = lambda: None
    nvml.nvmlDeviceGetCount = lambda: 3
    nvml.nvmlDeviceGetHandleByIndex = handle
    nvml.nvmlDeviceGetUtilizationRates = reading("util", lambda: types.SimpleNamespace(gpu=97))
    nvml.nvmlDeviceGetMemoryInfo = reading("mem", lambda: types.SimpleNamespace(used=2**30))
    nvml.nvmlDeviceGetPowerUsage = reading("power", lambda: 250000)
    return nvml


def test_a_gpu_lost_or_without_a_reading_leaves_the_others_sampled(tmp_path, monkeypatch):
    from dlperf.telemetry.sampler import Sampler

    # GPU 2 fell off the bus before the run; GPU 1 runs MIG (no utilisation reading) in a
    # container that may not read its power
    nvml = fake_nvml(lost_at_start={2}, unsupported={1: "util"}, denied={1: "power"})
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    sampler = Sampler(tmp_path / "t.jsonl", 1.0)
    assert sampler.missing["gpu:2"] == "NVMLError_GpuIsLost: GPU is lost"
    first = sampler.sample()["gpu"]
    assert first == {
        "0": {"util_percent": 97, "mem_used_bytes": 2**30, "power_w": 250.0},
        "1": {"util_percent": None, "mem_used_bytes": 2**30, "power_w": None},
    }
    nvml.gone.add(0)  # GPU 0 falls off mid-run: said once, GPU 1 sampled on
    second = sampler.sample()["gpu"]
    assert second["0"] == {"lost": "NVMLError_GpuIsLost: GPU is lost"} and "1" in second
    assert list(sampler.sample()["gpu"]) == ["1"]
    nvml.gone.add(1)  # the last one too: the source is dropped, with every reason
    row = sampler.sample()
    assert "gpu" not in row and "GPU 0: NVMLError_GpuIsLost" in row["missing"]["gpu"]


def test_a_duration_shorter_than_the_interval_ends_at_the_duration(tmp_path):
    from dlperf.telemetry.sampler import Sampler

    begun = time.monotonic()
    Sampler(tmp_path / "t.jsonl", interval=20.0).run(duration=0.5)
    assert time.monotonic() - begun < 10  # not the 20 s interval
    assert read_footer(tmp_path / "t.jsonl")["samples"] >= 1
