"""The test-only exports(5) -> ganesha translator keeps clients and squash semantics."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "molecule/nfs_protocol/files/exports_to_ganesha.py"
spec = importlib.util.spec_from_file_location("exports_to_ganesha", SCRIPT)
translator = importlib.util.module_from_spec(spec)
spec.loader.exec_module(translator)


def test_each_client_keeps_its_access_and_squash():
    exports = translator.parse_exports(
        "# comment\n/srv/a 198.18.0.0/24(rw,sync,root_squash) 198.18.1.5(ro,all_squash)\n"
    )
    conf = translator.render(exports)
    assert "Path = /srv/a;" in conf and "Access_Type = None;" in conf
    first, second = conf.split("CLIENT {")[1:]
    assert "Clients = 198.18.0.0/24;" in first and "Access_Type = RW;" in first
    assert "Squash = Root_Squash;" in first
    assert "Clients = 198.18.1.5;" in second and "Access_Type = RO;" in second
    assert "Squash = All;" in second


def test_unparsable_client_spec_is_rejected():
    with pytest.raises(SystemExit, match="unparsable"):
        translator.parse_exports("/srv/a 198.18.0.0/24 rw\n")
