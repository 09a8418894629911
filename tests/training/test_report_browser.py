"""The HTML report as a reader's browser draws it (headless Chromium, Debian's package)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from dlperf.report.html import build_report

# A sweep of the virtual cluster, stored (the package tier draws its report too): the page is
# what is under test here, not the sweep, which test_sweep_report.py runs.
SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "sweep"

CHROMIUM = shutil.which("chromium")
# As root (--no-sandbox), without a GPU, and with /dev/shm as small as a container's (64 MiB).
HEADLESS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


def screenshot(page: Path, out: Path):
    """The page as headless Chromium draws it in a 1280 px wide window, as an RGB array."""
    import matplotlib.image

    proc = subprocess.run(
        [CHROMIUM, *HEADLESS, "--hide-scrollbars", "--window-size=1280,6000",
         f"--screenshot={out}", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and out.exists(), proc.stderr[-2000:]
    return matplotlib.image.imread(out)[..., :3]


def coloured(image) -> int:
    """Pixels of a colour (text, tables and page are black, grey or white; figures are not)."""
    return int(((image.max(axis=-1) - image.min(axis=-1)) > 0.25).sum())


def test_a_reader_sees_every_figure_and_table_from_the_one_html_file(tmp_path):
    assert CHROMIUM, "chromium is not installed: run scripts/bootstrap.sh"
    report = build_report(SWEEP, tmp_path / "report")
    # the page alone, in a directory without the PNGs: it must carry its figures itself
    alone = tmp_path / "alone" / "index.html"
    alone.parent.mkdir()
    alone.write_text(report["html"].read_text())
    proc = subprocess.run(
        [CHROMIUM, *HEADLESS, "--dump-dom", alone.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert dom.count('<img alt="fig') == 4
    assert dom.count('src="data:image/png;base64,') == 4
    assert not re.findall(r'(?:src|href)="(?!data:)', dom)  # nothing fetched from elsewhere
    assert dom.count("<table") >= 3 and "<h2>Summary</h2>" in dom

    shot = screenshot(alone, tmp_path / "page.png")
    bare = tmp_path / "bare.html"  # the same page without its figures: the control
    bare.write_text(re.sub(r"<img [^>]*>", "", alone.read_text()))
    control = screenshot(bare, tmp_path / "bare.png")
    assert coloured(control) < 200, "the page draws colour outside its figures"
    assert coloured(shot) > 20_000, "the figures are not visible in the rendered page"
    # nothing is cut off at the window's right edge (a table wider than the page would be)
    assert shot[:, -12:, :].min() > 0.9
