"""Write images into MXNet RecordIO (.rec + .idx), the format the record iterator reads."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import mxnet as mx
from PIL import Image


def write_records(path: Path, items: Iterable[tuple[Image.Image, int]], quality: int = 95) -> int:
    """Encode each (image, label) as JPEG into ``path`` (.rec) and its index (.idx)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_rec, tmp_idx = path.with_suffix(".rec.tmp"), path.with_suffix(".idx.tmp")
    writer = mx.recordio.MXIndexedRecordIO(str(tmp_idx), str(tmp_rec), "w")
    count = 0
    for count, (image, label) in enumerate(items, start=1):
        buf = io.BytesIO()
        image.convert("RGB").save(buf, format="JPEG", quality=quality)
        header = mx.recordio.IRHeader(0, float(label), count - 1, 0)
        writer.write_idx(count - 1, mx.recordio.pack(header, buf.getvalue()))
    writer.close()
    tmp_rec.replace(path)
    tmp_idx.replace(path.with_suffix(".idx"))
    return count


def folder_items(root: Path) -> tuple[list[tuple[Path, int]], list[str]]:
    """ImageNet-style folder (one sub-folder per class) -> sorted (file, label) list."""
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    if not classes:
        raise ValueError(f"{root}: no class sub-folders (expected ROOT/<class>/<image>)")
    exts = {".jpg", ".jpeg", ".png", ".bmp", ".JPEG", ".JPG", ".PNG"}
    items = [
        (f, label)
        for label, name in enumerate(classes)
        for f in sorted((root / name).iterdir())
        if f.suffix in exts
    ]
    return items, classes


def prepare_folder(root: Path, output: Path, resize: int | None) -> int:
    items, _ = folder_items(root)

    def load():
        for file, label in items:
            image = Image.open(file)
            if resize:
                w, h = image.size
                scale = resize / min(w, h)
                image = image.resize((max(1, round(w * scale)), max(1, round(h * scale))))
            yield image, label

    return write_records(output, load())
