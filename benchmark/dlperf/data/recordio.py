"""MXNet's RecordIO format (.rec + .idx), written and read without any framework.

A .rec file is a sequence of records: a little-endian uint32 magic (0xced7230a), a uint32 whose
upper 3 bits are a continuation flag and lower 29 bits the payload length, the payload, and
zero padding to 4 bytes. An image record's payload is MXNet's IRHeader (uint32 flag, float32
label, uint64 id, uint64 id2; ``flag`` extra float32 labels follow when it is > 0) and the
encoded image. The .idx file has one ``key<TAB>byte offset`` line per record. MXNet's
``ImageRecordIter`` reads what ``write_records`` writes (the MXNet engine), and ``RecordFile``
reads it for engines that have no MXNet (the PyTorch engine).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from pathlib import Path

from PIL import Image

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_HEADER = struct.Struct("<IfQQ")
_LENGTH_MASK = (1 << 29) - 1


def _pack_record(payload: bytes) -> bytes:
    if len(payload) > _LENGTH_MASK:
        raise ValueError(f"record of {len(payload)} bytes exceeds RecordIO's 2^29-1 limit")
    pad = (4 - len(payload) % 4) % 4
    return struct.pack("<II", MAGIC, len(payload)) + payload + b"\0" * pad


def write_records(path: Path, items: Iterable[tuple[Image.Image, int]], quality: int = 95) -> int:
    """Encode each (image, label) as JPEG into ``path`` (.rec) and its index (.idx), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp_rec, tmp_idx = path.with_suffix(".rec.tmp"), path.with_suffix(".idx.tmp")
    count = 0
    with tmp_rec.open("wb") as rec, tmp_idx.open("w") as idx:
        for count, (image, label) in enumerate(items, start=1):
            buf = io.BytesIO()
            image.convert("RGB").save(buf, format="JPEG", quality=quality)
            idx.write(f"{count - 1}\t{rec.tell()}\n")
            rec.write(_pack_record(_HEADER.pack(0, float(label), count - 1, 0) + buf.getvalue()))
    tmp_rec.replace(path)
    tmp_idx.replace(path.with_suffix(".idx"))
    return count


class RecordFile:
    """Random access to the images of a .rec file through its .idx (one handle per process)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        idx = self.path.with_suffix(".idx")
        if not idx.exists():
            raise FileNotFoundError(f"{idx}: no index beside {self.path} (dlperf data writes one)")
        with idx.open() as fh:
            self.offsets = [int(line.split("\t")[1]) for line in fh if line.strip()]
        self._fh = None
        self._pid = None

    def __len__(self) -> int:
        return len(self.offsets)

    def _handle(self):
        import os

        if self._fh is None or self._pid != os.getpid():  # DataLoader workers fork
            self._fh, self._pid = self.path.open("rb"), os.getpid()
        return self._fh

    def _payload(self, offset: int) -> bytes:
        fh = self._handle()
        fh.seek(offset)
        parts = []
        while True:
            magic, lrec = struct.unpack("<II", fh.read(8))
            if magic != MAGIC:
                raise ValueError(f"{self.path}: bad RecordIO magic at byte {offset}")
            flag, length = lrec >> 29, lrec & _LENGTH_MASK
            parts.append(fh.read(length))
            fh.read((4 - length % 4) % 4)
            if flag in (0, 3):  # a whole record, or the last part of a split one
                return _MAGIC_BYTES.join(parts)

    def read(self, i: int) -> tuple[bytes, float]:
        """The encoded image and the (first) label of record ``i``."""
        payload = self._payload(self.offsets[i])
        flag, label, _, _ = _HEADER.unpack_from(payload)
        start = _HEADER.size
        if flag > 0:
            (label,) = struct.unpack_from("<f", payload, start)
            start += 4 * flag
        return payload[start:], label

    def label(self, i: int) -> float:
        return self.read(i)[1]


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
