"""The HTML renderer of the report model (:mod:`.blocks`): one self-contained page.

The page and each block type are Jinja2 templates in ``templates/`` (package data, found
through the installed package by :class:`jinja2.PackageLoader`) with autoescaping on; the
style sheet is inlined and every figure is a base64 ``data:`` URI, so the file can be mailed
or archived alone. Inline content is turned into HTML here, escaping every piece of text;
the only tags that can appear are the ones this renderer writes, and the only ``href`` is a
target :func:`.blocks.safe_target` accepted.
"""

from __future__ import annotations

import base64
import functools
from pathlib import Path
from urllib.parse import quote

import jinja2
from markupsafe import Markup, escape

from perfscout.analysis.report.blocks import (
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

#: Characters a URL keeps as they are; anything else (a space, say) is percent-encoded.
_URL_SAFE = "/:?#[]@!$&'()*+,;=%~-._"


def _text(s: str) -> Markup:
    return escape(replace_controls(s))


def inline(content: Inline) -> Markup:
    """Inline content as HTML: text escaped, code/strong/links as tags."""
    out: list[str] = []
    for s in spans(content):
        if isinstance(s, str):
            out.append(_text(s))
        elif isinstance(s, Code):
            out.append(Markup("<code>%s</code>") % _text(s.text))
        elif isinstance(s, Strong):
            out.append(Markup("<strong>%s</strong>") % inline(s.content))
        elif isinstance(s, Link):
            label = inline(s.label) or _text(s.target)
            if safe_target(s.target):
                out.append(Markup('<a href="%s" rel="noopener noreferrer">%s</a>')
                           % (quote(s.target, safe=_URL_SAFE), label))
            else:  # shown as what it is, never followed
                out.append(Markup("%s (<code>%s</code>)") % (label, _text(s.target)))
    return Markup("").join(out)


def data_uri(path: Path) -> str:
    """A PNG file as a ``data:`` URI: the page needs no file beside it."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def _align(alignment: str) -> Markup:
    return Markup("") if alignment == "left" else Markup(' class="%s"') % alignment


@functools.cache
def environment() -> jinja2.Environment:
    """The template environment (templates from the installed package, autoescape on)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("perfscout.analysis.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters.update(inline=inline, data_uri=data_uri, align=_align,
                       clean_code=lambda text: _text(text.rstrip("\n")))
    kinds = {"heading": Heading, "paragraph": Paragraph, "bullet_list": BulletList, "list_item": ListItem,
             "table": Table, "code_block": CodeBlock, "figure": Figure, "note": Note, "finding": Finding,
             "details": Details}
    for name, cls in kinds.items():
        env.tests[name] = lambda value, cls=cls: isinstance(value, cls)
    return env


_KNOWN = (Heading, Paragraph, BulletList, Table, CodeBlock, Figure, Note, Finding, Details)


def _check(blocks: list) -> None:
    for b in blocks:
        if not isinstance(b, _KNOWN):
            raise TypeError(f"not a report block: {type(b).__name__}")
        if isinstance(b, Details):
            _check(b.blocks)


def render_blocks(blocks: list) -> Markup:
    """Blocks as an HTML fragment (no page around them)."""
    _check(blocks)
    return Markup(environment().get_template("blocks.html.j2").render(blocks=blocks))


def to_html(doc: Document) -> str:
    """``doc`` as one self-contained HTML page."""
    return environment().get_template("page.html.j2").render(
        title=replace_controls(plain(doc.title)) or "perfscout report", title_html=inline(doc.title), body=render_blocks(doc.blocks))
