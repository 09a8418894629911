"""The PyTorch engine's DALI pipeline, run on DALI's CPU operators: sharding, equal steps,
every validation image once, the layouts the engine asks for."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from dlperf.data.recordio import write_records
from dlperf.train.pytorch.dali import DaliData, shard_size, version
from dlperf.train.pytorch.data import MEAN_RGB, STD_RGB
from PIL import Image

pytest.importorskip("nvidia.dali", reason="NVIDIA DALI is not installed")

CPU = torch.device("cpu")
N = 47  # over 3 ranks: shards of 15, 16 and 16


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """N solid images, record i red 5·i: a decoded pixel says which record it was."""
    path = tmp_path_factory.mktemp("dali") / "set.rec"
    write_records(path, [(Image.new("RGB", (24, 20), (5 * i, 90, 30)), i % 5) for i in range(N)])
    return path


def data(path, train, rank, world=3, batch=4, fmt=torch.contiguous_format):
    return DaliData(path, batch, 16, train, rank, world, 1, 0, CPU, fmt)


def record_of(image: torch.Tensor) -> int:
    """The record an NCHW image came from, by its centre pixel's red level."""
    red = float(image[0, 8, 8]) * STD_RGB[0] + MEAN_RGB[0]
    return round(red / 5)


def test_dali_is_the_pinned_version():
    assert version() == "2.4.0"


def test_the_shards_are_the_readers_split():
    assert [shard_size(N, r, 3) for r in range(3)] == [15, 16, 16]
    assert sum(shard_size(1438, r, 7) for r in range(7)) == 1438


def test_validation_reads_every_image_once_across_uneven_shards(records):
    seen: list[int] = []
    for rank in range(3):
        val = data(records, False, rank)
        assert val.steps == 4  # ceil(15 / 4) and ceil(16 / 4)
        for _ in range(2):  # a second evaluation reads the same shard again
            mine = []
            for images, labels, valid in val:
                assert images.shape == (4, 3, 16, 16) and images.dtype == torch.float32
                for image, label, ok in zip(images, labels, valid, strict=True):
                    if ok:
                        mine.append(record_of(image))
                        assert int(label) == mine[-1] % 5
            assert len(mine) == shard_size(N, rank, 3)
        seen += mine
    assert sorted(seen) == list(range(N))


def test_every_evaluation_reads_the_shard_once_when_shards_differ_by_a_batch(records):
    # Batch 5: the 15-record shard fills 3 batches exactly, the 16-record ones need 4. DALI pads
    # every shard to 16 and on to 20, so every rank must read 4 batches, or the unread padding
    # opens the next evaluation.
    for rank in range(3):
        val = data(records, False, rank, batch=5)
        assert val.steps == 4
        shards = []
        for _ in range(3):
            shards.append(
                sorted(
                    record_of(image)
                    for images, _labels, valid in val
                    for image, ok in zip(images, valid, strict=True)
                    if ok
                )
            )
        start = N * rank // 3
        assert shards == [list(range(start, start + shard_size(N, rank, 3)))] * 3


def test_training_gives_every_rank_the_same_whole_batches_every_epoch(records):
    counts = Counter()
    for rank in range(3):
        train = data(records, True, rank)
        assert train.steps == N // (4 * 3)
        for _ in range(4):  # epochs
            batches = list(train)
            assert len(batches) == train.steps
            for images, labels, valid in batches:
                assert images.shape == (4, 3, 16, 16) and bool(valid.all())
                ids = [record_of(image) for image in images]
                assert labels.tolist() == [i % 5 for i in ids]
                counts.update(ids)
    # the stream wraps around each shard: over 4 epochs every record was trained on
    assert set(counts) == set(range(N))


def test_channels_last_batches_are_nchw_with_channels_last_strides(records):
    val = data(records, False, 0, world=1, batch=8, fmt=torch.channels_last)
    images, _, _ = next(iter(val))
    assert images.shape == (8, 3, 16, 16)
    assert images.is_contiguous(memory_format=torch.channels_last)
    assert record_of(images[0]) == 0
