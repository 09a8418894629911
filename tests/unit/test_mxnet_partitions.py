"""The MXNet engine's steps per epoch against the parts MXNet's own reader gives the ranks."""

from __future__ import annotations

import pytest
from dlperf.data.recordio import write_records
from dlperf.train.mxnet.data import RecordData, partition_steps
from dlperf.usage import UsageError
from PIL import Image


def records(path, count: int):
    images = ((Image.new("RGB", (8, 8), (i * 10 % 256, 0, 0)), i % 3) for i in range(count))
    write_records(path, images)
    return path


def batches_per_rank(path, world: int, batch: int) -> list[int]:
    """What each rank's reader holds in an epoch, read by the real ImageRecordIter."""
    return [
        sum(1 for _ in RecordData(path, batch, 8, True, rank, world, threads=1))
        for rank in range(world)
    ]


def test_no_rank_runs_out_of_batches_before_the_epochs_last_step(tmp_path):
    # 22 records over 8 ranks: parts of 3, 3, ..., 3 and 1 for the last rank. 22 // 8 = 2 steps
    # would leave the last rank after one, with the other seven waiting in an allreduce.
    rec = records(tmp_path / "train.rec", 22)
    held = batches_per_rank(rec, world=8, batch=1)
    assert held == [3] * 7 + [1]
    assert partition_steps(rec, 22, batch=1, world=8) == min(held) == 1


def test_an_even_split_keeps_every_whole_global_batch(tmp_path):
    rec = records(tmp_path / "train.rec", 24)
    assert batches_per_rank(rec, world=4, batch=2) == [3] * 4
    assert partition_steps(rec, 24, batch=2, world=4) == 3 == 24 // (2 * 4)


def test_a_split_that_leaves_a_rank_nothing_or_a_file_without_index_is_refused(tmp_path):
    rec = records(tmp_path / "train.rec", 22)
    with pytest.raises(UsageError, match=r"22 records cannot be split over 16 ranks"):
        partition_steps(rec, 22, batch=1, world=16)  # parts of 2: the 16th would start at 30
    rec.with_suffix(".idx").unlink()
    with pytest.raises(UsageError, match=r"no train.idx beside it"):
        partition_steps(rec, 22, batch=1, world=2)
    assert partition_steps(rec, 22, batch=1, world=1) == 22  # one rank reads the whole file
