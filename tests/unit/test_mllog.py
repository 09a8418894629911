"""The MLPerf log file of a run: written afresh by each run, never into another run's file."""

from __future__ import annotations

import json


def events(path) -> list[dict]:
    return [
        json.loads(line.split(":::MLLOG ", 1)[1])
        for line in path.read_text().splitlines()
        if ":::MLLOG" in line
    ]


def test_a_second_run_into_the_same_output_replaces_the_log(tmp_path):
    from dlperf.train.mllog import MLLog, now_ms

    first, other = tmp_path / "run" / "mllog.txt", tmp_path / "other" / "mllog.txt"
    log = MLLog(first, enabled=True)
    log.init_start(now_ms(), "1xcpu", cache_cleared=False)
    log.run_start(now_ms())
    log.run_stop("ok")
    assert [e["key"] for e in events(first)][-2:] == ["run_start", "run_stop"]

    # the same output again (a re-run the job module or a user points at the same directory)
    again = MLLog(first, enabled=True)
    again.init_start(now_ms(), "1xcpu", cache_cleared=False)
    again.run_start(now_ms())
    keys = [e["key"] for e in events(first)]
    assert keys.count("init_start") == 1 and keys.count("run_start") == 1
    assert "run_stop" not in keys

    # a log elsewhere in the same process: nothing of it lands in the first file
    elsewhere = MLLog(other, enabled=True)
    elsewhere.init_start(now_ms(), "2xcpu", cache_cleared=False)
    assert [e["key"] for e in events(first)] == keys
    assert [e["key"] for e in events(other)].count("init_start") == 1


def test_ranks_other_than_the_first_write_no_log(tmp_path):
    from dlperf.train.mllog import MLLog, now_ms

    log = MLLog(tmp_path / "mllog.txt", enabled=False)
    log.init_start(now_ms(), "1xcpu", cache_cleared=False)
    assert not (tmp_path / "mllog.txt").exists()
