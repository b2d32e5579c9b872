"""The one report model: typed blocks that the Markdown and the HTML renderer both read.

Every report perfscout writes (a sweep's, the agent's, ``diagnose``'s, ``regress``'s, a
tuning run's) is a :class:`Document`: a title and a list of blocks. Building a report means
building blocks; :func:`.markdown.to_markdown` and :func:`.html.to_html` turn the same list into
``report.md`` and a self-contained ``report.html`` (:func:`.output.write` writes both), so the
two always say the same thing. This module imports neither renderer.

Text inside a block is *inline* content: a plain ``str`` (always literal: escaped by each
renderer, never read as markup, whatever it holds), a span (:class:`Code`, :class:`Strong`,
:class:`Link`) or a list of these. User and tool text therefore goes in as a ``str`` and
stays text in both formats. Text the program writes itself may use the house's two marks,
```code``` and ``**bold**``, through :func:`markup`; that is the only parser, and it knows no
links or HTML. A link exists only as a :class:`Link`, and only a target that
:func:`safe_target` accepts becomes one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Union

# ----------------------------------------------------------------------------- inline content


@dataclass(frozen=True)
class Code:
    """Inline code (a name, a command, a path): shown verbatim in a monospace span."""

    text: str


@dataclass(frozen=True)
class Strong:
    content: Inline


@dataclass(frozen=True)
class Link:
    """A link; a target :func:`safe_target` refuses is shown as text instead."""

    label: Inline
    target: str


Span = Union[Code, Strong, Link]
#: What a block's text may be: literal text, a span, or a sequence of them.
Inline = Union[str, Span, Sequence["Inline"]]

_MARK = re.compile(r"(`[^`]+`|\*\*.+?\*\*)")


def markup(template: str) -> list[str | Span]:
    """Spans of a program-written string that uses ```code``` and ``**bold**`` (nothing else).

    For sentences the program composes; data interpolated into them is still escaped by the
    renderers (only its segmentation can be disturbed by a stray backtick), so prefer a list
    ``["Run ", Code(run_id), " done"]`` where the data may hold anything.
    """
    out: list[str | Span] = []
    for i, part in enumerate(_MARK.split(template)):
        if not part:
            continue
        if i % 2 == 0:
            out.append(part)
        elif part.startswith("`"):
            out.append(Code(part[1:-1]))
        else:
            out.append(Strong(markup(part[2:-2])))
    return out


def spans(content: Inline) -> list[str | Span]:
    """``content`` flattened into a list of strings and spans."""
    if content is None:
        return []
    if isinstance(content, (str, Code, Strong, Link)):
        return [content]
    out: list[str | Span] = []
    for item in content:
        out += spans(item)
    return out


def plain(content: Inline) -> str:
    """The text of ``content`` without any formatting (alt texts, titles, tests)."""
    out = []
    for s in spans(content):
        if isinstance(s, str):
            out.append(s)
        elif isinstance(s, Code):
            out.append(s.text)
        elif isinstance(s, Strong):
            out.append(plain(s.content))
        else:
            out.append(plain(s.label))
    return "".join(out)


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_WEB = re.compile(r"^https?://[A-Za-z0-9.-]+(?::\d+)?(?:/[^\s]*)?$")


def safe_target(target: str) -> bool:
    """A link target a page may follow: a plain relative path inside the report's folder, or
    an absolute http(s) URL. No leading or trailing whitespace and no control characters
    anywhere (browsers strip them, so " javascript:" or "java\\tscript:" would run), no
    scheme but http(s), no protocol-relative "//host", no way up ("..") or out ("/", "~")."""
    if not isinstance(target, str) or not target or target != target.strip():
        return False
    if any(ord(c) < 0x20 or ord(c) == 0x7F or c in "\\<>\"'`" for c in target):
        return False
    if _SCHEME.match(target):
        return bool(_WEB.match(target))
    return not target.startswith(("/", "~")) and ".." not in target.split("/")


#: C0 controls but tab, newline and carriage return, and DEL: a terminal would act on them.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def replace_controls(text: str) -> str:
    """``text`` with each control character (:data:`_CONTROL`) as U+FFFD, as both renderers
    show it: the value stays visible as having been there, and cannot act on a terminal."""
    return _CONTROL.sub("\ufffd", text)


# ----------------------------------------------------------------------------- blocks


@dataclass
class Heading:
    text: Inline
    level: int = 2

    def __post_init__(self) -> None:
        self.level = min(6, max(1, int(self.level)))


@dataclass
class Paragraph:
    text: Inline


@dataclass
class ListItem:
    """One list entry with an optional nested list under it."""

    text: Inline
    children: list[Inline | ListItem] = field(default_factory=list)


@dataclass
class BulletList:
    items: list[Inline | ListItem]
    ordered: bool = False


Align = Literal["left", "right", "center"]


@dataclass
class Table:
    """A table from a DataFrame, a list of dicts (columns: their keys, first seen first) or
    rows with ``columns``. Cells are inline content; ``None``/NaN show empty, floats with
    four significant digits (format them first for anything else). ``align`` gives each
    column's alignment (a list, or a dict by column name); by default a column whose cells are
    all numbers is right-aligned, the rest left. ``empty`` is said instead of an empty table."""

    data: Any
    empty: Inline = "none"
    align: Sequence[Align] | dict[str, Align] | None = None
    columns: list[str] = field(default_factory=list)
    rows: list[list[Inline]] = field(default_factory=list)
    alignments: list[Align] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        columns, raw = _table_rows(self.data if self.data is not None else self.rows, self.columns)
        self.columns = columns
        self.rows = [[_cell(v) for v in row] for row in raw]
        auto = [_numeric([row[i] for row in raw]) for i in range(len(columns))]
        given = self.align or {}
        if not isinstance(given, dict):
            given = dict(zip(columns, given))
        self.alignments = [given.get(c) or ("right" if num else "left") for c, num in zip(columns, auto)]
        self.data = None  # the normalised rows are what renderers read

    @property
    def is_empty(self) -> bool:
        return not self.rows


@dataclass
class Details:
    """A collapsible part: ``summary`` is always shown, ``blocks`` on demand."""

    summary: Inline
    blocks: list[Block]


@dataclass
class CodeBlock:
    """Verbatim text (a spec, a command to paste, a snippet); ``lang`` names its syntax."""

    text: str
    lang: str = ""


@dataclass
class Figure:
    """A PNG file: linked relative to the report in Markdown, inlined in the HTML page."""

    path: Path
    alt: str
    caption: Inline = ""


@dataclass
class Note:
    """A remark set apart from the text: ``kind`` "note" or "warning"."""

    text: Inline
    kind: Literal["note", "warning"] = "note"


@dataclass
class Finding:
    """A finding with its evidence: ``head`` says what was found, ``evidence`` what it rests on
    (measured values, thresholds), ``actions`` what to do and how to check it."""

    head: Inline
    evidence: list[Inline | ListItem] = field(default_factory=list)
    actions: list[Inline | ListItem] = field(default_factory=list)
    primary: bool = False


Block = Union[Heading, Paragraph, BulletList, Table, Details, CodeBlock, Figure, Note, Finding]


@dataclass
class Document:
    """A whole report: its title (the page's ``<h1>``) and its blocks."""

    title: Inline
    blocks: list[Block] = field(default_factory=list)


def demote(blocks: list[Block], by: int = 1) -> list[Block]:
    """The same blocks with every heading ``by`` levels lower (to nest one report in another)."""
    out: list[Block] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append(Heading(b.text, b.level + by))
        elif isinstance(b, Details):
            out.append(Details(b.summary, demote(b.blocks, by)))
        else:
            out.append(b)
    return out


# ----------------------------------------------------------------------------- table helpers


def _table_rows(data: Any, columns: list[str]) -> tuple[list[str], list[list[Any]]]:
    if hasattr(data, "itertuples") and hasattr(data, "columns"):  # a pandas DataFrame
        return [str(c) for c in data.columns], [list(r) for r in data.itertuples(index=False)]
    rows = list(data)
    if rows and all(isinstance(r, dict) for r in rows):
        cols = list(columns) or list(dict.fromkeys(k for r in rows for k in r))
        return [str(c) for c in cols], [[r.get(c) for c in cols] for r in rows]
    if not columns and rows:
        raise ValueError("Table: rows given as sequences need columns=[...]")
    for r in rows:
        if len(r) != len(columns):
            raise ValueError(f"Table: a row has {len(r)} cell(s) for {len(columns)} column(s)")
    return [str(c) for c in columns], [list(r) for r in rows]


def _missing(v: Any) -> bool:
    if v is None:
        return True
    try:
        return bool(v != v)  # NaN, pandas NA/NaT
    except (TypeError, ValueError):
        return False


def _is_inline(v: Any) -> bool:
    if isinstance(v, (str, Code, Strong, Link)):
        return True
    return isinstance(v, list) and all(_is_inline(x) for x in v)


def _cell(v: Any) -> Inline:
    if _is_inline(v):
        return v
    if _missing(v):
        return ""
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return str(bool(v))
    if isinstance(v, float) or type(v).__name__.startswith("float"):
        f = float(v)
        return "∞" if math.isinf(f) and f > 0 else "-∞" if math.isinf(f) else f"{f:.4g}"
    return str(v)


def _numeric(values: list[Any]) -> bool:
    seen = False
    for v in values:
        if _missing(v):
            continue
        if isinstance(v, bool) or type(v).__name__ == "bool_":
            return False
        if not (isinstance(v, (int, float)) or type(v).__name__.startswith(("int", "float", "uint"))):
            return False
        seen = True
    return seen
