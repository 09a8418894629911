"""The documentation stays navigable: every relative link resolves, the README stays short."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = [
    *REPO.glob("*.md"),
    *REPO.glob("docs/*.md"),
    *REPO.glob("roles/*/README.md"),
    REPO / "plugins" / "README.md",
]


def test_every_relative_link_resolves():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            external = target.startswith(("http://", "https://", "mailto:"))
            if not external and not (doc.parent / target).exists():
                broken.append(f"{doc.relative_to(REPO)} -> {target}")
    assert not broken, broken


def test_every_role_has_a_readme_and_the_readme_fits_a_few_screens():
    roles = [p for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir()]
    assert [r.name for r in roles if not (r / "README.md").is_file()] == []
    assert len((REPO / "README.md").read_text().splitlines()) <= 150
