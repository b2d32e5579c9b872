"""Writing a report :class:`~perfscout.analysis.report.blocks.Document` to its files."""

from __future__ import annotations

from pathlib import Path

from perfscout.analysis.report.blocks import Document
from perfscout.analysis.report.html import to_html
from perfscout.analysis.report.markdown import to_markdown
from perfscout.io import write_atomic


def write(doc: Document, md: Path | None = None, html: Path | None = None) -> list[Path]:
    """Write ``doc`` as Markdown (figures linked relative to the file's folder) and/or HTML,
    each atomically: a reader never sees half a file. Returns the paths written."""
    written = []
    for path, render in ((md, lambda p: to_markdown(doc, p.parent)), (html, lambda p: to_html(doc))):
        if path is None:
            continue
        path = Path(path)
        text = render(path)
        write_atomic(path, text if text.endswith("\n") else text + "\n")
        written.append(path)
    return written
