"""The agent's report.html: the Markdown's content, escaped, with the sweep plots inlined."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from perfscout import agent
from perfscout.analysis.report.blocks import BulletList, Code, Document, Heading, Link, ListItem, Paragraph, Strong, Table
from perfscout.analysis.report.html import to_html
from perfscout.analysis.report.markdown import to_markdown
from perfscout.codecs.base import Codec, Compressed
from perfscout.graph.context import Context
from perfscout.graph.report import md_text

HOSTILE = "<script>alert(1)</script>"


class HostileCodec(Codec):
    """A real codec whose backend fails with an error message made of markup."""

    codec_id = "hostile"
    family = "test"
    device = "cpu"
    native_modes = ("abs",)

    @classmethod
    def version(cls) -> str:
        return "1"

    def compress(self, array: np.ndarray) -> Compressed:
        raise ValueError(HOSTILE)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        raise AssertionError("never reached: compress always fails")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    from perfscout.codecs import registry

    home = tmp_path_factory.mktemp("home")
    mp = pytest.MonkeyPatch()
    mp.setenv("PERFSCOUT_HOME", str(home))
    registry.register_codec("hostile", f"{__name__}:HostileCodec")
    try:
        spec = {"goal": "html report", "datasets": ["synthetic:grf:16,16"], "codecs": ["sz3", "zfp", "hostile"],
                "mode": "abs", "bounds": [1e-1, 1e-2], "repeats": 1}
        ctx = Context(home=str(home), planner="deterministic", noise_threshold=1e9)
        yield agent.run(spec, thread_id="html1", context=ctx)
    finally:
        mp.undo()
        registry.unregister_codec("hostile")


def test_html_report_sits_beside_the_markdown_with_table_and_inlined_plots(run):
    assert run.status == "done"
    page = Path(run.html_path)
    assert page == Path(run.report_path).with_name("report.html") and page.is_file()
    text = page.read_text(encoding="utf-8")
    records = json.loads((Path(run.run_dir) / "results.json").read_text())["records"]
    assert {r["codec"] for r in records} == {"sz3", "zfp", "hostile"}
    assert "<h2>Compression results</h2>" in text and "<th>compress MB/s</th>" in text
    for r in records:  # every stored record is a table row, its ratio as the Markdown prints it
        if r["ratio"] is not None:
            assert f"<td>{r['ratio']:.4g}</td>" in text
    assert "<td>hostile</td>" in text
    imgs = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}">', text)
    assert len(imgs) >= 1
    assert "<h2>Plots</h2>" in text
    # the plots come right after the results table, before the agent's notes
    assert text.index("<h2>Compression results</h2>") < text.index("<h2>Plots</h2>") < text.index(
        "<h2>What the agent decided</h2>")


def test_hostile_error_text_is_escaped(run):
    text = Path(run.html_path).read_text(encoding="utf-8")
    assert md_text(HOSTILE) in run.report  # the Markdown quotes the stored error, made inert
    assert "<script" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_one_record_gets_the_page_without_plots(perfscout_home):
    spec = {"datasets": ["synthetic:grf:8,8"], "codecs": ["sz3"], "mode": "abs", "bounds": [1e-2], "repeats": 1}
    out = agent.run(spec, thread_id="html-one", context=Context(home=str(perfscout_home), planner="deterministic",
                                                                  noise_threshold=1e9))
    text = Path(out.html_path).read_text(encoding="utf-8")
    assert "<h2>Compression results</h2>" in text and "<td>sz3</td>" in text
    assert "<img" not in text and "<h2>Plots</h2>" not in text
    assert not (Path(out.run_dir) / "plots").exists()


def test_every_construct_is_escaped_and_script_links_refused():
    # the report is blocks (perfscout.analysis.report.blocks); the HTML renderer must escape
    # every piece of text and make a link only of a safe target
    blocks = [Heading("A <b>head</b>"),
              BulletList([ListItem(["top ", Code("<i>code</i>"), " ", Strong("<u>bold</u>")],
                                   [["nested ", Link("x", "javascript:alert(1)")]]),
                          Link("r.md", "sweeps/a b/r.md")]),
              Table([["<img src=x>", "x | y"]], columns=["a", "b"]), Paragraph("<p>para")]
    out = to_html(Document("t", blocks))
    assert "<b>" not in out and "<i>" not in out and "<u>" not in out and "<img" not in out and "<p>para" not in out
    assert "<h2>A &lt;b&gt;head&lt;/b&gt;</h2>" in out
    assert "<code>&lt;i&gt;code&lt;/i&gt;</code>" in out and "<strong>&lt;u&gt;bold&lt;/u&gt;</strong>" in out
    assert "href" not in out.split("nested")[1].split("</li>")[0]  # a javascript: link stays text
    assert '<a href="sweeps/a%20b/r.md" rel="noopener noreferrer">r.md</a>' in out
    assert "<ul><li>top" in out and "<ul><li>nested" in out and out.count("<ul>") == out.count("</ul>") == 2
    assert "<td>&lt;img src=x&gt;</td><td>x | y</td>" in out
    md = to_markdown(Document("t", blocks))
    assert not re.search(r"(?<!\\)<(img|b>)", md) and "](javascript:" not in md and md_text("<p>para") in md


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
def test_page_renders_in_headless_chromium_with_its_image(run, tmp_path):
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (make system-deps installs the Debian package)")
    from tests.integration.test_report_browser import chromium

    alone = tmp_path / "alone" / "report.html"  # away from plots/: the page must not need them
    alone.parent.mkdir()
    shutil.copy(run.html_path, alone)
    dom = chromium(alone, tmp_path / "profile-dom", "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert re.search(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', dom.stdout)
    assert "<script" not in dom.stdout
    shot = tmp_path / "shot.png"
    res = chromium(alone, tmp_path / "profile-shot", "--window-size=1200,2400", f"--screenshot={shot}")
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.std() > 0.05  # not a blank page
    assert len(np.unique((pixels.reshape(-1, 3) * 255).astype(np.uint8), axis=0)) > 200  # text + plot colours
    shutil.copy(shot, alone.parent.parent / "screenshot.png")
