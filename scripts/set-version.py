#!/usr/bin/env python3
"""Set the version of the dlperf package and the dlperf.cluster collection.

The version lives in pyproject.toml. galaxy.yml cannot read it (ansible-galaxy takes a literal),
and CHANGELOG.md's newest heading names it, so this writes the same version into all three:
pyproject's `version`, galaxy.yml's `version`, and a new `## VERSION` heading on top of the
changelog (kept when it is already there). tests/package refuses a mismatch.

Usage: scripts/set-version.py VERSION [--root DIR]      e.g. scripts/set-version.py 0.2.0
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

# MAJOR.MINOR.PATCH: what ansible-galaxy requires and what PEP 440 spells the same way (a
# pre-release suffix would be written differently by the two, e.g. 1.0.0-rc1 and 1.0.0rc1).
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


def replace_once(path: Path, pattern: str, new: str) -> str:
    text = path.read_text()
    updated, count = re.subn(pattern, new, text, count=1, flags=re.M)
    if count != 1:
        raise SystemExit(f"set-version: {path}: no line matching {pattern!r}")
    return updated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("version", help="a semantic version, e.g. 0.2.0")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    if not SEMVER.match(args.version):
        parser.error(
            f"VERSION {args.version!r}: give a semantic version MAJOR.MINOR.PATCH, e.g. 0.2.0"
        )
    root = args.root
    changelog = (root / "CHANGELOG.md").read_text()
    heading = f"## {args.version}\n"
    if heading not in changelog:
        first = changelog.find("\n## ")
        at = first + 1 if first >= 0 else len(changelog)
        changelog = changelog[:at] + f"{heading}\n- (what changed)\n\n" + changelog[at:]
    # Everything is computed before anything is written: a bad file changes none of them.
    new = {
        root / "pyproject.toml": replace_once(
            root / "pyproject.toml", r'^version = "[^"]*"$', f'version = "{args.version}"'
        ),
        root / "galaxy.yml": replace_once(
            root / "galaxy.yml", r"^version: .*$", f"version: {args.version}"
        ),
        root / "CHANGELOG.md": changelog,
    }
    for path, text in new.items():
        tmp = path.with_name(path.name + ".new")
        tmp.write_text(text)
        tmp.replace(path)
    print(f"version {args.version}: pyproject.toml, galaxy.yml, CHANGELOG.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
