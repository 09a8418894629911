"""RecordIO preparation: the files MXNet's record iterator reads, with the right labels."""

from __future__ import annotations

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
    assert labels_in(rec) == [0, 0, 0, 1, 1, 1]


def test_digits_set_is_split_into_train_and_validation(digits):
    train, val = labels_in(digits / "train.rec"), labels_in(digits / "val.rec")
    assert len(train) + len(val) == 1797
    assert len(val) == 359
    assert set(train) == set(range(10)) == set(val)


def test_prepare_refuses_a_folder_without_classes(tmp_path):
    (tmp_path / "empty").mkdir()
    proc = dlperf("data", "prepare", str(tmp_path / "empty"), "--output", str(tmp_path / "x.rec"))
    assert proc.returncode == 2 and "no class sub-folders" in proc.stderr
