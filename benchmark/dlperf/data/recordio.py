"""MXNet's RecordIO format (.rec + .idx), written and read without any framework.

A .rec file is a sequence of records: a little-endian uint32 magic (0xced7230a), a uint32 whose
upper 3 bits are a continuation flag and lower 29 bits the payload length, the payload, and
zero padding to 4 bytes (a payload holding the magic at a 4-byte boundary is split there into
parts flagged 1, 2, ..., 3, the magic left out, as dmlc-core's writer does). An image record's
payload is MXNet's IRHeader (uint32 flag, float32
label, uint64 id, uint64 id2; ``flag`` extra float32 labels follow when it is > 0) and the
encoded image. The .idx file has one ``key<TAB>byte offset`` line per record. MXNet's
``ImageRecordIter`` reads what ``write_records`` writes (the MXNet engine), and ``RecordFile``
reads it for engines that have no MXNet (the PyTorch engine).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import struct
from collections.abc import Iterable
from pathlib import Path

from PIL import Image

MAGIC = 0xCED7230A
_MAGIC_BYTES = struct.pack("<I", MAGIC)
_HEADER = struct.Struct("<IfQQ")
_LENGTH_MASK = (1 << 29) - 1


def _part(flag: int, data: bytes) -> bytes:
    pad = (4 - len(data) % 4) % 4
    return struct.pack("<II", MAGIC, flag << 29 | len(data)) + data + b"\0" * pad


def _pack_record(payload: bytes) -> bytes:
    """One record as dmlc-core's writer lays it out: a payload holding the magic number at a
    4-byte boundary is split there (flags 1, 2..., 3; the magic itself left out, readers put it
    back), so that a reader looking for record starts by the magic never starts inside one."""
    if len(payload) > _LENGTH_MASK:
        raise ValueError(f"record of {len(payload)} bytes exceeds RecordIO's 2^29-1 limit")
    cuts = [i for i in range(0, len(payload) - 3, 4) if payload[i : i + 4] == _MAGIC_BYTES]
    if not cuts:
        return _part(0, payload)
    parts, start = [], 0
    for n, cut in enumerate(cuts):
        parts.append(_part(1 if n == 0 else 2, payload[start:cut]))
        start = cut + 4
    parts.append(_part(3, payload[start:]))
    return b"".join(parts)


def meta_path(path: Path) -> Path:
    return path.with_suffix(".meta.json")


def write_records(
    path: Path,
    items: Iterable[tuple[Image.Image, int]],
    quality: int = 95,
    classes: int | None = None,
    shuffle_seed: int | None = None,
    class_names: list[str] | None = None,
) -> int:
    """Encode each (image, label) as JPEG into ``path`` (.rec), its index (.idx) and a header
    (.meta.json: record and class counts, the class names, the shuffle seed, the index's
    checksum). Nothing of a run that fails is left behind.
    Engines take the class count from the header instead of scanning the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # Temporary names of this process only (two runs writing one output cannot mix their
    # files), removed when anything fails; the header replaces its old one last.
    stem = f".{path.name}.{os.getpid()}"
    tmp_rec, tmp_idx, tmp_meta = (path.with_name(f"{stem}.{x}.tmp") for x in ("rec", "idx", "meta"))
    try:
        count, top = 0, -1
        with tmp_rec.open("wb") as rec, tmp_idx.open("w") as idx:
            for count, (image, label) in enumerate(items, start=1):
                buf = io.BytesIO()
                image.convert("RGB").save(buf, format="JPEG", quality=quality)
                idx.write(f"{count - 1}\t{rec.tell()}\n")
                payload = _HEADER.pack(0, float(label), count - 1, 0) + buf.getvalue()
                rec.write(_pack_record(payload))
                top = max(top, int(label))
            rec.flush()
            os.fsync(rec.fileno())
            idx.flush()
            os.fsync(idx.fileno())
        if count == 0:
            raise ValueError(f"{path}: no images to write")
        meta = {
            "records": count,
            "classes": classes if classes is not None else top + 1,
            "shuffle_seed": shuffle_seed,
            "idx_sha256": hashlib.sha256(tmp_idx.read_bytes()).hexdigest(),
            "rec_bytes": tmp_rec.stat().st_size,
        }
        if class_names is not None:
            meta["class_names"] = list(class_names)
        with tmp_meta.open("w") as fh:
            fh.write(json.dumps(meta, indent=1, sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        # Three files cannot be replaced as one: the old index and header go first, so that an
        # interruption leaves a .rec without an .idx (refused for several ranks, read whole by
        # one), never a new .rec with the old one's offsets.
        path.with_suffix(".idx").unlink(missing_ok=True)
        meta_path(path).unlink(missing_ok=True)
        tmp_rec.replace(path)
        tmp_idx.replace(path.with_suffix(".idx"))
        tmp_meta.replace(meta_path(path))
        # the renames themselves on disk: after a power loss the directory names the new files
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except BaseException:
        for tmp in (tmp_rec, tmp_idx, tmp_meta):
            tmp.unlink(missing_ok=True)
        raise
    return count


def read_meta(path: Path) -> dict | None:
    """The header `write_records` wrote beside a .rec, or None (a file from elsewhere)."""
    try:
        return json.loads(meta_path(Path(path)).read_text())
    except (OSError, ValueError):
        return None


def class_count(path: Path, scan) -> int:
    """Classes of a .rec: from its header when `dlperf data` wrote it, else ``scan(path)``. A
    header whose size is not the file's belongs to an earlier file (rewritten since by another
    tool): the file is scanned instead."""
    meta = read_meta(path)
    if meta and meta.get("classes") and meta.get("rec_bytes") == Path(path).stat().st_size:
        return int(meta["classes"])
    return scan(path)


def identity(path: Path) -> dict | None:
    """What names a data set in provenance: its size and the checksum of its index."""
    path = Path(path)
    idx = path.with_suffix(".idx")
    if not path.is_file():
        return None
    return {
        "path": str(path),
        "rec_bytes": path.stat().st_size,
        "idx_sha256": hashlib.sha256(idx.read_bytes()).hexdigest() if idx.is_file() else None,
    }


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


# Folders a file system or a tool adds beside the classes (ext4's lost+found, a NAS's
# .snapshot, .ipynb_checkpoints): counted as classes they would shift every label after them.
NOT_CLASSES = {"lost+found"}
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp"}


def folder_items(root: Path) -> tuple[list[tuple[Path, int]], list[str]]:
    """ImageNet-style folder (one sub-folder per class) -> sorted (file, label) list."""
    classes = sorted(
        p.name
        for p in root.iterdir()
        if p.is_dir() and not p.name.startswith(".") and p.name not in NOT_CLASSES
    )
    if not classes:
        raise ValueError(f"{root}: no class sub-folders (expected ROOT/<class>/<image>)")
    items = [
        (f, label)
        for label, name in enumerate(classes)
        for f in sorted((root / name).iterdir())
        if f.suffix.lower() in IMAGE_SUFFIXES and not f.name.startswith(".")
    ]
    if not items:
        raise ValueError(
            f"{root}: no images in its {len(classes)} class folder(s) (looked for "
            f"{', '.join(sorted(IMAGE_SUFFIXES))}, in any case)"
        )
    return items, classes


def prepare_folder(root: Path, output: Path, resize: int | None, seed: int = 0) -> int:
    """Pack the folder in a seeded random order: readers that give each rank a contiguous part
    of the file (MXNet's record iterator) then give every rank every class, not 1/world of them.
    The class names go into the header, so that a validation set can be checked against them."""
    items, classes = folder_items(root)
    random.Random(seed).shuffle(items)

    def load():
        for file, label in items:
            try:
                image = Image.open(file)
                image.load()
                image = image.convert("RGB")  # a mode JPEG cannot hold fails here, named
            except (OSError, ValueError, Image.DecompressionBombError) as exc:
                raise ValueError(f"{file}: not a readable image ({exc})") from None
            if resize:
                w, h = image.size
                scale = resize / min(w, h)
                image = image.resize((max(1, round(w * scale)), max(1, round(h * scale))))
            yield image, label

    return write_records(
        output, load(), classes=len(classes), shuffle_seed=seed, class_names=classes
    )


def class_names(path: Path) -> list[str] | None:
    """The class names `dlperf data prepare` recorded for a .rec (None when it has none)."""
    meta = read_meta(path)
    return meta.get("class_names") if meta else None
