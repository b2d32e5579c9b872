"""The report node's writer: Markdown, a self-contained HTML page and JSON, from the stored results only.

Every figure comes from ``results/*.json`` in the run directory (what observe stored),
never from the model or from memory. For each task only its last attempt is a result;
earlier attempts (retries, GPU fallbacks, noisy timings) appear in the notes.
Timings sit in their own last columns, so two runs of the same plan differ only there.
``report.html`` is the Markdown rendered to HTML (every value escaped: tool output may hold
any text) plus, with two or more compression records, the sweep report's plots inlined as PNG.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from perfscout.graph.rundir import write_json, write_text

PLANNER_LINES = {
    "deterministic": "deterministic planner (embedded, no model)",
    "llm": "LLM plan, validated: the model filled the request's intent, checked against the offline "
           "parser's reading, the codecs, the allowed folders and the tool whitelist",
    "llm-fallback": "LLM plan rejected or unavailable; deterministic planner used instead",
}


def _fmt(v: Any, spec: str = ".4g") -> str:
    if v is None or v == "":
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def final_observations(observations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last attempt of each task, in first-seen task order."""
    last: dict[str, dict[str, Any]] = {}
    for obs in observations:
        last[obs["task_key"]] = obs
    return list(last.values())


def write_report(run_dir: Path, observations: list[dict[str, Any]], state: dict[str, Any]) -> Path:
    plan = state.get("plan") or {}
    planner = plan.get("planner", "deterministic")
    finals = final_observations(observations)
    records = [o["data"]["record"] for o in finals
               if o["kind"] == "result" and isinstance(o.get("data"), dict) and "record" in o["data"]]
    others = [o for o in finals if not (o["kind"] == "result" and isinstance(o.get("data"), dict)
                                        and "record" in o["data"])]
    platform = state.get("platform") or {}
    cpu = (platform.get("cpu") or {}).get("model", "")
    gpus = ", ".join(g.get("name", "") for g in platform.get("gpus") or []) or "none"

    lines = [f"# perfscout report: {md_text(plan.get('goal') or _request_text(state.get('request')))}", ""]
    from perfscout.graph.answer import answer_lines

    lines += ["## Answer", ""] + [md_text(a) for a in answer_lines(state, records, finals)] + [""]
    lines += _understood_lines(state)
    lines += ["## Run", "", f"- Run: `{state.get('run_id', '')}`",
              f"- Planner: **{planner}**: {PLANNER_LINES.get(planner, planner)}",
              f"- Platform: `{platform.get('platform_id', '')}` ({cpu}; GPUs: {gpus})",
              f"- Tool calls: {len(observations)} for {len(finals)} task(s)", ""]
    if state.get("refusal"):
        lines += ["## Refused", "", f"Nothing was run. {md_text(state['refusal'])}.", ""]
    if state.get("plan_error"):
        lines += ["## No plan", "", f"The request could not be planned: {md_text(state['plan_error'])}", ""]
    if plan.get("notes"):
        lines += ["## Planning notes", ""] + [f"- {md_text(_sentence(n))}" for n in plan["notes"]] + [""]
    if plan.get("tasks"):
        lines += ["## Plan", "", "| task | tool | purpose |", "|---|---|---|"]
        lines += [f"| {t['key']} | {t['tool']} | {_cell(t.get('purpose', ''))} |" for t in plan["tasks"]]
        lines.append("")
    if records:
        # a table that fits the page; every column of every record in the collapsible part below
        lines += ["## Compression results", "",
                  "| codec | device | dataset | mode | bound | ratio | PSNR dB | max abs err | bound ok "
                  "| compress MB/s | decompress MB/s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in records:
            lines.append(
                f"| {_cell(r['codec'])} | {r['device']} | {_cell(r['dataset'])} | {r['mode']} | {_fmt(r['bound'])} "
                f"| {_fmt(r['ratio'])} | {_fmt(r['psnr'])} | {_fmt(r['max_abs_err'], '.3g')} "
                f"| {_fmt(r['bound_ok'])} | {_fmt(r['compress_MBps'], '.1f')} | {_fmt(r['decompress_MBps'], '.1f')} |")
        lines += ["", "<!-- details: every column -->",
                  "| task | bitrate | max rel err | status | error |", "|---|---|---|---|---|"]
        lines += [f"| {r['task_key']} | {_fmt(r['bitrate'])} | {_fmt(r.get('max_rel_err'), '.3g')} "
                  f"| {r['status']} | {_cell(r.get('error'))} |" for r in records]
        lines += ["<!-- /details -->", ""]
    plots_at = len(lines)  # the HTML page shows its plots here, right after the results table
    profiles = [o for o in finals if o["tool"] == "profile_command" and isinstance(o.get("data"), dict)]
    if profiles:
        lines += ["## Profiles", ""]
        for o in profiles:
            d = o["data"]
            lines += [f"### {o['task_key']}: `{' '.join(d.get('command', []))}`", "",
                      f"- Profiler: {d.get('tool')} ({d.get('reason', '')})",
                      f"- Program: {d.get('status')} (exit {(d.get('exit') or {}).get('returncode')})",
                      f"- Raw output: `{d.get('run_dir', '')}`"]
            for k in (d.get("digest") or [])[:10]:
                lines.append(f"- kernel {md_text(_kernel_sentence(k))}")
            for f in d.get("findings") or []:
                lines.append(f"- finding `{f['id']}`: {md_text(f.get('title', ''))}")
            if d.get("perf"):
                events = d["perf"].get("events") or {}
                lines.append("- perf stat: " + ", ".join(
                    f"{name}={ev.get('value')}{(' ' + ev['unit']) if ev.get('unit') else ''}"
                    for name, ev in list(events.items())[:12]))
            lines.append("")
        others = [o for o in others if o not in profiles]
    diagnoses = [o for o in finals if o["tool"] == "diagnose_profile" and o["kind"] == "result"
                 and isinstance(o.get("data"), dict)]
    if diagnoses:
        from perfscout.analysis.diagnosis.render import markdown as diagnosis_markdown

        for o in diagnoses:
            # the renderer's headings sit one level below the report's sections
            body = diagnosis_markdown(o["data"]).splitlines()
            lines += ["#" + ln if ln.startswith("#") else ln for ln in body] + [""]
        others = [o for o in others if o not in diagnoses]
    regressions = [o for o in finals if o["tool"] == "compare_runs" and o["kind"] == "result"
                   and isinstance(o.get("data"), dict)]
    if regressions:
        from perfscout.tools.regress import RegressionResult, regression_markdown

        lines += ["## Regression check", ""]
        for o in regressions:
            try:
                lines += regression_markdown(RegressionResult.model_validate(o["data"]), level=3).splitlines()
            except Exception as exc:  # noqa: BLE001 - a section that fails must not cost the report
                lines.append(f"- {o['task_key']}: {md_text(o.get('summary'))} (table not drawn: {type(exc).__name__})")
            lines.append("")
        others = [o for o in others if o not in regressions]
    sweeps = [o for o in finals if o["tool"] == "run_sweep" and o["kind"] == "result"
              and isinstance(o.get("data"), dict)]
    if sweeps:
        lines += ["## Sweeps", ""]
        for o in sweeps:
            lines += sweep_section(o, run_dir)
        others = [o for o in others if o not in sweeps]
    if others:
        lines += ["## Other tool results", ""]
        for o in others:
            detail = o.get("error") or o.get("summary", "")
            label = "refused, not run" if o["kind"] == "refused" else o["kind"]
            lines.append(f"- {o['task_key']} `{o['tool']}` ({label}): {md_text(detail)}")
        lines.append("")
    lines += _use_it_lines(records)
    notes = state.get("notes") or []
    if notes:
        lines += ["## What the agent decided", ""]
        lines += [f"- {n['task_key'] + ': ' if n.get('task_key') else ''}{md_text(_sentence(n['message']))} "
                  f"({n['kind'].replace('_', ' ')})" for n in notes]
        lines.append("")
    lines += ["Every figure above was measured in this run: raw tool replies are in `raw/`, "
              "parsed observations in `results/`, all records in `results.json`.", ""]

    write_json(run_dir / "results.json", {
        "run_id": state.get("run_id", ""), "planner": planner, "plan": plan,
        "records": records, "other": others, "notes": notes,
        "sweeps": [{"task_key": o["task_key"], **{k: v for k, v in o["data"].items() if k != "rows"}}
                   for o in sweeps],
        "plan_error": state.get("plan_error", ""),
    })
    md_path = write_text(run_dir / "report.md", "\n".join(lines))
    write_html(run_dir, lines, records, plots_at)
    return md_path


_MD_SPECIAL = re.compile(r"([\\\[\]<>|])")  # links, HTML and table cells; emphasis is harmless


def md_text(text: Any) -> str:
    """User or tool text made inert in Markdown: no link, no HTML, no emphasis it did not mean."""
    return _MD_SPECIAL.sub(r"\\\1", str(text if text is not None else ""))


def _sentence(text: Any) -> str:
    """A note as a sentence: capital first letter, a full stop at the end."""
    t = " ".join(str(text).split())
    if not t:
        return t
    t = t[0].upper() + t[1:]
    return t if t[-1] in ".!?:)" else t + "."


def _kernel_sentence(k: dict[str, Any]) -> str:
    share = f", {k['share_pct']:.1f} % of the GPU time" if k.get("share_pct") is not None else ""
    mean = f", {k['mean_s'] * 1e6:.1f} µs each" if k.get("mean_s") else ""
    return f"{str(k.get('name', ''))[:80]}: {k.get('launches', 0)} launch(es){mean}{share}"


def _use_it_lines(records: list[dict[str, Any]]) -> list[str]:
    """How to use the best verified setting: numcodecs / Zarr / xarray / HDF5 snippets."""
    if not records:
        return []
    try:
        from perfscout.tools.export import use_it_markdown

        text = use_it_markdown(records)
    except Exception as exc:  # noqa: BLE001 - the snippets must not cost the run its report
        return ["## Use it", "", f"Snippets not written: {md_text(f'{type(exc).__name__}: {exc}')}", ""]
    return text.splitlines() + [""] if text else []


def _understood_lines(state: dict[str, Any]) -> list[str]:
    """What the request was read as, what was asked, and the answers given."""
    intent = state.get("intent")
    if not intent:
        return []
    from perfscout.state.intent import Intent

    out = ["## What was understood", "", f"- Request: {md_text(intent.get('text', ''))}",
           f"- Read as: {md_text(Intent.model_validate(intent).summary())} (filled by the "
           f"{'offline parser' if intent.get('filled_by') == 'parser' else intent.get('filled_by')})"]
    for qa in state.get("answers") or []:
        out.append(f"- Asked: {md_text(qa.get('question'))} Answer: {md_text(qa.get('answer'))}")
    return out + [""]


def _link(path: str, run_dir: Path) -> str:
    """A Markdown link to ``path``, relative to the agent run directory when inside it."""
    p = Path(path)
    try:
        shown = p.resolve().relative_to(run_dir.resolve()).as_posix()
    except ValueError:
        shown = str(p)
    return f"[{p.name}]({shown})"


def sweep_section(obs: dict[str, Any], run_dir: Path) -> list[str]:
    """One sweep: where it is, counts by status, failed tasks, violated bounds, bests."""
    d = obs["data"]
    counts = ", ".join(f"{k}: {v}" for k, v in (d.get("status_counts") or {}).items()) or "none"
    out = [f"### {obs['task_key']}: sweep `{d.get('name', '')}`", "",
           f"- Results: {d.get('tasks', 0)} task(s); by status: {counts}",
           f"- Sweep directory: `{d.get('run_dir', '')}` (store `{Path(d.get('store', '')).name}`, "
           f"run `{d.get('run_id', '')}`)"]
    if d.get("spec"):
        out.append(f"- Spec: `{d['spec']}`")
    if d.get("report_md"):
        out.append(f"- Sweep report: {_link(d['report_md'], run_dir)}, {_link(d['report_html'], run_dir)}")
    else:
        out.append(f"- Sweep report: not written ({d.get('report_error') or 'unknown reason'}); "
                   f"`perfscout report {d.get('run_dir', '')}` writes it from the stored results")
    failures = d.get("failures") or []
    out += ["", f"Failed tasks: {len(failures)}" + (":" if failures else "."), ""]
    if failures:
        out += ["| task | dataset | codec | device | mode | bound | status | error |",
                "|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['task_key']} | {r['dataset']} | {r['codec']} | {r['device']} | {r['mode']} "
                f"| {_fmt(r['bound'])} | {r['status']} | {_cell(r.get('error'))} |" for r in failures]
        out.append("")
    violations = d.get("violations") or []
    out += [f"Bound violated: {len(violations)}" + (":" if violations else "."), ""]
    if violations:
        out += ["| task | dataset | codec | device | mode | bound | max abs err | max rel err | status |",
                "|---|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['task_key']} | {r['dataset']} | {r['codec']} | {r['device']} | {r['mode']} "
                f"| {_fmt(r['bound'])} | {_fmt(r['max_abs_err'])} | {_fmt(r['max_rel_err'])} "
                f"| {r['status']} |" for r in violations]
        out.append("")
    if d.get("best_ratio"):
        out += ["Highest ratio with the bound held (per dataset and codec@device):", "",
                "| dataset | codec@device | mode | bound | ratio | PSNR dB | compress MB/s | task |",
                "|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['dataset']} | {r['series']} | {r['mode']} | {_fmt(r['bound'])} | {_fmt(r['ratio'])} "
                f"| {_fmt(r['psnr'])} | {_fmt(r['compress_MBps'], '.1f')} | {r['task_key']} |"
                for r in d["best_ratio"]]
        out.append("")
    if d.get("fastest"):
        out += [f"Fastest compression with PSNR >= {_fmt(d.get('psnr_min'))} dB and the bound held:", "",
                "| dataset | codec@device | mode | bound | compress MB/s | decompress MB/s | PSNR dB | task |",
                "|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['dataset']} | {r['series']} | {r['mode']} | {_fmt(r['bound'])} "
                f"| {_fmt(r['compress_MBps'], '.1f')} | {_fmt(r['decompress_MBps'], '.1f')} "
                f"| {_fmt(r['psnr'])} | {r['task_key']} |" for r in d["fastest"]]
        out.append("")
    return out


def _cell(text: Any) -> str:
    """Free text made safe for one Markdown table cell (inert: no links, no HTML)."""
    return md_text(" ".join(str(text or "").split())[:300]) or "–"


def json_line(doc: Any) -> str:
    import json

    return json.dumps(doc, default=str)[:300]


def _request_text(request: Any) -> str:
    if isinstance(request, dict):
        return str(request.get("goal") or request.get("intent") or "spec")
    return str(request or "")


# ----------------------------------------------------------------------------- HTML

#: Record columns the sweep report's plots read; coerced to numbers (a column of all-None is object dtype).
_PLOT_NUMBERS = ["bound", "ratio", "bitrate", "psnr", "max_abs_err", "max_rel_err", "compress_MBps",
                 "decompress_MBps"]


def write_html(run_dir: Path, lines: list[str], records: list[dict[str, Any]], plots_at: int) -> Path:
    """``report.html``: the Markdown ``lines`` as HTML, the plots inserted before ``lines[plots_at]``."""
    from perfscout.analysis.report.render import CSS

    title = lines[0].removeprefix("# ") if lines else "perfscout report"
    body = markdown_html(lines[1:plots_at])
    if len(records) >= 2:
        body += plots_html(records, run_dir / "plots")
    body += markdown_html(lines[plots_at:])
    page = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style></head><body>",
            f"<h1>{_inline_html(title)}</h1>", body, "</body></html>"]
    return write_text(run_dir / "report.html", "\n".join(page) + "\n")


def plots_html(records: list[dict[str, Any]], plot_dir: Path) -> str:
    """The sweep report's per-dataset figures, drawn from the stored records and inlined."""
    import pandas as pd

    from perfscout.analysis.report import plots
    from perfscout.analysis.report.render import figure_html

    out = ["<h2>Plots</h2>"]
    df = pd.DataFrame(records)
    for col in _PLOT_NUMBERS:
        df[col] = pd.to_numeric(df[col], errors="coerce") if col in df else float("nan")
    for dataset in sorted(df["dataset"].astype(str).unique()):
        out.append(f"<h3>{html.escape(dataset)}</h3>")
        try:
            figures = plots.dataset_figures(df, dataset, plot_dir)
        except Exception as exc:  # noqa: BLE001 - a plot must not cost the run its report
            out.append(f'<p class="empty">Plots not drawn: {html.escape(f"{type(exc).__name__}: {exc}")}</p>')
            continue
        if not figures:
            out.append('<p class="empty">No measured result to plot for this dataset.</p>')
        out += [figure_html(f.path, f"{dataset}: {f.title}", f.caption) for f in figures]
    return "\n".join(out) + "\n"


_HEADING = re.compile(r"^(#{1,6}) (.*)$")
_BULLET = re.compile(r"^( *)- (.*)$")
_TABLE_RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")
_LINK = re.compile(r"(?<!\\)\[([^\]]*)(?<!\\)\]\(([^)]*)\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_DETAILS = re.compile(r"^<!-- (?:details: (.+)|/details) -->$")
_WEB = re.compile(r"^https?://[A-Za-z0-9.-]+(?::\d+)?(?:/[^\s]*)?$")


def markdown_html(lines: list[str]) -> str:
    """HTML for the Markdown this module emits: headings, nested bullets, pipe tables, fenced
    code, collapsible details (``<!-- details: TITLE -->`` ... ``<!-- /details -->``), paragraphs.

    Not a general Markdown parser (the ``markdown`` package is not a dependency): every other
    line is a paragraph, and every piece of text is escaped before any markup is added.
    """
    out: list[str] = []
    depth: list[int] = []  # indentation of each open <ul>
    table: list[list[str]] = []

    def close_lists(indent: int = -1) -> None:
        while depth and depth[-1] > indent:
            depth.pop()
            out.append("</li></ul>")

    def flush_table() -> None:
        if table:
            head, rows = table[0], table[1:]
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline_html(c)}</th>" for c in head)
                       + "</tr></thead><tbody>")
            out.extend("<tr>" + "".join(f"<td>{_inline_html(c)}</td>" for c in r) + "</tr>" for r in rows)
            out.append("</tbody></table>")
            table.clear()

    fence: list[str] | None = None  # lines of an open ``` block
    for line in lines:
        if line.startswith("```"):
            if fence is None:
                flush_table()
                close_lists()
                fence = []
            else:
                out.append("<pre><code>" + html.escape("\n".join(fence)) + "</code></pre>")
                fence = None
            continue
        if fence is not None:
            fence.append(line)
            continue
        if (marker := _DETAILS.match(line)) is not None:
            flush_table()
            close_lists()
            out.append(f"<details><summary>{html.escape(marker.group(1))}</summary>" if marker.group(1)
                       else "</details>")
            continue
        bullet = _BULLET.match(line)
        if not line.startswith("|"):
            flush_table()
        if not bullet:
            close_lists()
        if not line.strip():
            continue
        if bullet:
            indent, text = len(bullet.group(1)), bullet.group(2)
            close_lists(indent)
            if depth and depth[-1] == indent:
                out.append(f"</li><li>{_inline_html(text)}")
            else:
                depth.append(indent)
                out.append(f"<ul><li>{_inline_html(text)}")
        elif line.startswith("|"):
            if not _TABLE_RULE.match(line):
                table.append(_cells(line))
        elif heading := _HEADING.match(line):
            n = len(heading.group(1))
            out.append(f"<h{n}>{_inline_html(heading.group(2))}</h{n}>")
        else:
            out.append(f"<p>{_inline_html(line)}</p>")
    if fence is not None:  # an unclosed block is still shown as code
        out.append("<pre><code>" + html.escape("\n".join(fence)) + "</code></pre>")
    flush_table()
    close_lists()
    return "\n".join(out) + "\n"


def _cells(row: str) -> list[str]:
    """The cells of one pipe-table row; ``\\|`` is a literal bar inside a cell."""
    cells = re.split(r"(?<!\\)\|", row.strip())
    if cells and cells[0] == "":
        cells = cells[1:]
    if cells and cells[-1] == "":
        cells = cells[:-1]
    return [c.strip().replace("\\|", "|") for c in cells]


def _inline_html(text: str) -> str:
    """Escape ``text``, then add `code` spans, **bold** and [links](relative/path) as HTML."""
    parts = re.split(r"(?<!\\)`", text)
    if len(parts) % 2 == 0:  # an unmatched backtick stays a backtick
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else _prose_html(p) for i, p in enumerate(parts))


def _prose_html(text: str) -> str:
    out, last = [], 0
    for m in _LINK.finditer(text):
        out.append(_bold_html(text[last:m.start()]))
        label, target = m.group(1), m.group(2)
        if safe_target(target):
            out.append(f'<a href="{html.escape(target, quote=True)}" rel="noopener noreferrer">{_bold_html(label)}</a>')
        else:  # shown as the text it is
            out.append(_bold_html(m.group(0)))
        last = m.end()
    out.append(_bold_html(text[last:]))
    return "".join(out)


def safe_target(target: str) -> bool:
    """A link target the page may follow: a plain relative path inside the run, or an absolute
    http(s) URL. No leading or trailing whitespace and no control characters anywhere
    (browsers strip them, so " javascript:" or "java\tscript:" would run), no scheme but
    http(s), no protocol-relative "//host"."""
    if not target or target != target.strip() or any(ord(c) < 0x20 or ord(c) == 0x7F or c in "\\<>\"'`"
                                                     for c in target):
        return False
    if _SCHEME.match(target):
        return bool(_WEB.match(target))
    return not target.startswith(("/", "~")) and ".." not in target.split("/")


def _bold_html(text: str) -> str:
    bold = html.escape(text).split("**")
    if len(bold) % 2 == 0:  # an unmatched ** stays as written
        bold[-2:] = [bold[-2] + "**" + bold[-1]]
    joined = "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(bold))
    return _UNESCAPE.sub(r"\1", joined)  # md_text's backslash escapes, shown as the characters


_UNESCAPE = re.compile(r"\\(&lt;|&gt;|&quot;|&#x27;|[\\\[\]`*_|])")
