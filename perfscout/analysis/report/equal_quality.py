"""The "at equal quality" section of a report: each codec's ratio at the asked PSNR and
its PSNR at the asked ratio, from the rate-distortion points of the same data
(:mod:`perfscout.analysis.rate_distortion`), each figure marked measured, interpolated or
outside the measured range. The agent's report and a sweep's report both use it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from perfscout.analysis import rate_distortion as rd
from perfscout.analysis.report.blocks import Block, Heading, Paragraph, Table, markup


def _how(row: rd.EqualQualityRow) -> str:
    res, unit = row.result, (" dB" if row.metric == "psnr" else "x")

    def at(p: rd.RDPoint) -> str:
        there = (f"{p.psnr:.4g} dB (ratio {p.ratio:.4g})" if row.metric == "psnr"
                 else f"ratio {p.ratio:.4g} ({p.psnr:.4g} dB)")
        return f"{there}, {p.source}" if p.source else there

    if res.how == "measured":
        return f"measured: {at(res.points[0])}"
    if res.how == "interpolated":
        return f"interpolated between {at(res.points[0])} and {at(res.points[1])}"
    if res.span is None:
        return "outside the measured range (no measured point)"
    lo, hi = res.span
    return f"outside the measured range ({lo:.4g}{unit} to {hi:.4g}{unit}): not extrapolated"


def _value(row: rd.EqualQualityRow) -> str:
    v = row.result.value
    if v is None:
        return "–"
    text = f"{v:.4g}"
    return f"≈{text}" if row.result.how == "interpolated" else text


def equal_quality_blocks(records: Iterable[Mapping[str, Any]], *,
                         searches: Mapping[str, Mapping[str, Any]] | None = None,
                         psnr_targets: Iterable[float] = (), ratio_targets: Iterable[float] = (),
                         level: int = 2) -> list[Block]:
    """The section for the asked targets: those of the psnr/ratio-mode ``records`` and
    the ones given; nothing when there is no target or no measured point."""
    records = list(records)
    asked_psnr, asked_ratio = rd.targets_of(records)
    psnrs = sorted(set(asked_psnr) | {float(t) for t in psnr_targets})
    ratios = sorted(set(asked_ratio) | {float(t) for t in ratio_targets})
    if not psnrs and not ratios:
        return []
    rows = rd.equal_quality(rd.series_points(records, searches), psnr_targets=psnrs, ratio_targets=ratios)
    if not rows:
        return []
    table = [[r.dataset, f"PSNR {r.target:g} dB" if r.metric == "psnr" else f"ratio {r.target:g}x", r.series,
              _value(r) if r.metric == "psnr" else f"{r.target:g}",
              _value(r) if r.metric == "ratio" else f"{r.target:g}", _how(r)] for r in rows]
    return [
        Heading("At equal quality", level),
        Paragraph(markup(
            "Each codec at the same quality, from its measured (ratio, PSNR) points on the same data: every "
            "record and every trial of its PSNR searches. **measured**: a point in the target's window "
            f"(PSNR in [target, target + {rd.PSNR_WINDOW_DB:g} dB], ratio within ±{rd.RATIO_TOLERANCE * 100:g} %); "
            "**interpolated** (≈): log ratio linear in PSNR between the two points that bracket the target; "
            "a target outside a codec's points is never extrapolated.")),
        Table(table, columns=["dataset", "asked", "codec@device", "ratio", "PSNR dB", "how"],
              align=["left", "left", "left", "right", "right", "left"]),
    ]


__all__ = ["equal_quality_blocks"]
