"""A sweep's report, ``report.md`` and a self-contained ``report.html``, as one
:class:`~perfscout.analysis.report.blocks.Document` built from the run directory only
(store, spec, platform snapshot) and rendered by the report model's two renderers.

The store's contents come in as a :class:`SweepData` (read by
``perfscout.sweep.api``): analysis sits below tools and does not open the
sweep's SQLite store itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from perfscout.analysis import chunking
from perfscout.analysis.report import gpu, plots, summary
from perfscout.analysis.report.equal_quality import equal_quality_blocks
from perfscout.analysis.report.blocks import (
    Block,
    BulletList,
    Code,
    CodeBlock,
    Document,
    Heading,
    Inline,
    Note,
    Paragraph,
    Table,
    markup,
)
from perfscout.analysis.report.output import write


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
    searches: dict[str, dict[str, Any]] = field(default_factory=dict)  # task_key -> psnr/ratio search outcome


# ----------------------------------------------------------------------------- content


def _platform_rows(doc: dict) -> list[Inline]:
    cpu = doc.get("cpu") or {}
    gpus = doc.get("gpus") or []
    mem = doc.get("memory_total_bytes")
    items: list[Inline] = [
        ["platform_id: ", Code(str(doc.get("platform_id") or "unknown")),
         f" (source: {doc.get('source', 'perfscout.tools.snapshot')})"],
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


def _table(df: pd.DataFrame, empty: Inline = "none") -> Table:
    """A stored table for display: floats to 4 significant digits (stored rows keep full
    precision), number columns right-aligned."""
    out = df.copy()
    align = {str(c): "right" for c in out.columns
             if pd.api.types.is_numeric_dtype(out[c]) and not pd.api.types.is_bool_dtype(out[c])}
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]):
            out[c] = out[c].map(lambda v: "" if pd.isna(v) else f"{v:.4g}")
    return Table(out, empty, align=align)


def _cited(st: summary.Statement) -> Inline:
    """A summary sentence followed by the task keys of the rows it quotes."""
    if not st.task_keys:
        return st.text
    keys: list[Inline] = []
    for i, k in enumerate(st.task_keys):
        keys += ([", "] if i else []) + [Code(k)]
    return [st.text, " (tasks ", keys, ")"]


def build_document(run_dir: Path, data: SweepData) -> Document:
    """The whole sweep report as blocks (plots are written under ``run_dir/plots`` on the way)."""
    df, run_id, name, n_tasks = data.results, data.run_id, data.name, data.n_tasks
    session_info, sessions = data.sessions, len(data.sessions)
    skipped, opts, experiments = data.skipped, data.report_options, data.experiments
    psnr_min = float(opts.get("psnr_min", 60.0))
    blocks: list[Block] = [
        Paragraph(["Run ", Code(str(run_id)), " in ", Code(str(run_dir)),
                   f": {len(df)} of {n_tasks} task(s) stored, {sessions} session(s) (jobs per session: "
                   f"{', '.join(str(s.get('jobs')) for s in session_info)}). Every number below is read from "
                   "the run's results store; summary sentences cite the task keys of the rows they quote."]),
    ]
    if len(df) < n_tasks:
        blocks.append(Note(markup(f"**Incomplete run**: {n_tasks - len(df)} task(s) have no result yet "
                                  "(resume with `perfscout sweep SPEC --out DIR --resume`)."), "warning"))

    blocks.append(Heading("Summary"))
    statements = summary.summarize(df, psnr_min)
    blocks.append(BulletList([_cited(st) for st in statements if not st.dataset]))
    for dataset in sorted(df["dataset"].unique()) if not df.empty else []:
        items = [_cited(st) for st in statements if st.dataset == dataset]
        if items:
            blocks += [Heading(str(dataset), 3), BulletList(items)]

    blocks.append(Heading("Best settings per goal"))
    blocks.append(Heading("Highest compression ratio with the bound held", 3))
    blocks.append(_table(summary.best_cr_table(df), "no measured result held its bound"))
    blocks.append(Heading(f"Fastest compression with PSNR ≥ {psnr_min:g} dB (bound held)", 3))
    blocks.append(_table(summary.fastest_table(df, psnr_min), f"no result reached PSNR ≥ {psnr_min:g} dB"))

    # ratio at the asked PSNRs (the psnr targets and psnr_min) and PSNR at the asked ratios
    blocks += equal_quality_blocks(df.to_dict("records") if not df.empty else [], searches=data.searches,
                                   psnr_targets=[psnr_min])
    blocks.append(Heading("Violated bounds"))
    blocks.append(_table(summary.violations_table(df), "none: every measured bound held"))
    blocks.append(Heading("Failed tasks"))
    blocks.append(_table(summary.failures_table(df), "none"))
    if skipped:
        blocks.append(Heading("Grid points not run", 3))
        blocks.append(Table(pd.DataFrame(skipped)))

    section = gpu.gpu_section(df)  # GPU rows: copy roof, × copy, bound verdicts (analysis/report/gpu.py)
    if not section.empty:
        # gpu.py writes its sentences with the house's `code` and **bold** marks
        blocks += [Heading("GPU"), BulletList([markup(t) for t in section.intro]),
                   Heading("Throughput against the copy roof", 3), _table(section.throughput),
                   Heading("Bound verdicts", 3), _table(section.verdicts),
                   BulletList([markup(f) for f in section.findings] or ["none: every GPU result held its bound"])]

    chunked = chunking.chunking_table(df)  # codec threads > 1: chunked CR beside one stream's
    if not chunked.empty:
        blocks += [Heading("Chunked streams (codec threads)"),
                   Paragraph(markup("A codec's `threads` option compresses that many slabs of the slowest "
                                    "axis as independent streams in parallel: the bound is the same, the "
                                    "ratio is the chunked one. Each row sets it beside the same setting's "
                                    "single-stream result.")),
                   _table(chunked)]

    blocks.append(Heading("Plots per dataset"))
    blocks += plots.figure_blocks(df, run_dir / "plots")

    blocks.append(Heading("All results"))
    cols = ["task_key", "dataset", "codec", "device", "mode", "bound", "ratio", "bitrate", "psnr", "max_abs_err",
            "compress_MBps", "decompress_MBps", "bound_ok", "status"]
    table = df[cols].copy() if not df.empty else pd.DataFrame(columns=cols)
    table.insert(1, "experiments", table["task_key"].map(lambda k: ", ".join(experiments.get(k, []))))
    blocks.append(_table(table))
    blocks.append(Paragraph(markup("Full records (every DESIGN.md column): `results.parquet`, `results.csv`, "
                                   "`results.sqlite`; each task's raw output: `raw/<task_key>/`.")))

    blocks.append(Heading("Environment"))
    platform_file = run_dir / "platform.json"
    if platform_file.is_file():
        blocks.append(BulletList(_platform_rows(json.loads(platform_file.read_text()))))
    else:
        blocks.append(Paragraph("No platform snapshot in this run directory."))
    blocks.append(Heading("Spec"))
    spec_file = run_dir / "spec.yaml"
    blocks.append(CodeBlock(spec_file.read_text() if spec_file.is_file() else "(spec.yaml missing)", "yaml"))
    for extra in sorted(run_dir.glob("spec.session-*.yaml")):
        blocks.append(Paragraph(["A resume used a different spec, kept as ", Code(extra.name), ":"]))
        blocks.append(CodeBlock(extra.read_text(), "yaml"))
    return Document(f"Sweep report: {name}", blocks)


def write_sweep_report(run_dir: str | Path, data: SweepData) -> Path:
    """Write a sweep's report.md and report.html into ``run_dir`` from ``data``; return the HTML path."""
    run_dir = Path(run_dir)
    write(build_document(run_dir, data), md=run_dir / "report.md", html=run_dir / "report.html")
    return run_dir / "report.html"
