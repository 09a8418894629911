"""The PyTorch engine's input pipeline through NVIDIA DALI (``--loader dali``; the default on
GPUs where DALI is installed), as NVIDIA's RN50 recipes feed their GPUs.

DALI's own MXNet RecordIO reader reads the same .rec/.idx files as the native pipeline. On a GPU,
JPEGs are decoded by nvJPEG ("mixed": Huffman decoding on the CPU, the rest on the GPU) and
cropped, resized, flipped and normalised on the GPU; on a CPU the same graph runs on DALI's CPU
operators, which is how the tests run it. Training takes an Inception-style random crop (8-100 %
of the area, aspect 3/4-4/3) resized to the image size, flipped with probability 1/2; validation
resizes the shorter side to size·256/224 and takes the centre square.

DALI's reader gives rank r of w the records [n·r/w, n·(r+1)/w) (integer division), so the
shards differ by at most one record. Training streams this rank's shard, shuffled in DALI's
buffer and wrapping around at its end, and every epoch takes the same ``n // (batch · w)`` whole
batches on every rank (what a rank reads beyond them opens its next epoch). Validation reads the
shard exactly once: the last batch is padded with repeats of the shard's last record, masked
out, so every image counts once.
"""

from __future__ import annotations

import math
from importlib import metadata
from pathlib import Path

import torch

from dlperf.data.recordio import RecordFile
from dlperf.train.engine import steps_per_epoch
from dlperf.train.pytorch.data import MEAN_RGB, STD_RGB

READER = "Reader"


def version() -> str | None:
    """DALI's version where its wheel (any CUDA flavour) is installed, else None."""
    for dist in ("nvidia-dali-cuda120", "nvidia-dali-cuda130", "nvidia-dali-cuda110"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def shard_size(n: int, rank: int, world: int) -> int:
    """Records in DALI's shard ``rank`` of ``world``."""
    return n * (rank + 1) // world - n * rank // world


class DaliData:
    """Batches of one rank's shard as (images, labels, valid) torch tensors on ``device``."""

    def __init__(self, path, batch, image_size, train, rank, world, threads, seed, device, fmt):
        from nvidia.dali import fn, pipeline_def, types

        path = Path(path)
        self.records = len(RecordFile(path))  # refuses a file without its index
        self.batch, self.train, self.device = batch, train, device
        self.channels_last = fmt == torch.channels_last
        if train:
            self.steps = steps_per_epoch(self.records, batch, world)
        else:
            # pad_last_batch pads every shard to the largest one's size and then to whole
            # batches: every rank reads that many batches, or a padded batch left unread would
            # open its next evaluation (and all ranks step together through evaluate's sums).
            self.size = shard_size(self.records, rank, world)
            self.steps = math.ceil(math.ceil(self.records / world) / batch)
        on_gpu = device.type == "cuda"

        @pipeline_def(
            batch_size=batch,
            num_threads=max(1, threads),
            device_id=device.index if on_gpu else None,
            seed=seed + rank,
        )
        def pipeline():
            jpegs, labels = fn.readers.mxnet(
                path=[str(path)],
                index_path=[str(path.with_suffix(".idx"))],
                shard_id=rank,
                num_shards=world,
                random_shuffle=train,
                stick_to_shard=True,
                pad_last_batch=not train,
                name=READER,
            )
            decoder = "mixed" if on_gpu else "cpu"
            if train:
                images = fn.decoders.image_random_crop(
                    jpegs,
                    device=decoder,
                    output_type=types.RGB,
                    random_area=[0.08, 1.0],
                    random_aspect_ratio=[3 / 4, 4 / 3],
                    num_attempts=10,
                )
                images = fn.resize(images, resize_x=image_size, resize_y=image_size)
                mirror = fn.random.coin_flip(probability=0.5)
            else:
                images = fn.decoders.image(jpegs, device=decoder, output_type=types.RGB)
                images = fn.resize(images, resize_shorter=round(image_size * 256 / 224))
                mirror = 0
            images = fn.crop_mirror_normalize(
                images,
                dtype=types.FLOAT,
                output_layout="HWC" if self.channels_last else "CHW",
                crop=(image_size, image_size),
                mean=list(MEAN_RGB),
                std=list(STD_RGB),
                mirror=mirror,
            )
            if on_gpu:
                labels = labels.gpu()
            return images, labels

        self.pipe = pipeline()
        self.pipe.build()

    def _tensor(self, out, dtype: torch.dtype) -> torch.Tensor:
        from nvidia.dali.plugin.pytorch import feed_ndarray

        dense = out.as_tensor()  # one batch of equal shapes
        target = torch.empty(dense.shape(), dtype=dtype, device=self.device)
        stream = torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None
        feed_ndarray(dense, target, cuda_stream=stream)
        return target

    def __iter__(self):
        for step in range(self.steps):
            images, labels = self.pipe.run()
            x = self._tensor(images, torch.float32)
            if self.channels_last:  # N,H,W,C in memory: NCHW with channels_last strides
                x = x.permute(0, 3, 1, 2)
            y = self._tensor(labels, torch.float32).view(-1).long()
            if self.train:
                valid = torch.ones(self.batch, dtype=torch.bool, device=self.device)
            else:
                seen = step * self.batch + torch.arange(self.batch, device=self.device)
                valid = seen < self.size
            yield x, y, valid
