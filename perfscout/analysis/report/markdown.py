"""The Markdown renderer of the report model (:mod:`.blocks`): CommonMark plus GFM tables.

Text is escaped so that it reads as written and can never become markup: no HTML (a ``<``
that could open a tag, comment or autolink is escaped), no link or image (a ``]`` that could
close one is escaped, and so is a ``[`` that starts a line, where a link definition would
begin, so no reference can resolve), no code span or emphasis it did not mean (backticks,
``*``, underscores at a word's edge, a tilde that could close strikethrough),
no block it did not mean (a line start that would open a heading, quote or list). Newlines
inside text become spaces and control characters are replaced, so one value stays on one
line. Escaping is minimal on purpose: a kernel name or a threshold such as ``[>= 30%]``
stays readable in a terminal, which is where ``perfscout diagnose`` prints this Markdown.

Code spans and fenced blocks take a fence longer than any run of backticks in their content,
so no content can close them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote

from perfscout.analysis.report.blocks import (
    Block,
    BulletList,
    Code,
    CodeBlock,
    Details,
    Document,
    Figure,
    Finding,
    Heading,
    Inline,
    Link,
    ListItem,
    Note,
    Paragraph,
    Strong,
    Table,
    plain,
    replace_controls,
    safe_target,
    spans,
)

_SPACE = re.compile(r"[ \t\r\n]+")
_ALWAYS = re.compile(r"([\\`*|])")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
_CLOSE_BRACKET = re.compile(r"\](?=\(|$)")
#: A run of underscores inside a word (``derived__memory``) can neither open nor close
#: emphasis in CommonMark; one at a word's edge (``__init__``) can.
_UNDERSCORES = re.compile(r"_+")
#: A tilde after a non-space character could close GFM strikethrough; "~78%" cannot.
_TILDE = re.compile(r"(?<=\S)~")
_BLOCK_START = re.compile(r"^(?:[#>+=\-\[]|\d{1,9}(?=[.)]))")


def clean(text: str) -> str:
    """One line of text: controls replaced (U+FFFD), whitespace runs as one space."""
    return _SPACE.sub(" ", replace_controls(str(text)))


def escape(text: str, *, line_start: bool = False, in_label: bool = False) -> str:
    """``text`` as Markdown that renders as exactly that text (see the module docstring);
    ``in_label``: inside a link's or image's brackets, where every bracket is escaped."""
    s = _ALWAYS.sub(r"\\\1", clean(text))
    s = _TAG_START.sub(r"\\<", s)
    s = _ENTITY.sub(r"\\&", s)
    s = re.sub(r"([\[\]])", r"\\\1", s) if in_label else _CLOSE_BRACKET.sub(r"\\]", s)
    s = _UNDERSCORES.sub(lambda m: m.group(0) if _inside_word(m) else "\\_" * len(m.group(0)), s)
    s = _TILDE.sub(r"\\~", s)
    if line_start:
        s = s.lstrip(" ")
        m = _BLOCK_START.match(s)
        if m:
            at = m.end() if m.group(0)[0].isdigit() else 0
            s = s[:at] + "\\" + s[at:]
    return s


def _inside_word(m: re.Match[str]) -> bool:
    s, a, b = m.string, m.start(), m.end()
    return 0 < a and b < len(s) and s[a - 1].isalnum() and s[b].isalnum()


def code_span(text: str, *, in_table: bool = False) -> str:
    body = clean(text)
    if not body:
        return ""
    if in_table:
        body = body.replace("|", "\\|")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or (body[0] == body[-1] == " ") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def inline(content: Inline, *, line_start: bool = False, in_table: bool = False, in_label: bool = False) -> str:
    out: list[str] = []
    for i, s in enumerate(spans(content)):
        first = line_start and i == 0
        if isinstance(s, str):
            out.append(escape(s, line_start=first, in_label=in_label))
        elif isinstance(s, Code):
            out.append(code_span(s.text, in_table=in_table))
        elif isinstance(s, Strong):
            body = inline(s.content, in_table=in_table, in_label=in_label).strip()
            out.append(f"**{body}**" if body else "")
        elif isinstance(s, Link):
            out.append(_link(s, in_table=in_table))
    return "".join(out)


def _destination(target: str) -> str:
    """A link/image destination with nothing that could end it early (space, parentheses,
    angle brackets, quotes, a table's bar, controls) percent-encoded."""
    return quote(target, safe="/:?#[]@!$&*+,;=%~-._")


def _link(link: Link, *, in_table: bool) -> str:
    label = inline(link.label, in_table=in_table, in_label=True) or escape(link.target)
    if not safe_target(link.target):  # shown as what it is, never followed
        return f"{label} ({code_span(link.target, in_table=in_table) or 'empty link'})"
    return f"[{label}]({_destination(link.target)})"


# ----------------------------------------------------------------------------- blocks


def _list_lines(items: list, ordered: bool, indent: str = "") -> list[str]:
    out = []
    for n, item in enumerate(items, 1):
        marker = f"{n}. " if ordered else "- "
        text, children = (item.text, item.children) if isinstance(item, ListItem) else (item, [])
        out.append(indent + marker + inline(text, line_start=True))
        if children:
            out += _list_lines(children, False, indent + " " * len(marker))
    return out


def _table_lines(t: Table) -> list[str]:
    if t.is_empty or not t.columns:
        return [f"_{inline(t.empty).strip()}_"]
    rule = {"left": "---", "right": "---:", "center": ":---:"}

    def row(cells: list) -> str:
        return "| " + " | ".join(inline(c, in_table=True) for c in cells) + " |"

    out = [row(list(t.columns)), "|" + "|".join(rule[a] for a in t.alignments) + "|"]
    return out + [row(r) for r in t.rows]


def _figure_lines(f: Figure, base: Path | None) -> list[str]:
    path = Path(f.path)
    try:
        shown = path.resolve().relative_to(Path(base).resolve()).as_posix() if base is not None else path.as_posix()
    except ValueError:
        shown = Path(os.path.relpath(path.resolve(), Path(base).resolve())).as_posix()
    alt = inline(f.alt, in_label=True)
    out = [f"![{alt}]({_destination(shown)})"]
    caption = inline(f.caption).strip()
    return out + (["", f"_{caption}_"] if caption else [])


def block_lines(b: Block, base: Path | None = None) -> list[str]:
    """The Markdown lines of one block (no trailing blank line)."""
    if isinstance(b, Heading):
        text = inline(b.text).strip()
        if text.endswith("#"):  # a closing sequence would be dropped
            text = text[:-1] + "\\#"
        return ["#" * b.level + " " + text] if text else []
    if isinstance(b, Paragraph):
        text = inline(b.text, line_start=True)
        return [text] if text else []
    if isinstance(b, BulletList):
        return _list_lines(b.items, b.ordered)
    if isinstance(b, Table):
        return _table_lines(b)
    if isinstance(b, CodeBlock):
        body = replace_controls(b.text.rstrip("\n"))
        fence = "`" * max(3, max((len(r) for r in re.findall(r"`+", body)), default=0) + 1)
        lang = re.sub(r"[^A-Za-z0-9_+.-]", "", b.lang)
        return [fence + lang, *body.split("\n"), fence]
    if isinstance(b, Figure):
        return _figure_lines(b, base)
    if isinstance(b, Note):
        label = "Warning" if b.kind == "warning" else "Note"
        return [f"> **{label}:** {inline(b.text)}"]
    if isinstance(b, Finding):
        head = inline(b.head, line_start=True)
        items = _list_lines(list(b.evidence) + list(b.actions), False)
        return [head] + ([""] + items if items else [])
    if isinstance(b, Details):
        # GitHub and most viewers render <details> as a collapsible part; the summary is HTML
        # (Markdown is not read inside an HTML block), escaped by the HTML renderer.
        from perfscout.analysis.report.html import inline as html_inline

        inner = blocks_lines(b.blocks, base)
        summary = re.sub(r"[\r\n]+", " ", html_inline(b.summary))  # a blank line would end the HTML block
        return [f"<details><summary>{summary}</summary>", "", *inner, "", "</details>"]
    raise TypeError(f"not a report block: {type(b).__name__}")


def blocks_lines(blocks: list[Block], base: Path | None = None) -> list[str]:
    out: list[str] = []
    previous: Block | None = None
    for b in blocks:
        lines = block_lines(b, base)
        if not lines:
            continue
        if isinstance(previous, (BulletList, Finding)) and isinstance(b, BulletList):
            out += ["<!-- -->", ""]  # two lists in a row would merge into one
        out += lines + [""]
        previous = b
    while out and out[-1] == "":
        out.pop()
    return out


def to_markdown(doc: Document, base: Path | None = None) -> str:
    """``doc`` as Markdown; figures are linked relative to ``base`` (the report's folder)."""
    title = inline(doc.title).strip()
    lines = ([f"# {title}", ""] if title else []) + blocks_lines(doc.blocks, base)
    return "\n".join(lines) + "\n"


def render_blocks(blocks: list[Block], base: Path | None = None) -> str:
    """Blocks as a Markdown section without a page title (to paste into another report)."""
    return "\n".join(blocks_lines(blocks, base)) + "\n"


__all__ = ["clean", "code_span", "escape", "inline", "plain", "render_blocks", "to_markdown"]
