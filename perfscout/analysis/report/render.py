"""Render a sweep's report as ``report.md`` and a self-contained ``report.html``.

Both come from one list of blocks built from the run directory only (store, spec,
platform snapshot), so they say the same thing. The HTML inlines its images as base64
``data:`` URIs and its style sheet, so the file can be mailed or archived alone.

The store's contents come in as a :class:`SweepData` (read by
``perfscout.sweep.api``): analysis sits below tools and does not open the
sweep's SQLite store itself.
"""

from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from perfscout.analysis.report import gpu, plots, summary


@dataclass
class SweepData:
    """What a sweep's results store holds that the report reads."""

    results: pd.DataFrame  # one row per stored task, the DESIGN.md columns
    n_tasks: int  # tasks in the spec's grid (a row may still be missing: incomplete run)
    run_id: str = ""
    name: str = "sweep"
    sessions: list[dict[str, Any]] = field(default_factory=list)  # one entry per run session
    skipped: list[dict[str, Any]] = field(default_factory=list)  # grid points not run, with why
    report_options: dict[str, Any] = field(default_factory=dict)  # e.g. psnr_min
    experiments: dict[str, list[str]] = field(default_factory=dict)  # task_key -> experiment names


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Code:
    text: str
    lang: str = ""


@dataclass
class Table:
    df: pd.DataFrame
    empty: str = "none"


@dataclass
class Image:
    path: Path
    alt: str
    caption: str


Block = Heading | Para | Bullets | Code | Table | Image


# ----------------------------------------------------------------------------- content


def _platform_rows(doc: dict) -> list[str]:
    cpu = doc.get("cpu") or {}
    gpus = doc.get("gpus") or []
    mem = doc.get("memory_total_bytes")
    items = [
        f"platform_id: `{doc.get('platform_id') or 'unknown'}` (source: {doc.get('source', 'perfscout.tools.snapshot')})",
        f"host: {doc.get('hostname', '')}; OS: {doc.get('os', '')} {doc.get('kernel', '')}".strip(),
        f"CPU: {cpu.get('model', '') or 'unknown'}; logical CPUs: {cpu.get('logical_cpus', 'unknown')}"
        + (f"; SIMD: {', '.join(cpu.get('simd') or [])}" if cpu.get("simd") else ""),
        f"memory: {mem / 2**30:.1f} GiB" if mem else "memory: unknown",
        "GPUs: " + ("; ".join(f"{g.get('name')} (cc {g.get('compute_capability', '?')})" for g in gpus) or "none found"),
        f"Python: {doc.get('python', '')}",
    ]
    pkgs = doc.get("packages") or {}
    if pkgs:
        items.append("packages: " + ", ".join(f"{k} {v}" for k, v in sorted(pkgs.items()) if v))
    return items


def _table(df: pd.DataFrame) -> pd.DataFrame:
    """Round floats to 4 significant digits for display (stored rows keep full precision)."""
    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].map(lambda v: "" if pd.isna(v) else f"{v:.4g}")
    return out


def _cited(st: summary.Statement) -> str:
    """A summary sentence followed by the task keys of the rows it quotes."""
    return st.text + (f" (tasks {', '.join(f'`{k}`' for k in st.task_keys)})" if st.task_keys else "")


def build_blocks(run_dir: Path, data: SweepData) -> tuple[str, list[Block]]:
    df, run_id, name, n_tasks = data.results, data.run_id, data.name, data.n_tasks
    session_info, sessions = data.sessions, len(data.sessions)
    skipped, opts, experiments = data.skipped, data.report_options, data.experiments
    psnr_min = float(opts.get("psnr_min", 60.0))
    title = f"Sweep report: {name}"
    blocks: list[Block] = [
        Para(f"Run `{run_id}` in `{run_dir}`: {len(df)} of {n_tasks} task(s) stored, "
             f"{sessions} session(s) (jobs per session: {', '.join(str(s.get('jobs')) for s in session_info)}). "
             "Every number below is read from the run's results store; summary sentences cite the task keys "
             "of the rows they quote."),
    ]
    if len(df) < n_tasks:
        blocks.append(Para(f"**Incomplete run**: {n_tasks - len(df)} task(s) have no result yet "
                           "(resume with `perfscout sweep SPEC --out DIR --resume`)."))

    blocks.append(Heading("Summary"))
    statements = summary.summarize(df, psnr_min)
    blocks.append(Bullets([_cited(st) for st in statements if not st.dataset]))
    for dataset in sorted(df["dataset"].unique()) if not df.empty else []:
        items = [_cited(st) for st in statements if st.dataset == dataset]
        if items:
            blocks += [Heading(f"{dataset}", 3), Bullets(items)]

    blocks.append(Heading("Best settings per goal"))
    blocks.append(Heading("Highest compression ratio with the bound held", 3))
    blocks.append(Table(_table(summary.best_cr_table(df)), "no measured result held its bound"))
    blocks.append(Heading(f"Fastest compression with PSNR ≥ {psnr_min:g} dB (bound held)", 3))
    blocks.append(Table(_table(summary.fastest_table(df, psnr_min)), f"no result reached PSNR ≥ {psnr_min:g} dB"))

    blocks.append(Heading("Violated bounds"))
    blocks.append(Table(_table(summary.violations_table(df)), "none: every measured bound held"))
    blocks.append(Heading("Failed tasks"))
    blocks.append(Table(_table(summary.failures_table(df)), "none"))
    if skipped:
        blocks.append(Heading("Grid points not run", 3))
        blocks.append(Table(pd.DataFrame(skipped)))

    section = gpu.gpu_section(df)  # GPU rows: copy roof, × copy, bound verdicts (analysis/report/gpu.py)
    if not section.empty:
        blocks += [Heading("GPU"), Bullets(section.intro), Heading("Throughput against the copy roof", 3),
                   Table(_table(section.throughput)), Heading("Bound verdicts", 3), Table(_table(section.verdicts)),
                   Bullets(section.findings or ["none: every GPU result held its bound"])]

    blocks.append(Heading("Plots per dataset"))
    plot_dir = run_dir / "plots"
    for dataset in sorted(df["dataset"].unique()) if not df.empty else []:
        blocks.append(Heading(dataset, 3))
        figures = plots.dataset_figures(df, dataset, plot_dir)
        if not figures:
            blocks.append(Para("No measured result to plot for this dataset (see failed tasks)."))
        for fig in figures:
            blocks.append(Image(fig.path, f"{dataset}: {fig.title}", fig.caption))

    blocks.append(Heading("All results"))
    cols = ["task_key", "dataset", "codec", "device", "mode", "bound", "ratio", "bitrate", "psnr", "max_abs_err",
            "compress_MBps", "decompress_MBps", "bound_ok", "status"]
    table = df[cols].copy() if not df.empty else pd.DataFrame(columns=cols)
    table.insert(1, "experiments", table["task_key"].map(lambda k: ", ".join(experiments.get(k, []))))
    blocks.append(Table(_table(table)))
    blocks.append(Para("Full records (every DESIGN.md column): `results.parquet`, `results.csv`, `results.sqlite`; "
                       "each task's raw output: `raw/<task_key>/`."))

    blocks.append(Heading("Environment"))
    platform_file = run_dir / "platform.json"
    if platform_file.is_file():
        blocks.append(Bullets(_platform_rows(json.loads(platform_file.read_text()))))
    else:
        blocks.append(Para("No platform snapshot in this run directory."))
    blocks.append(Heading("Spec"))
    spec_file = run_dir / "spec.yaml"
    blocks.append(Code(spec_file.read_text() if spec_file.is_file() else "(spec.yaml missing)", "yaml"))
    for extra in sorted(run_dir.glob("spec.session-*.yaml")):
        blocks.append(Para(f"A resume used a different spec, kept as `{extra.name}`:"))
        blocks.append(Code(extra.read_text(), "yaml"))
    return title, blocks


# ----------------------------------------------------------------------------- Markdown


def _md_cell(v: object) -> str:
    return str(v).replace("|", "\\|").replace("\n", " ") if not (isinstance(v, float) and pd.isna(v)) else ""


def to_markdown(title: str, blocks: list[Block], run_dir: Path) -> str:
    out = [f"# {title}", ""]
    for b in blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + b.text, ""]
        elif isinstance(b, Para):
            out += [b.text, ""]
        elif isinstance(b, Bullets):
            out += [f"- {i}" for i in b.items] + [""]
        elif isinstance(b, Code):
            out += [f"```{b.lang}", b.text.rstrip("\n"), "```", ""]
        elif isinstance(b, Table):
            if b.df.empty:
                out += [f"_{b.empty}_", ""]
            else:
                cols = [str(c) for c in b.df.columns]
                out.append("| " + " | ".join(cols) + " |")
                out.append("|" + "|".join("---" for _ in cols) + "|")
                for row in b.df.itertuples(index=False):
                    out.append("| " + " | ".join(_md_cell(v) for v in row) + " |")
                out.append("")
        elif isinstance(b, Image):
            out += [f"![{b.alt}]({b.path.relative_to(run_dir).as_posix()})", "", f"_{b.caption}_", ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------- HTML

#: The page style, shared with the agent's report.html (perfscout.graph.report).
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;max-width:1100px;color:#222;
     line-height:1.45;padding:0 1rem}
h1{border-bottom:2px solid #444}h2{border-bottom:1px solid #ccc;margin-top:2.2rem}
table{border-collapse:collapse;font-size:.8rem;margin:.6rem 0;display:block;overflow-x:auto}
th,td{border:1px solid #ccc;padding:.2rem .45rem;text-align:left;vertical-align:top}
th{white-space:nowrap}td{max-width:34rem;overflow-wrap:break-word}
th{background:#f0f0f0}tr:nth-child(even){background:#fafafa}
code{background:#f3f3f3;padding:0 .2rem;border-radius:3px;font-size:.85em}
pre{background:#f6f6f6;padding:.8rem;overflow-x:auto;font-size:.8rem}
figure{margin:1rem 0}figure img{max-width:100%;border:1px solid #ddd}
figcaption{font-size:.85rem;color:#555}.empty{color:#777;font-style:italic}
"""


def _inline(text: str) -> str:
    """Escape, then turn `code` spans and **bold** into HTML (the only markup we emit)."""
    parts = html.escape(text).split("`")
    s = "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))
    bold = s.split("**")
    return "".join(f"<strong>{p}</strong>" if i % 2 else p for i, p in enumerate(bold))


def figure_html(path: Path, alt: str, caption: str) -> str:
    """A PNG file as an HTML figure with the image inlined (base64 data URI): the page needs no files."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def to_html(title: str, blocks: list[Block]) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style></head><body>",
           f"<h1>{html.escape(title)}</h1>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{_inline(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>")
        elif isinstance(b, Code):
            out.append(f"<pre><code>{html.escape(b.text)}</code></pre>")
        elif isinstance(b, Table):
            if b.df.empty:
                out.append(f'<p class="empty">{html.escape(b.empty)}</p>')
            else:
                out.append(b.df.to_html(index=False, escape=True, na_rep="", border=0))
        elif isinstance(b, Image):
            out.append(figure_html(b.path, b.alt, b.caption))
    out.append("</body></html>")
    return "\n".join(out)


def write_report(run_dir: str | Path, data: SweepData) -> Path:
    """Write report.md and report.html into ``run_dir`` from ``data``; return the HTML path.

    ``perfscout.sweep.api.report(run_dir)`` reads ``data`` from the run's store.
    """
    run_dir = Path(run_dir)
    title, blocks = build_blocks(run_dir, data)
    md, page = to_markdown(title, blocks, run_dir), to_html(title, blocks)
    for name, text in (("report.md", md), ("report.html", page)):
        tmp = run_dir / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(run_dir / name)
    return run_dir / "report.html"
