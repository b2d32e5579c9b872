"""`perfscout diagnose` on a terminal prints plain text, not Markdown with its escapes."""

from __future__ import annotations

import os
import subprocess
import sys

from typer.testing import CliRunner

from perfscout.analysis.report.blocks import BulletList, Code, Heading, Paragraph, Table
from perfscout.analysis.report.text import render_blocks
from perfscout.cli import app
from tests.conftest import ROOT

FIXTURE = str(ROOT / "tests" / "fixtures" / "ncu" / "h200_cupy_kernels_raw.csv")
ESCAPES = ("\\]", "\\_", "\\*", "\\[", "\\<", "`")


def test_text_renderer_prints_text_as_written() -> None:
    out = render_blocks([Heading("1. __init__ [x]", 2), Paragraph(["a *b* ", Code("k_<T>"), " [>= 53%]"]),
                         BulletList(["x_y = 1 [limiter if >= 53%]", "two\nlines"]),
                         Table([["a", 1.5], ["bbb", 22.0]], columns=["name", "value"])])
    assert out.splitlines() == [
        "1. __init__ [x]", "---------------", "",
        "a *b* k_<T> [>= 53%]", "",
        "- x_y = 1 [limiter if >= 53%]", "- two lines", "",
        "name  value", "----  -----", "a       1.5", "bbb      22"]


def test_diagnose_format_text_has_no_markdown_escapes_and_markdown_keeps_them() -> None:
    runner = CliRunner()
    text = runner.invoke(app, ["diagnose", "--format", "text", "--ncu-csv", FIXTURE])
    assert text.exit_code == 0, text.output
    assert "limiter if >= 53%]" in text.stdout and "latency_bound" in text.stdout
    assert not any(e in text.stdout for e in ESCAPES)
    piped = runner.invoke(app, ["diagnose", "--ncu-csv", FIXTURE])  # auto, not a terminal: Markdown
    assert piped.exit_code == 0 and "limiter if >= 53%\\]" in piped.stdout and "| share |" in piped.stdout
    bad = runner.invoke(app, ["diagnose", "--format", "html", "--ncu-csv", FIXTURE])
    assert bad.exit_code == 2 and "--format must be auto, text or markdown" in bad.stderr


def test_diagnose_on_a_real_terminal_prints_text() -> None:
    primary, secondary = os.openpty()  # the child's stdout is a terminal, as a person's is
    chunks = []
    try:
        proc = subprocess.Popen([sys.executable, "-m", "perfscout", "diagnose", "--ncu-csv", FIXTURE],
                                stdout=secondary, stderr=subprocess.PIPE, cwd=ROOT,
                                env={**os.environ, "TERM": "dumb", "NO_COLOR": "1"})
        os.close(secondary)
        # read while it writes: a terminal's buffer is small, a child writing into a full one waits
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        stderr = proc.stderr.read().decode("utf-8", "replace")
        assert proc.wait(timeout=300) == 0, stderr
    finally:
        os.close(primary)
    out = b"".join(chunks).decode("utf-8", "replace")
    assert "limiter if >= 53%]" in out and "Diagnosis\r\n=========" in out
    assert "\\]" not in out and "| share |" not in out
