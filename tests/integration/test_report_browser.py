"""Open a real report.html in headless Chromium: it renders, and its images are in the DOM."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from perfscout.api_sweep import report, sweep

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: Flags for a root container with no display, no GPU and no network (see the Makefile's system-deps).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]

SPEC = """\
name: browser
repeats: 1
datasets: [{synthetic: "grf:8,16,16"}]
codecs: [sz3, zfp]
modes: [abs]
bounds: [1.0e-1, 1.0e-2, 1.0e-3]
"""


@pytest.fixture(scope="module")
def html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (make system-deps installs the Debian package)")
    base = tmp_path_factory.mktemp("browser")
    (base / "spec.yaml").write_text(SPEC)
    sweep(base / "spec.yaml", out=base / "run", progress=False)
    page = report(base / "run")
    # Move the page away from its plots/ folder: it must not need them.
    alone = base / "alone" / "report.html"
    alone.parent.mkdir()
    shutil.copy(page, alone)
    return alone


def chromium(html: Path, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, html.as_uri()],
                          capture_output=True, text=True, timeout=120)


def test_report_renders_with_its_images(html: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    res = chromium(html, tmp_path / "profile-shot", "--window-size=1200,3000", f"--screenshot={shot}")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.shape[0] == 3000 and pixels.shape[1] == 1200
    # Not blank: many distinct colours (text, table rules, plot lines), not one background.
    assert pixels.std() > 0.05
    assert len(np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)) > 200
    shutil.copy(shot, html.parent / "screenshot.png")  # kept beside the page for a human look


def test_dom_holds_the_inlined_images(html: Path, tmp_path: Path) -> None:
    res = chromium(html, tmp_path / "profile-dom", "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    imgs = re.findall(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', dom)
    assert len(imgs) == 5  # one dataset, five figures
    assert "<h2>Environment</h2>" in dom and "<h2>Failed tasks</h2>" in dom
    assert dom.count("<table") >= 3
