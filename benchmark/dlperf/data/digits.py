"""A small real data set for tests and demos: scikit-learn's handwritten digits (1,797 8x8
grey images, 10 classes, from the UCI repository), upscaled to RGB and split train/val."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from dlperf.data.recordio import write_records


class MissingExtraError(RuntimeError):
    """scikit-learn, the digits extra, is not installed here (the nodes' venvs leave it out)."""


def build_digits(
    output: Path, image_size: int = 32, val_fraction: float = 0.2, seed: int = 0
) -> dict:
    try:
        from sklearn.datasets import load_digits
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").partition(".")[0]
        if missing not in ("sklearn", "scipy"):
            raise
        raise MissingExtraError(
            f"the digits set needs scikit-learn ({missing} is not installed here): "
            "install dlperf[digits], or build it on the controller as benchmark.yml does"
        ) from exc
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
        name: write_records(
            output / f"{name}.rec",
            images(idx),
            classes=10,
            shuffle_seed=seed,
            class_names=[str(d) for d in range(10)],
        )
        for name, idx in splits.items()
    }
    return {"train": counts["train"], "val": counts["val"], "classes": 10, "image_size": image_size}
