"""Per-dataset figures of compression results (matplotlib + seaborn), written as PNG files:
the one plotting module of the sweep report and the agent's report (:func:`figure_blocks`).

Figures are built with matplotlib's object API (``matplotlib.figure.Figure`` on an explicit
Agg canvas), without touching pyplot's global backend: reports can be written from a
notebook (its inline plots stay as they are), a thread or a server. Files are deterministic:
the same rows give the same bytes (no timestamp or version in the PNG metadata).

Every figure is drawn only from stored rows that were measured (:func:`rows.measured`); a figure
with nothing to show is not written, and the caller says so in the report.

Sizes are for the report page, whose content is at most 1100 px wide (report.css): a figure is
at most :data:`PAGE_WIDTH_IN` wide at :data:`DPI`, so the browser shows it at its own size and
its text at the size it was drawn (a wider one was shrunk, and a heatmap of four panels had
4 px digits); the legend stands beside the plot, never on its lines; heatmap panels wrap two to
a row.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from perfscout.analysis.report.blocks import Block, Figure, Heading, Paragraph
from perfscout.analysis.report.rows import measured

DPI = 100
#: The widest figure, in inches at DPI: the report page's content width (1100 px) less margins.
PAGE_WIDTH_IN = 10.5
#: The smallest text drawn, in points (at DPI 100: 12.5 px, read without zooming).
MIN_TEXT_PT = 9
#: Heatmap panels per row.
HEATMAP_COLUMNS = 2
#: One line style per error mode, the same in every figure (colour = codec@device).
_LINESTYLES = {"abs": "-", "rel": "--", "pw_rel": ":", "psnr": "-.", "ratio": (0, (5, 1)), "fixed_rate": (0, (1, 3))}


@dataclass
class Plot:
    """One written figure file and what the report says about it."""

    dataset: str
    kind: str
    title: str
    path: Path
    caption: str


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "dataset"


def _palette(series: list[str]) -> dict[str, tuple]:
    colors = sns.color_palette("colorblind", n_colors=max(3, len(series)))
    return {s: colors[i] for i, s in enumerate(sorted(series))}


def _legend_beside(ax: Axes, **kwargs: object) -> None:
    """The legend to the right of the axes: inside, wherever it went, it covered lines or
    points (a fixed corner, and "best" too once eight series crowd the plot)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False,
              fontsize=MIN_TEXT_PT, title_fontsize=MIN_TEXT_PT, **kwargs)


def _series_lines(d: pd.DataFrame, ax: Axes, x: str, y: str) -> None:
    """One line of ``y`` against ``x`` per (series, mode): the series' colour, the mode's dash."""
    pal = _palette(list(d["series"].unique()))
    for (series, mode), g in d.groupby(["series", "mode"], sort=True):
        g = g.sort_values(x)
        ax.plot(g[x], g[y], marker="o", ms=4, color=pal[series], label=f"{series} ({mode})",
                linestyle=_LINESTYLES.get(mode, "-."))


def rate_distortion(d: pd.DataFrame, ax: Axes) -> str | None:
    d = d[d["psnr"].notna() & np.isfinite(d["psnr"]) & d["bitrate"].notna()]
    if d.empty:
        return None
    _series_lines(d, ax, "bitrate", "psnr")
    ax.set_xlabel("bitrate (bits/value)")
    ax.set_ylabel("PSNR (dB)")
    _legend_beside(ax)
    return "Rate–distortion: PSNR against bits per value; up and left is better."


def cr_vs_bound(d: pd.DataFrame, ax: Axes) -> str | None:
    d = d[d["mode"].isin(["abs", "rel", "pw_rel"])]
    if d.empty:
        return None
    _series_lines(d, ax, "bound", "ratio")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("error bound (as requested, in its mode)")
    ax.set_ylabel("compression ratio")
    _legend_beside(ax)
    return "Compression ratio against the requested bound (log–log), one line per codec, device and mode."


def throughput(d: pd.DataFrame, ax: Axes) -> str | None:
    long = d.melt(id_vars=["series"], value_vars=["compress_MBps", "decompress_MBps"], var_name="direction",
                  value_name="MB/s").dropna()
    if long.empty:
        return None
    long["direction"] = long["direction"].str.replace("_MBps", "", regex=False)
    order = sorted(long["series"].unique())
    sns.barplot(data=long, x="series", y="MB/s", hue="direction", order=order, estimator="median",
                errorbar=("pi", 50), ax=ax, palette="colorblind")
    ax.set_xlabel("codec@device")
    ax.set_ylabel("throughput (MB/s, median over bounds)")
    ax.tick_params(axis="x", labelrotation=20)
    _legend_beside(ax, title="direction")
    return "Compress and decompress throughput per codec and device: bar = median over all bounds, whisker = interquartile range."


def bubble(d: pd.DataFrame, ax: Axes) -> str | None:
    d = d[d["compress_MBps"].notna() & d["max_rel_err"].notna()]
    if d.empty:
        return None
    pal = _palette(list(d["series"].unique()))
    err = d["max_rel_err"].clip(lower=1e-12)
    # Area grows with log10 of the range-relative max error: 1e-6 -> small, 1e-1 -> large.
    size = 20 + 40 * (np.log10(err) + 12).clip(lower=0)
    for series, g in d.groupby("series", sort=True):
        ax.scatter(g["ratio"], g["compress_MBps"], s=size.loc[g.index], color=pal[series], alpha=0.6,
                   edgecolor="black", linewidth=0.4, label=series)
    ax.set_xscale("log")
    ax.set_xlabel("compression ratio")
    ax.set_ylabel("compress throughput (MB/s)")
    _legend_beside(ax, markerscale=0.5)
    return "Compression ratio × compress throughput; bubble area grows with the max error relative to the value range."


def heatmap(d: pd.DataFrame, fig: MplFigure) -> str | None:
    if d.empty:
        return None
    series = sorted(d["series"].unique())
    ncols = min(HEATMAP_COLUMNS, len(series))
    nrows = -(-len(series) // ncols)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    logs = np.log10(d["ratio"].clip(lower=1e-12))
    vmin, vmax = float(logs.min()), float(max(logs.max(), logs.min() + 1e-9))  # one colour scale for all panels
    for ax, s in zip(axes, series):
        g = d[d["series"] == s]
        table = g.pivot_table(index="mode", columns="bound", values="ratio", aggfunc="median")
        table.columns = [f"{b:g}" for b in table.columns]
        sns.heatmap(np.log10(table), annot=table.round(1), fmt="g", cbar=False, cmap="viridis", ax=ax, vmin=vmin, vmax=vmax,
                    annot_kws={"fontsize": MIN_TEXT_PT + 2})
        ax.set_title(s, fontsize=MIN_TEXT_PT + 2)
        ax.set_xlabel("bound")
        ax.set_ylabel("mode")
        ax.tick_params(labelsize=MIN_TEXT_PT, labelrotation=0)
    for ax in axes[len(series):]:
        ax.set_visible(False)  # the empty slot of an odd panel count
    return "Compression ratio for every mode × bound (cell = ratio, colour = log10 ratio on one scale across panels), one panel per codec@device."


_AXES_PLOTS: list[tuple[str, str, Callable[[pd.DataFrame, Axes], str | None]]] = [
    ("rate_distortion", "Rate–distortion", rate_distortion),
    ("cr_vs_bound", "Compression ratio vs bound", cr_vs_bound),
    ("throughput", "Throughput per codec and device", throughput),
    ("bubble", "Ratio × throughput (size = max error)", bubble),
]


def dataset_figures(df: pd.DataFrame, dataset: str, out_dir: Path) -> list[Plot]:
    """All figures for one dataset, written under ``out_dir`` (global matplotlib state untouched)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [_save(fig, dataset, kind, title, caption, out_dir)
            for kind, title, caption, fig in build_figures(df, dataset)]


def build_figures(df: pd.DataFrame, dataset: str) -> list[tuple[str, str, str, MplFigure]]:
    """``(kind, title, caption, figure)`` for each figure one dataset has, laid out on an Agg
    canvas (its renderer measures the text), not written."""
    with sns.axes_style("whitegrid"), sns.plotting_context("notebook"):
        return _build_figures(df, dataset)


def _build_figures(df: pd.DataFrame, dataset: str) -> list[tuple[str, str, str, MplFigure]]:
    d = measured(df[df["dataset"] == dataset])
    figures = []
    for kind, title, draw in _AXES_PLOTS:
        fig = MplFigure(figsize=(PAGE_WIDTH_IN, 5.0))
        ax = fig.subplots()
        caption = draw(d, ax)
        if caption is not None:
            ax.set_title(f"{dataset}: {title}")
            figures.append((kind, title, caption, _laid_out(fig)))
    n = max(1, d["series"].nunique()) if not d.empty else 1
    n_modes = max(2, d["mode"].nunique()) if not d.empty else 2
    ncols = min(HEATMAP_COLUMNS, n)
    nrows = -(-n // ncols)
    fig = MplFigure(figsize=(PAGE_WIDTH_IN if n > 1 else PAGE_WIDTH_IN / 2 + 0.5, 0.9 + nrows * (1.3 + 0.45 * n_modes)))
    caption = heatmap(d, fig)
    if caption is not None:
        fig.suptitle(f"{dataset}: compression ratio, mode × bound")
        figures.append(("heatmap", "Mode × bound heatmap", caption, _laid_out(fig)))
    return figures


def _laid_out(fig: MplFigure) -> MplFigure:
    FigureCanvasAgg(fig)  # PNG through Agg, whatever backend pyplot has
    fig.tight_layout()  # makes room for the legend beside the axes, inside the figure's width
    # Not drawn here: savefig draws it (a draw here as well made the same PNG bytes, and cost a
    # third of an agent report's time: 1.16 s -> 0.71 s for one dataset's five figures).
    return fig


def _save(fig: MplFigure, dataset: str, kind: str, title: str, caption: str, out_dir: Path) -> Plot:
    path = out_dir / f"{_slug(dataset)}__{kind}.png"
    fig.savefig(path, dpi=DPI, metadata={"Software": None})  # no timestamp/version: reproducible bytes
    return Plot(dataset=dataset, kind=kind, title=title, path=path, caption=caption)


#: Record columns the figures read, as numbers (a column of all-None records is object dtype).
NUMERIC_COLUMNS = ["bound", "ratio", "bitrate", "psnr", "max_abs_err", "max_rel_err", "compress_MBps",
                   "decompress_MBps"]


def records_frame(records: list[dict]) -> pd.DataFrame:
    """Compression records (``CompressionResult`` dicts, e.g. the agent's) as the frame the
    figures read: numeric columns coerced, missing ones as NaN."""
    df = pd.DataFrame(records)
    for col in NUMERIC_COLUMNS:
        df[col] = pd.to_numeric(df[col], errors="coerce") if col in df else float("nan")
    for col in ("dataset", "codec", "device", "mode"):
        df[col] = df[col].astype(str) if col in df else ""
    return df


def figure_blocks(df: pd.DataFrame, out_dir: Path, *, level: int = 3) -> list[Block]:
    """Per dataset (in name order): a heading and its figures as report blocks, or a sentence
    saying why there is nothing to plot. A figure that cannot be drawn costs only itself."""
    blocks: list[Block] = []
    for dataset in sorted(df["dataset"].astype(str).unique()) if not df.empty else []:
        blocks.append(Heading(dataset, level))
        try:
            figures = dataset_figures(df, dataset, out_dir)
        except Exception as exc:  # noqa: BLE001 - a plot must not cost the run its report
            blocks.append(Paragraph(f"Plots not drawn: {type(exc).__name__}: {exc}"))
            continue
        if not figures:
            blocks.append(Paragraph("No measured result to plot for this dataset (see failed tasks)."))
        blocks += [Figure(f.path, f"{dataset}: {f.title}", f.caption) for f in figures]
    return blocks
