"""The plain-text renderer of the report model (:mod:`.blocks`), for a terminal.

The Markdown renderer escapes every character that could become markup (``\\]``, ``\\_``,
``\\*``), which is right in a file a Markdown viewer reads and noise on a terminal, where
nothing renders it. Here text is printed as written: headings stand on their own line
(underlined at levels 1 and 2), lists are indented with ``-`` (or ``1.``), tables are
aligned in columns, code is verbatim. Control characters are still replaced and each
inline value stays on one line, as in the other renderers.
"""

from __future__ import annotations

from pathlib import Path

from perfscout.analysis.report.blocks import (
    Block,
    BulletList,
    CodeBlock,
    Details,
    Figure,
    Finding,
    Heading,
    Inline,
    ListItem,
    Note,
    Paragraph,
    Table,
    plain,
    replace_controls,
)
from perfscout.analysis.report.markdown import clean


def inline(content: Inline) -> str:
    """``content`` as one line of plain text (no markup, no escapes)."""
    return clean(plain(content)).strip()


def _list_lines(items: list, ordered: bool, indent: str = "") -> list[str]:
    out = []
    for n, item in enumerate(items, 1):
        marker = f"{n}. " if ordered else "- "
        text, children = (item.text, item.children) if isinstance(item, ListItem) else (item, [])
        out.append(indent + marker + inline(text))
        if children:
            out += _list_lines(children, False, indent + " " * len(marker))
    return out


def _table_lines(t: Table) -> list[str]:
    if t.is_empty or not t.columns:
        return [inline(t.empty)]
    cells = [[inline(c) for c in t.columns]] + [[inline(c) for c in row] for row in t.rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(t.columns))]

    def row(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if a == "right" else v.center(w) if a == "center" else v.ljust(w)
                         for v, w, a in zip(values, widths, t.alignments)).rstrip()

    return [row(cells[0]), "  ".join("-" * w for w in widths)] + [row(r) for r in cells[1:]]


def block_lines(b: Block) -> list[str]:
    """The text lines of one block (no trailing blank line)."""
    if isinstance(b, Heading):
        text = inline(b.text)
        if not text:
            return []
        return [text, ("=" if b.level == 1 else "-") * len(text)] if b.level <= 2 else [text]
    if isinstance(b, Paragraph):
        text = inline(b.text)
        return [text] if text else []
    if isinstance(b, BulletList):
        return _list_lines(b.items, b.ordered)
    if isinstance(b, Table):
        return _table_lines(b)
    if isinstance(b, CodeBlock):
        return ["    " + line for line in replace_controls(b.text.rstrip("\n")).split("\n")]
    if isinstance(b, Figure):
        caption = inline(b.caption)
        return [f"[figure: {Path(b.path).as_posix()}]" + (f" {caption}" if caption else "")]
    if isinstance(b, Note):
        return [("Warning: " if b.kind == "warning" else "Note: ") + inline(b.text)]
    if isinstance(b, Finding):
        items = _list_lines(list(b.evidence) + list(b.actions), False)
        return [inline(b.head)] + ([""] + items if items else [])
    if isinstance(b, Details):
        return [inline(b.summary) + ":", *("  " + line if line else line for line in blocks_lines(b.blocks))]
    raise TypeError(f"not a report block: {type(b).__name__}")


def blocks_lines(blocks: list[Block]) -> list[str]:
    out: list[str] = []
    for b in blocks:
        lines = block_lines(b)
        if lines:
            out += lines + [""]
    while out and out[-1] == "":
        out.pop()
    return out


def render_blocks(blocks: list[Block]) -> str:
    """Blocks as plain text for a terminal."""
    return "\n".join(blocks_lines(blocks)) + "\n"


__all__ = ["block_lines", "blocks_lines", "inline", "render_blocks"]
