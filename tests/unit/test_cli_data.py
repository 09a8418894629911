"""dlperf data digits where scikit-learn is absent (the nodes' venvs leave it out)."""

from __future__ import annotations

import sys

from dlperf.cli import main


def test_digits_without_scikit_learn_names_the_extra_and_writes_nothing(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn now fails
    monkeypatch.delitem(sys.modules, "dlperf.data.digits", raising=False)
    out = tmp_path / "digits"
    assert main(["data", "digits", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "dlperf data digits: error:" in err and "sklearn is not installed" in err, err
    assert "dlperf[digits]" in err, err
    assert not out.exists()
