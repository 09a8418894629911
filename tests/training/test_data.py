"""RecordIO preparation: the files MXNet's record iterator reads, with the right labels."""

from __future__ import annotations

import json
from pathlib import Path

import mxnet as mx
from PIL import Image

from .conftest import dlperf


def labels_in(rec: Path) -> list[int]:
    reader = mx.recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    labels = []
    for key in reader.keys:
        header, payload = mx.recordio.unpack(reader.read_idx(key))
        assert mx.image.imdecode(payload).shape[2] == 3  # a decodable RGB image
        labels.append(int(header.label))
    reader.close()
    return labels


def test_prepare_packs_an_imagenet_style_folder_with_one_label_per_class(tmp_path):
    root = tmp_path / "images"
    for cls, colour in (("cat", (200, 10, 10)), ("dog", (10, 200, 10))):
        (root / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (40 + i, 30), colour).save(root / cls / f"{i}.png")
    rec = tmp_path / "train.rec"
    proc = dlperf("data", "prepare", str(root), "--output", str(rec), "--resize", "32")
    assert proc.returncode == 0, proc.stderr
    assert sorted(labels_in(rec)) == [0, 0, 0, 1, 1, 1]


def part_labels(rec: Path, part: int, parts: int) -> list[int]:
    """The labels MXNet's record iterator gives rank PART of PARTS (a contiguous part)."""
    it = mx.io.ImageRecordIter(
        path_imgrec=str(rec), path_imgidx=str(rec.with_suffix(".idx")), data_shape=(3, 8, 8),
        batch_size=1, num_parts=parts, part_index=part, shuffle=False, round_batch=False,
    )  # fmt: skip
    return [int(batch.label[0].asscalar()) for batch in it]


def test_prepare_shuffles_so_that_every_ranks_part_holds_the_classes(tmp_path):
    # A class-ordered folder, 40 classes of 8 images: in folder order rank r of 4 would see
    # classes 10r..10r+9 only; shuffled, each of MXNet's 4 contiguous parts has >= 90 % of them.
    root = tmp_path / "images"
    for cls in range(40):
        (root / f"c{cls:02d}").mkdir(parents=True)
        for i in range(8):
            Image.new("RGB", (12, 12), (cls * 6, i * 30, 0)).save(root / f"c{cls:02d}" / f"{i}.png")
    rec = tmp_path / "train.rec"
    proc = dlperf("data", "prepare", str(root), "--output", str(rec), "--seed", "7")
    assert proc.returncode == 0, proc.stderr
    parts = [part_labels(rec, r, 4) for r in range(4)]
    assert sum(len(p) for p in parts) == 320
    for labels in parts:
        assert len(set(labels)) >= 36, sorted(set(labels))
    meta = json.loads(rec.with_suffix(".meta.json").read_text())
    assert (meta["records"], meta["classes"], meta["shuffle_seed"]) == (320, 40, 7)


def test_digits_set_is_split_into_train_and_validation(digits):
    train, val = labels_in(digits / "train.rec"), labels_in(digits / "val.rec")
    assert len(train) + len(val) == 1797
    assert len(val) == 359
    assert set(train) == set(range(10)) == set(val)


def test_prepare_refuses_a_folder_without_classes(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = dlperf("data", "prepare", str(tmp_path / "empty"), "--output", str(tmp_path / "x.rec"))
    assert proc.returncode == 2 and "no class sub-folders" in proc.stderr
