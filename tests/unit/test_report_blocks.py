"""The report model's two renderers (perfscout.analysis.report.markdown / .html).

The Markdown is read back with a real CommonMark parser (markdown-it-py, with GFM tables and
strikethrough, raw HTML allowed as GitHub allows it) and the HTML with the standard library's
parser: text must come back as exactly the text given, with no tag, link or emphasis the
program did not write.
"""

from __future__ import annotations

import html as stdhtml
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from perfscout.analysis.report.blocks import (
    BulletList,
    Code,
    CodeBlock,
    Details,
    Document,
    Figure,
    Finding,
    Heading,
    Link,
    ListItem,
    Note,
    Paragraph,
    Strong,
    Table,
    demote,
    markup,
    plain,
    replace_controls,
    safe_target,
)
from perfscout.analysis.report.html import to_html
from perfscout.analysis.report.markdown import clean, render_blocks, to_markdown
from perfscout.analysis.report.output import write

HOSTILE = [
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "[click](javascript:alert(1))",
    "![x](http://evil/x.png)", "<http://evil>", "**bold** and _it_ and ~~gone~~", "`code` and ``two``",
    "# heading", "- item", "1. item", "> quote", "| a | b |", "&lt;script&gt; &#60;b&#62;", "a\\`b\\\\",
    "line\nbreak\r\n# not a heading", "tab\there", "\x1b[31mred\x1b[0m", "[x]: http://evil", "__init__.py",
    "<!-- c -->", "---", "***", "x]](javascript:y)", "<details>", "[a][b]",
]


def md_parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def inline_tokens(md: str) -> list:
    """Every inline child token of the parsed Markdown."""
    out = []
    for tok in md_parser().parse(md):
        if tok.type == "inline":
            out += tok.children or []
    return out


def md_text_of(md: str) -> str:
    """The text a Markdown viewer shows for ``md``'s inline content (text and code spans)."""
    return "".join(t.content for t in inline_tokens(md) if t.type in ("text", "code_inline"))


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):  # noqa: ANN001
        self.text.append(data)


def parse_html(page: str) -> Tags:
    p = Tags()
    p.feed(page)
    return p


# ----------------------------------------------------------------------------- escaping


@pytest.mark.parametrize("text", HOSTILE)
def test_text_renders_as_written_in_markdown(text):
    md = render_blocks([Paragraph(text)])
    kinds = {t.type for t in inline_tokens(md)}
    assert kinds <= {"text"}, (text, md, kinds)  # no html_inline, link, image, em, code, s
    assert md_text_of(md) == clean(text).strip()
    blocks = [t.type for t in md_parser().parse(md)]
    assert blocks == ["paragraph_open", "inline", "paragraph_close"], (text, md, blocks)


@pytest.mark.parametrize("text", HOSTILE)
def test_text_renders_as_written_in_html(text):
    page = to_html(Document(text, [Heading(text), Paragraph(text), BulletList([text]), Note(text)]))
    parsed = parse_html(page)
    assert {t for t, _ in parsed.tags} <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "p",
                                          "ul", "li", "aside", "strong"}
    assert all(not a.get("href") and not a.get("src") and not a.get("onerror") for _, a in parsed.tags)
    shown = "".join(parsed.text)
    assert stdhtml.unescape(stdhtml.escape(text.replace("\x1b", "\ufffd"))) in shown or clean(text) in shown


#: Characters that mean something in Markdown or HTML, and a few letters to separate them.
SPECIAL = st.lists(st.sampled_from(list("`*_~[]()<>!#&;|\\-+=.:/ \n\tab1") + ["javascript:", "http://x", "&amp;",
                                                                            "<b>", "```", "1."]),
                   max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(SPECIAL)
def test_any_text_round_trips_through_a_commonmark_parser(text):
    for block, ctx in ((Paragraph(text), "p"), (BulletList([text]), "li"), (Heading(text, 3), "h3")):
        md = render_blocks([block])
        toks = inline_tokens(md)
        assert {t.type for t in toks} <= {"text"}, (text, md, [t.type for t in toks])
        assert md_text_of(md) == clean(text).strip(), (ctx, text, md)


@settings(max_examples=200, deadline=None)
@given(SPECIAL, SPECIAL)
def test_any_text_round_trips_through_table_cells_and_link_labels(a, b):
    header, rows, _ = md_table_cells(render_blocks([Table([[a, Code(b) if clean(b).strip() else b]],
                                                          columns=["h" + a, "c"])]))
    assert header[0] == clean("h" + a).strip() and rows[0][0] == clean(a).strip()
    head, body = html_table_cells(to_html(Document("t", [Table([[a, b]], columns=["x", "y"])])))
    assert body == [[a, b]]  # HTML keeps the text as given (newlines and all), escaped
    md = render_blocks([Paragraph(["see ", Link("x" + a, "r.md")])])
    links = [t for t in inline_tokens(md) if t.type == "link_open"]
    assert len(links) == 1 and md_text_of(md).rstrip() == "see " + clean("x" + a).rstrip()


@settings(max_examples=200, deadline=None)
@given(SPECIAL, SPECIAL)
def test_code_spans_and_strong_hold_any_content(a, b):
    md = render_blocks([Paragraph([a, Code(b), Strong(a)])])
    toks = inline_tokens(md)
    assert {t.type for t in toks} <= {"text", "code_inline", "strong_open", "strong_close"}
    codes = [t.content for t in toks if t.type == "code_inline"]
    if clean(b).strip():
        # CommonMark strips one space from each side of a span that has both
        assert codes and codes[0] in (clean(b), clean(b)[1:-1])


def test_fenced_code_survives_backticks_in_its_content():
    content = "a\n```\nb\n````\n~~~\n<script>x</script>\n"
    md = render_blocks([CodeBlock(content, "yaml; rm -rf"), Paragraph("after")])
    fences = [t for t in md_parser().parse(md) if t.type == "fence"]
    assert len(fences) == 1 and fences[0].content == content and fences[0].info == "yamlrm-rf"
    assert md_text_of(md) == "after"  # the paragraph after it is outside the block
    page = to_html(Document("t", [CodeBlock(content)]))
    assert "<pre><code>a\n```\nb\n````\n~~~\n&lt;script&gt;x&lt;/script&gt;</code></pre>" in page


# ----------------------------------------------------------------------------- links


@pytest.mark.parametrize("target", ["javascript:alert(1)", " javascript:alert(1)", "java\tscript:alert(1)",
                                    "JAVASCRIPT:alert(1)", "data:text/html,<b>", "//evil.example/x",
                                    "/etc/passwd", "../outside.md", "~/x", "vbscript:x", "https://a b",
                                    "http://x\x00y", "file:///etc/passwd", "", "a\"onmouseover=\"x"])
def test_unsafe_link_targets_stay_text(target):
    assert not safe_target(target)
    doc = Document("t", [Paragraph(["see ", Link("here", target)])])
    assert not [t for t in inline_tokens(to_markdown(doc)) if t.type == "link_open"]
    assert not [a for tag, a in parse_html(to_html(doc)).tags if tag == "a"]


@pytest.mark.parametrize("target", ["https://example.org/a?b=1#c", "http://localhost:8123/x",
                                    "sweeps/a b/report.md", "plots/x (1).png", "a|b/c.md"])
def test_safe_link_targets_become_links_in_both_formats(target):
    assert safe_target(target)
    doc = Document("t", [Paragraph(["see ", Link(["the ", Code("[report]")], target)])])
    links = [t for t in inline_tokens(to_markdown(doc)) if t.type == "link_open"]
    assert len(links) == 1 and unquote(links[0].attrs["href"]) == target
    (a,) = [a for tag, a in parse_html(to_html(doc)).tags if tag == "a"]
    assert unquote(a["href"]) == target and a["rel"] == "noopener noreferrer"


# ----------------------------------------------------------------------------- tables


def md_table_cells(md: str) -> tuple[list[str], list[list[str]], list[str]]:
    """Header cells, body rows and the header alignments of the one table in ``md``."""
    toks = md_parser().parse(md)
    header, rows, align, row, in_head = [], [], [], None, False
    for t in toks:
        if t.type == "thead_open":
            in_head = True
        elif t.type == "thead_close":
            in_head = False
        elif t.type == "th_open":
            style = t.attrs.get("style", "")
            align.append(style.removeprefix("text-align:") or "left")
        elif t.type == "tr_open":
            row = []
        elif t.type == "tr_close":
            (header if in_head else rows).append(row)
        elif t.type == "inline" and row is not None:
            row.append("".join(c.content for c in t.children if c.type in ("text", "code_inline")))
    return header[0], rows, align


def test_table_round_trips_through_both_formats():
    df = pd.DataFrame({"codec": ["sz3", "a|b", "<i>x</i>"], "ratio": [12.3456, float("nan"), 1e9],
                       "note": ["multi\nline", "`tick`", "**no**"]})
    t = Table(df)
    md = render_blocks([t])
    header, rows, align = md_table_cells(md)
    expected = [["sz3", "12.35", "multi line"], ["a|b", "", "`tick`"], ["<i>x</i>", "1e+09", "**no**"]]
    assert header == ["codec", "ratio", "note"] and rows == expected
    assert align == ["left", "right", "left"]  # a column of numbers is right-aligned
    head, body = html_table_cells(to_html(Document("t", [t])))
    assert head == ["codec", "ratio", "note"]
    assert body == [["sz3", "12.35", "multi\nline"], ["a|b", "", "`tick`"], ["<i>x</i>", "1e+09", "**no**"]]


class Cells(HTMLParser):
    """The text of every th/td of a page, by row."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        if tag == "tr":
            self.rows.append([])
        elif tag in ("th", "td"):
            self.cell = []

    def handle_endtag(self, tag):  # noqa: ANN001
        if tag in ("th", "td") and self.cell is not None:
            self.rows[-1].append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):  # noqa: ANN001
        if self.cell is not None:
            self.cell.append(data)


def html_table_cells(page: str) -> tuple[list[str], list[list[str]]]:
    p = Cells()
    p.feed(page)
    return p.rows[0], p.rows[1:]


def test_table_inputs_alignment_and_empty():
    rows = Table([{"a": 1, "b": "x"}, {"b": "y", "c": Code("z|w")}], align={"b": "center"})
    assert rows.columns == ["a", "b", "c"] and rows.alignments == ["right", "center", "left"]
    header, body, align = md_table_cells(render_blocks([rows]))
    assert body == [["1", "x", ""], ["", "y", "z|w"]] and align == ["right", "center", "left"]
    linked = Table([[Link("x|y", "a|b (1).md"), Code("p|q"), "r"]], columns=["l", "c", "t"])
    header, body, _ = md_table_cells(render_blocks([linked]))
    assert body == [["x|y", "p|q", "r"]]  # bars inside a link or a code span stay in their cell
    seq = Table([[1, "a"]], columns=["n", "s"], align=["left", "right"])
    assert seq.alignments == ["left", "right"]
    with pytest.raises(ValueError, match="columns"):
        Table([[1, 2]])
    empty = Table(pd.DataFrame(columns=["a"]), "nothing <here>")
    assert render_blocks([empty]).strip() == "_nothing \\<here>_"
    assert '<p class="empty">nothing &lt;here&gt;</p>' in to_html(Document("t", [empty]))


# ----------------------------------------------------------------------------- details, lists, findings


def test_details_is_collapsible_in_both_formats():
    doc = Document("t", [Details("every <column>\n\n</summary>", [Paragraph("inside"), Table([{"k": "v"}])]),
                         Paragraph("outside")])
    md = to_markdown(doc)
    rendered = md_parser().render(md)
    assert "<details><summary>every &lt;column&gt; &lt;/summary&gt;</summary>" in rendered
    assert "<p>inside</p>" in rendered and "<td>v</td>" in rendered and "</details>" in rendered
    assert rendered.index("</details>") < rendered.index("<p>outside</p>")
    page = to_html(doc)
    assert re.search(r"<details><summary>every &lt;column&gt;\s+&lt;/summary&gt;</summary>\s*<p>inside</p>.*<td>v</td>"
                     r".*</details>",
                     page, re.S)


def test_nested_lists_findings_and_consecutive_lists_stay_apart():
    blocks = [BulletList(["a", ListItem("b", ["b1", ListItem("b2", ["b2i"])])]), BulletList(["c"]),
              Finding(markup("**Primary:** `dram_bound` — x"), [[Code("m"), " = 3 [>= 30%]"]], ["Do: y"])]
    md = render_blocks(blocks)
    html_md = md_parser().render(md)
    assert html_md.count("<ul>") == 5  # a, its two nested levels, c, the finding's list
    assert "<strong>Primary:</strong> <code>dram_bound</code> — x" in html_md
    assert "<code>m</code> = 3 [&gt;= 30%]" in html_md
    page = to_html(Document("t", blocks))
    assert page.count("<ul>") == 5 and '<div class="finding">' in page


def test_markup_knows_only_code_and_bold():
    spans = markup("run `a*b` **now** [x](y) <b>")
    assert spans == ["run ", Code("a*b"), " ", Strong(["now"]), " [x](y) <b>"]
    assert plain(spans) == "run a*b now [x](y) <b>"


def test_demote_shifts_headings_inside_details_too():
    out = demote([Heading("a", 1), Details("s", [Heading("b", 5)]), Paragraph("p")], 2)
    assert out[0] == Heading("a", 3) and out[1].blocks[0] == Heading("b", 6)


def test_figure_is_linked_in_markdown_and_inlined_in_html(tmp_path: Path):
    png = tmp_path / "plots" / "a b.png"
    png.parent.mkdir()
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 64)
    doc = Document("t", [Figure(png, 'alt "q" [x]', "caption <i>")])
    md = to_markdown(doc, tmp_path)
    (img,) = [t for t in inline_tokens(md) if t.type == "image"]
    assert img.attrs["src"] == "plots/a%20b.png" and "".join(c.content for c in img.children) == 'alt "q" [x]'
    page = to_html(doc)
    assert re.search(r'<img alt="alt &#34;q&#34; \[x\]" src="data:image/png;base64,[A-Za-z0-9+/=]+">', page)
    assert "<figcaption>caption &lt;i&gt;</figcaption>" in page


def test_write_is_atomic_and_deterministic(tmp_path: Path):
    doc = Document("t", [Paragraph("x")])
    first = write(doc, md=tmp_path / "r.md", html=tmp_path / "r.html")
    assert first == [tmp_path / "r.md", tmp_path / "r.html"]
    before = [p.read_bytes() for p in first]
    write(doc, md=tmp_path / "r.md", html=tmp_path / "r.html")
    assert [p.read_bytes() for p in first] == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html", "r.md"]  # no temporary left


def test_a_non_block_is_refused_by_both_renderers():
    with pytest.raises(TypeError, match="not a report block"):
        render_blocks(["just a string"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not a report block"):
        to_html(Document("t", ["just a string"]))  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not a report block"):
        to_html(Document("t", [Details("s", [42])]))  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not a report block"):
        render_blocks([Details("s", [42])])  # type: ignore[list-item]


def test_both_renderers_replace_the_same_control_characters() -> None:
    controls = "".join(map(chr, [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F]))
    assert replace_controls(controls + "\t\n\r a") == "\ufffd" * len(controls) + "\t\n\r a"
    doc = Document(title="t\x1bx", blocks=[Paragraph("p\x07q"), CodeBlock("c\x00d")])
    assert "\x1b" not in to_html(doc) and "\x07" not in to_html(doc) and "\x00" not in to_html(doc)
    md = to_markdown(doc)
    assert "\x1b" not in md and "p\ufffdq" in md and "c\ufffdd" in md
