"""`dlperf data prepare` on the folders real data sets come in, and the header it writes."""

from __future__ import annotations

import json
from pathlib import Path

from dlperf.cli import main
from dlperf.data.recordio import class_count
from PIL import Image


def image(path: Path, colour=(120, 30, 200)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (10, 10), colour).save(path, format="PNG")


def prepare(root: Path, rec: Path) -> int:
    return main(["data", "prepare", str(root), "--output", str(rec)])


def test_folders_that_are_not_classes_are_left_out_and_suffixes_match_in_any_case(tmp_path):
    root = tmp_path / "train"
    (root / "lost+found").mkdir(parents=True)  # ext4's, at the root of a volume
    image(root / ".snapshot" / "old.png")  # a NAS's snapshots
    image(root / "cat" / "a.JPEG")
    image(root / "cat" / "b.Jpeg")
    (root / "cat" / "notes.txt").write_text("not an image")
    image(root / "dog" / "c.png")
    rec = tmp_path / "out" / "train.rec"
    assert prepare(root, rec) == 0
    meta = json.loads(rec.with_suffix(".meta.json").read_text())
    assert (meta["records"], meta["classes"], meta["class_names"]) == (3, 2, ["cat", "dog"])


def test_an_unreadable_image_is_named_and_nothing_is_left_behind(tmp_path, capsys):
    root = tmp_path / "train"
    image(root / "cat" / "0.png")
    (root / "cat" / "1.jpg").write_bytes(b"\xff\xd8 not a jpeg")
    out = tmp_path / "out"
    out.mkdir()
    assert prepare(root, out / "train.rec") == 2
    err = capsys.readouterr().err
    assert f"{root / 'cat' / '1.jpg'}: not a readable image" in err, err
    assert list(out.iterdir()) == []  # no .rec, no .idx, no temporary file


def test_an_image_too_large_for_pillow_is_named_not_a_traceback(tmp_path, capsys, monkeypatch):
    # Pillow refuses an image over twice MAX_IMAGE_PIXELS (a decompression bomb, ~179 Mpx by
    # default); 100 pixels over a limit of 10 stands in for a huge scan here.
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10)
    root = tmp_path / "train"
    image(root / "cat" / "huge.png")
    out = tmp_path / "out"
    out.mkdir()
    assert prepare(root, out / "train.rec") == 2
    err = capsys.readouterr().err
    assert f"{root / 'cat' / 'huge.png'}: not a readable image" in err, err
    assert list(out.iterdir()) == []


def test_a_folder_without_images_is_refused(tmp_path, capsys):
    (tmp_path / "train" / "cat").mkdir(parents=True)
    (tmp_path / "train" / "cat" / "notes.txt").write_text("x")
    assert prepare(tmp_path / "train", tmp_path / "train.rec") == 2
    assert "no images in its 1 class folder(s)" in capsys.readouterr().err
    assert not (tmp_path / "train.rec").exists()


def test_a_validation_set_with_other_classes_is_refused_before_training(tmp_path, capsys):
    for split, classes in (("train", "abc"), ("val", "bc")):
        for c in classes:
            image(tmp_path / split / c / "0.png")
        assert prepare(tmp_path / split, tmp_path / f"{split}.rec") == 0
    out = tmp_path / "run"
    code = main(["train", "--data", str(tmp_path / "train.rec"),
                 "--val-data", str(tmp_path / "val.rec"), "--output", str(out)])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "its classes are not those of --data" in err and "(2 against 3" in err, err
    assert "differ in a)" in err, err
    assert not out.exists()


def test_fewer_classes_than_the_data_holds_are_refused_before_training(tmp_path, capsys):
    for c in "abc":
        image(tmp_path / "train" / c / "0.png")
    assert prepare(tmp_path / "train", tmp_path / "train.rec") == 0
    out = tmp_path / "run"
    code = main(["train", "--data", str(tmp_path / "train.rec"), "--classes", "2",
                 "--output", str(out)])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert f"--classes 2: {tmp_path / 'train.rec'} holds 3 classes (labels 0 to 2)" in err, err
    assert not out.exists()


def test_an_interrupted_rewrite_never_pairs_the_new_records_with_the_old_index(
    tmp_path, monkeypatch
):
    import pytest

    root = tmp_path / "train"
    image(root / "cat" / "a.png")
    rec = tmp_path / "train.rec"
    assert prepare(root, rec) == 0
    old_idx = rec.with_suffix(".idx").read_text()
    image(root / "cat" / "b.png")
    image(root / "dog" / "c.png")
    real_replace = Path.replace

    def replace(self, target):  # interrupted after the .rec is in place
        if Path(target).suffix == ".idx":
            raise KeyboardInterrupt
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        prepare(root, rec)
    monkeypatch.undo()
    # the new .rec stands alone: readers refuse it for want of an index, and no header claims it
    assert rec.stat().st_size > 0 and not rec.with_suffix(".idx").exists(), old_idx
    assert not rec.with_suffix(".meta.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train", "train.rec"]


def test_a_header_left_from_an_earlier_file_is_not_trusted(tmp_path):
    image(tmp_path / "train" / "a" / "0.png")
    image(tmp_path / "train" / "b" / "0.png")
    rec = tmp_path / "train.rec"
    assert prepare(tmp_path / "train", rec) == 0
    assert class_count(rec, lambda path: 99) == 2  # the header's count
    with rec.open("ab") as fh:  # the .rec rewritten since by another tool
        fh.write(b"\0" * 4)
    assert class_count(rec, lambda path: 99) == 99  # scanned


def test_a_payload_holding_the_magic_number_is_split_as_dmlc_writes_it(tmp_path):
    import struct

    import mxnet as mx
    from dlperf.data.recordio import MAGIC, RecordFile, _pack_record

    magic = struct.pack("<I", MAGIC)
    # a header's worth of bytes, then the magic at byte 24 and again at 32 (4-byte boundaries)
    payload = bytes(24) + magic + b"abcd" + magic + b"tail!"
    rec = tmp_path / "m.rec"
    packed = _pack_record(payload)
    rec.write_bytes(packed)
    rec.with_suffix(".idx").write_text("0\t0\n")
    # the only aligned magic words left are the parts' own headers, as dmlc's writer leaves them
    words = [packed[i : i + 4] for i in range(0, len(packed), 4)]
    assert [i * 4 for i, w in enumerate(words) if w == magic] == [0, 32, 44]
    reader = mx.recordio.MXRecordIO(str(rec), "r")  # MXNet's own reader joins the parts
    assert reader.read() == payload
    reader.close()
    assert RecordFile(rec)._payload(0) == payload
