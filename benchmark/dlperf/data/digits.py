"""A small real data set for tests and demos: scikit-learn's handwritten digits (1,797 8x8
grey images, 10 classes, from the UCI repository), upscaled to RGB and split train/val."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits

from dlperf.data.recordio import write_records


def build_digits(
    output: Path, image_size: int = 32, val_fraction: float = 0.2, seed: int = 0
) -> dict:
    digits = load_digits()
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(digits.images))
    n_val = round(len(order) * val_fraction)
    splits = {"val": order[:n_val], "train": order[n_val:]}

    def images(indices):
        for i in indices:
            grey = (digits.images[i] * (255.0 / 16.0)).astype(np.uint8)
            yield (
                Image.fromarray(grey).resize((image_size, image_size), Image.BILINEAR),
                int(digits.target[i]),
            )

    counts = {
        name: write_records(output / f"{name}.rec", images(idx)) for name, idx in splits.items()
    }
    return {"train": counts["train"], "val": counts["val"], "classes": 10, "image_size": image_size}
