"""`dlperf report` writes its files only once all of them are made: one that fails part-way
leaves the last report whole, never new figures beside an old page."""

from __future__ import annotations

from pathlib import Path

import pytest
from dlperf.report import html as report_html

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"


def test_a_report_that_fails_part_way_leaves_the_last_one_as_it_was(tmp_path, monkeypatch):
    out = tmp_path / "report"
    report_html.build_report(SWEEP, out)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["fig3_time_to_accuracy.png", "fig4_throughput.png", "fig5_nas_read.png",
                     "fig6_fabric.png", "index.html", "summary.json"]  # fmt: skip
    for path in out.iterdir():  # any write from here on shows in the content
        path.write_bytes(b"last report's " + path.name.encode())
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def fail(*args, **kwargs):
        raise RuntimeError("captions failed")

    monkeypatch.setattr(report_html, "captions", fail)  # after every figure is drawn
    with pytest.raises(RuntimeError, match="captions failed"):
        report_html.build_report(SWEEP, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
