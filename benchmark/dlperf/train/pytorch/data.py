"""Input pipelines of the PyTorch engine: synthetic batches on the device, or the same .rec/.idx
files the MXNet engine reads, decoded by DataLoader worker processes (`--loader native`; the
DALI pipeline is in dali.py).

Every rank takes the same number of steps per epoch (a rank that ran out first would leave the
others waiting in an allreduce): the training order is one seeded permutation of the whole set
per epoch, dealt round-robin to the ranks and cut to ``steps * batch`` each. Validation deals the
images round-robin and pads the shorter parts with masked repeats, so every image counts once.
Images travel as uint8 HWC and are normalised on the device, as NVIDIA's DALI pipeline does.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from dlperf.data.recordio import RecordFile
from dlperf.train.engine import steps_per_epoch

# ImageNet channel statistics (0-255 scale), as in NVIDIA's RN50 recipe.
MEAN_RGB = (123.68, 116.779, 103.939)
STD_RGB = (58.393, 57.12, 57.375)


class SyntheticData:
    """One random batch kept on the device and served ``batches_per_epoch`` times per epoch."""

    def __init__(self, batch_size, image_size, classes, batches_per_epoch, device, fmt, seed=0):
        self.batches_per_epoch = batches_per_epoch
        gen = torch.Generator().manual_seed(seed)  # the same batch on every rank
        data = torch.randn(batch_size, 3, image_size, image_size, generator=gen)
        label = torch.randint(0, classes, (batch_size,), generator=gen)
        self._batch = (
            data.to(device).contiguous(memory_format=fmt),
            label.to(device),
            torch.ones(batch_size, dtype=torch.bool, device=device),
        )

    def __iter__(self):
        for _ in range(self.batches_per_epoch):
            yield self._batch


def _random_resized_crop(image: Image.Image, size: int, rng: random.Random) -> Image.Image:
    """Inception-style crop: 8-100 % of the area, aspect 3/4-4/3, then resize (as DLE trains)."""
    w, h = image.size
    for _ in range(10):
        area = w * h * rng.uniform(0.08, 1.0)
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw, ch = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
        if 0 < cw <= w and 0 < ch <= h:
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            return image.resize((size, size), Image.BILINEAR, box=(x, y, x + cw, y + ch))
    side = min(w, h)  # fallback: the central square
    x, y = (w - side) // 2, (h - side) // 2
    return image.resize((size, size), Image.BILINEAR, box=(x, y, x + side, y + side))


def _centre_crop(image: Image.Image, size: int) -> Image.Image:
    w, h = image.size
    short = round(size * 256 / 224)
    scale = short / min(w, h)
    image = image.resize((max(size, round(w * scale)), max(size, round(h * scale))))
    w, h = image.size
    x, y = (w - size) // 2, (h - size) // 2
    return image.crop((x, y, x + size, y + size))


class RecordDataset(torch.utils.data.Dataset):
    """(index, valid, epoch) -> (uint8 HWC image, label, valid). The epoch comes with each item,
    from the sampler in the main process, so the loader's workers can live across epochs."""

    def __init__(self, path: Path, image_size: int, train: bool, seed: int):
        self.records = RecordFile(path)
        self.image_size, self.train, self.seed = image_size, train, seed

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, item):
        index, valid, epoch = item
        encoded, label = self.records.read(index)
        image = Image.open(_bytes_io(encoded)).convert("RGB")
        if self.train:
            rng = random.Random(hash((self.seed, epoch, index)))
            image = _random_resized_crop(image, self.image_size, rng)
            if rng.random() < 0.5:
                image = image.transpose(Image.FLIP_LEFT_RIGHT)
        else:
            image = _centre_crop(image, self.image_size)
        return torch.from_numpy(np.asarray(image, dtype=np.uint8).copy()), int(label), valid


def _bytes_io(data: bytes):
    import io

    return io.BytesIO(data)


class ShardSampler(torch.utils.data.Sampler):
    """This rank's (index, valid, epoch) items for one epoch; the same count on every rank."""

    def __init__(self, n: int, batch: int, rank: int, world: int, train: bool, seed: int):
        self.n, self.batch, self.rank, self.world = n, batch, rank, world
        self.train, self.seed, self.epoch = train, seed, 0
        if train:
            self.steps = steps_per_epoch(n, batch, world)
            self.length = self.steps * batch
        else:
            self.length = math.ceil(n / world)
            self.steps = math.ceil(self.length / batch)

    def __len__(self) -> int:
        return self.length

    def __iter__(self):
        if self.train:
            order = torch.randperm(
                self.n, generator=torch.Generator().manual_seed(self.seed + self.epoch)
            ).tolist()
            need = self.length * self.world
            order = (order * math.ceil(need / self.n))[:need]  # a set smaller than one step
            yield from ((i, True, self.epoch) for i in order[self.rank :: self.world])
        else:
            mine = list(range(self.rank, self.n, self.world))
            yield from ((i, True, self.epoch) for i in mine)
            pad = mine[0] if mine else 0
            yield from ((pad, False, self.epoch) for _ in range(self.length - len(mine)))


class RecordData:
    """Batches of one rank's shard, normalised on the device in ``memory_format``."""

    def __init__(self, path, batch, image_size, train, rank, world, workers, seed, device, fmt):
        self.dataset = RecordDataset(Path(path), image_size, train, seed)
        self.sampler = ShardSampler(len(self.dataset), batch, rank, world, train, seed)
        self.device, self.memory_format = device, fmt
        self.loader = torch.utils.data.DataLoader(
            self.dataset,
            batch_size=batch,
            sampler=self.sampler,
            num_workers=workers,
            pin_memory=device.type == "cuda",
            persistent_workers=workers > 0,  # no fork per epoch: items carry the epoch
            drop_last=False,
        )
        shape = (1, 3, 1, 1)
        self.mean = torch.tensor(MEAN_RGB, device=device).view(shape)
        self.std = torch.tensor(STD_RGB, device=device).view(shape)

    @property
    def steps(self) -> int:
        return self.sampler.steps

    @property
    def records(self) -> int:
        return len(self.dataset)

    def __iter__(self):
        for images, labels, valid in self.loader:
            x = images.to(self.device, non_blocking=True).permute(0, 3, 1, 2).float()
            x = ((x - self.mean) / self.std).contiguous(memory_format=self.memory_format)
            yield (
                x,
                labels.to(self.device, non_blocking=True),
                valid.to(self.device, non_blocking=True),
            )
        self.sampler.epoch += 1


def classes_in(path: Path) -> int:
    """Number of classes: one more than the largest label in the file."""
    records = RecordFile(path)
    return int(max(records.label(i) for i in range(len(records)))) + 1
