"""Input pipelines: synthetic batches generated once on the device, or RecordIO files read with
MXNet's record iterator and the standard ImageNet augmentation, sharded across ranks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mxnet as mx
import numpy as np

from dlperf.train.engine import steps_per_epoch
from dlperf.usage import UsageError

# ImageNet channel statistics (0-255 scale), as in NVIDIA's RN50 recipe.
MEAN_RGB = (123.68, 116.779, 103.939)
STD_RGB = (58.393, 57.12, 57.375)


@dataclass
class Batch:
    data: mx.nd.NDArray
    label: mx.nd.NDArray
    pad: int = 0  # trailing filler samples in the last validation batch

    @property
    def valid(self) -> int:
        return self.data.shape[0] - self.pad


class SyntheticData:
    """One random batch kept on the device and served ``batches_per_epoch`` times per epoch."""

    def __init__(
        self, batch_size: int, image_size: int, classes: int, batches_per_epoch: int, ctx, seed=0
    ):
        self.batches_per_epoch = batches_per_epoch
        # The same batch on every rank, from a generator of its own: reseeding MXNet's global one
        # here would undo the per-rank seed the engine set (every rank's initial weights alike).
        rng = np.random.default_rng(seed)
        data = rng.standard_normal((batch_size, 3, image_size, image_size), dtype=np.float32)
        label = rng.integers(0, classes, size=batch_size).astype(np.float32)
        self._batch = Batch(mx.nd.array(data, ctx=ctx), mx.nd.array(label, ctx=ctx))

    def __iter__(self):
        for _ in range(self.batches_per_epoch):
            yield self._batch

    def reset(self) -> None:
        pass


class RecordData:
    """Wrap ``mx.io.ImageRecordIter``; each rank reads its own 1/world shard (a contiguous part
    of the file: `dlperf data` shuffles the records so that every part holds every class)."""

    def __init__(
        self,
        path: Path,
        batch_size: int,
        image_size: int,
        train: bool,
        rank: int,
        world: int,
        threads: int,
        seed: int = 0,
        steps: int | None = None,
    ):
        self.steps = steps  # training: batches per epoch, the same on every rank
        idx = path.with_suffix(".idx")
        common = dict(
            path_imgrec=str(path),
            path_imgidx=str(idx) if idx.exists() else "",
            data_shape=(3, image_size, image_size),
            batch_size=batch_size,
            num_parts=world,
            part_index=rank,
            preprocess_threads=threads,
            mean_r=MEAN_RGB[0],
            mean_g=MEAN_RGB[1],
            mean_b=MEAN_RGB[2],
            std_r=STD_RGB[0],
            std_g=STD_RGB[1],
            std_b=STD_RGB[2],
        )
        if train:
            self._iter = mx.io.ImageRecordIter(
                shuffle=True,
                seed=seed,
                round_batch=True,
                random_resized_crop=True,
                min_random_area=0.08,
                max_random_area=1.0,
                min_aspect_ratio=3.0 / 4.0,
                max_aspect_ratio=4.0 / 3.0,
                rand_mirror=True,
                **common,
            )
        else:
            # Validation: resize the shorter side to 256/224 of the crop, centre crop. With
            # round_batch the last batch is filled up and its `pad` says by how much (without it
            # MXNet pads silently and reports pad=0), so every image is counted exactly once.
            # round_batch also carries the wrap-around into the next pass, so each evaluation
            # opens a fresh iterator that starts at the first image.
            self._val_args = dict(
                shuffle=False, round_batch=True, resize=int(image_size * 256 / 224), **common
            )
            self._iter = None

    def __iter__(self):
        it = self._iter if self._iter is not None else mx.io.ImageRecordIter(**self._val_args)
        for n, batch in enumerate(it, start=1):
            yield Batch(batch.data[0], batch.label[0], batch.pad or 0)
            if self.steps is not None and n >= self.steps:
                break
        it.reset()

    def reset(self) -> None:
        if self._iter is not None:
            self._iter.reset()


def partition_steps(path: Path, records: int, batch: int, world: int) -> int:
    """Training steps per epoch that every rank's part of the file has.

    MXNet's reader splits an indexed file into contiguous parts of ceil(records / world) and
    gives the last rank what is left (dmlc-core's IndexedRecordIOSplitter), so the last part is
    the smallest: a step count from records // (batch * world) could outrun it, and that rank
    would leave the epoch while the others wait in an allreduce. Without an .idx the file is
    split by bytes, into parts whose record counts nothing bounds."""
    if world == 1:
        return steps_per_epoch(records, batch, world)
    if not path.with_suffix(".idx").exists():
        raise UsageError(
            f"--data {path}: no {path.with_suffix('.idx').name} beside it; MXNet splits a file "
            f"without its index by bytes, unevenly over the {world} ranks (dlperf data prepare "
            "writes the index, as does im2rec)"
        )
    last = records - (world - 1) * -(-records // world)
    if last <= 0:
        raise UsageError(
            f"--data {path}: {records} records cannot be split over {world} ranks by MXNet's "
            f"reader (parts of {-(-records // world)} leave the last rank none); use fewer ranks"
        )
    return max(1, last // batch)


def count_records(path: Path) -> int:
    """Number of records in a .rec file (from its .idx when present)."""
    idx = path.with_suffix(".idx")
    if idx.exists():
        with idx.open() as fh:
            return sum(1 for line in fh if line.strip())
    reader = mx.recordio.MXRecordIO(str(path), "r")
    n = 0
    while reader.read() is not None:
        n += 1
    reader.close()
    return n


def classes_in(path: Path) -> int:
    """Number of classes: one more than the largest label in the file."""
    reader = mx.recordio.MXRecordIO(str(path), "r")
    top = 0
    while (item := reader.read()) is not None:
        header, _ = mx.recordio.unpack(item)
        label = header.label if not hasattr(header.label, "__len__") else header.label[0]
        top = max(top, int(label))
    reader.close()
    return top + 1
