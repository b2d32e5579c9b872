"""Rate-distortion comparisons at equal quality: the ratio each codec gives at an asked
PSNR, and the PSNR it gives at an asked ratio, read off its measured (ratio, PSNR) points.

This is the view compressor papers use: codecs compared at the same quality, not at
whatever one setting of each happened to give. A figure is ``measured`` when a point lies
in the target's window (PSNR in [target, target + window]; ratio within the relative
tolerance), else ``interpolated`` between the two points that bracket the target (log
ratio linear in PSNR, the shape of a rate-distortion curve over a narrow span), and never
extrapolated: a target outside the points' span is ``outside`` the measured range.

The points of one series (one codec on one device and one dataset) come from its records
and from the trials of its psnr searches (:meth:`perfscout.tools.bounds.SearchOutcome.summary`,
whose ``points`` are ``[abs_bound, ratio, psnr]``): everything here is pure computation on
those numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: A PSNR target's window above the target, dB (tools.bounds.PSNR_WINDOW_DB).
PSNR_WINDOW_DB = 0.5
#: A ratio target's relative tolerance (tools.bounds.RATIO_TOLERANCE).
RATIO_TOLERANCE = 0.01
#: Record statuses whose ratio and PSNR are measurements of what the codec did.
MEASURED_STATUSES = frozenset({"ok", "bound_overshoot", "bound_violated", "gpu_unavailable"})


@dataclass(frozen=True)
class RDPoint:
    """One measured (ratio, PSNR) pair and where it came from (a task key, with
    ``trial N`` for a search's trial)."""

    ratio: float
    psnr: float
    source: str = ""


@dataclass(frozen=True)
class AtQuality:
    """One codec's figure at one asked target.

    ``how``: ``measured`` (``points`` holds the point in the window), ``interpolated``
    (``points`` holds the two bracketing points) or ``outside`` (``value`` None; ``span``
    is the measured range of the metric the target is on)."""

    value: float | None
    how: str
    points: tuple[RDPoint, ...] = ()
    span: tuple[float, float] | None = None


def _usable(points: Iterable[RDPoint]) -> list[RDPoint]:
    """Points with a finite positive ratio and a finite PSNR (a lossless result's infinite
    PSNR has no place on the curve)."""
    return [p for p in points if math.isfinite(p.ratio) and p.ratio > 0 and math.isfinite(p.psnr)]


def _lerp(x: float, x0: float, y0: float, x1: float, y1: float) -> float:
    return y0 if x1 == x0 else y0 + (x - x0) * (y1 - y0) / (x1 - x0)


def _scale(axis: str, v: float) -> float:
    """Where a figure sits on the curve's axes: log ratio is linear in PSNR over a narrow span."""
    return math.log(v) if axis == "ratio" else v


def _read_off(points: Iterable[RDPoint], on: str, target: float, in_window: Callable[[RDPoint], bool]) -> AtQuality:
    """The other figure at ``target`` on axis ``on`` ("psnr" or "ratio"): the best of the
    points ``in_window`` (measured), else interpolated between the closest points below and
    above the target, else outside the measured range (never extrapolated)."""
    other = "ratio" if on == "psnr" else "psnr"
    pts = _usable(points)
    if not pts:
        return AtQuality(None, "outside")
    inside = [p for p in pts if in_window(p)]
    if inside:
        best = max(inside, key=lambda p: getattr(p, other))
        return AtQuality(getattr(best, other), "measured", (best,))
    below = [p for p in pts if getattr(p, on) < target]
    above = [p for p in pts if getattr(p, on) > target]
    span = (min(getattr(p, on) for p in pts), max(getattr(p, on) for p in pts))
    if not below or not above:
        return AtQuality(None, "outside", span=span)
    # the closest on each side; of two at the same place, the better other figure
    lo = max(below, key=lambda p: (getattr(p, on), getattr(p, other)))
    hi = min(above, key=lambda p: (getattr(p, on), -getattr(p, other)))
    y = _lerp(_scale(on, target), _scale(on, getattr(lo, on)), _scale(other, getattr(lo, other)),
              _scale(on, getattr(hi, on)), _scale(other, getattr(hi, other)))
    return AtQuality(math.exp(y) if other == "ratio" else y, "interpolated", (lo, hi), span)


def ratio_at_psnr(points: Iterable[RDPoint], target_db: float, window_db: float = PSNR_WINDOW_DB) -> AtQuality:
    """The ratio at PSNR ``target_db``: the best ratio of a point in [target, target +
    window_db] (measured), else log ratio interpolated between the closest points below
    and above the target, else outside the measured range."""
    return _read_off(points, "psnr", target_db, lambda p: target_db <= p.psnr <= target_db + window_db)


def psnr_at_ratio(points: Iterable[RDPoint], target_ratio: float, tolerance: float = RATIO_TOLERANCE) -> AtQuality:
    """The PSNR at ratio ``target_ratio``: the best PSNR of a point within ``tolerance``
    (relative) of it (measured), else PSNR interpolated in log ratio between the closest
    points below and above it, else outside the measured range."""
    return _read_off(points, "ratio", target_ratio, lambda p: abs(p.ratio - target_ratio) <= tolerance * target_ratio)


def _number(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def series_points(records: Iterable[Mapping[str, Any]],
                  searches: Mapping[str, Mapping[str, Any]] | None = None) -> dict[tuple[str, str], list[RDPoint]]:
    """The (ratio, PSNR) points of each (dataset, codec@device) series: every record with
    both figures measured (:data:`MEASURED_STATUSES`), and every psnr trial of its search
    (``searches``: task key -> a search summary, with its ``points``)."""
    searches = searches or {}
    out: dict[tuple[str, str], list[RDPoint]] = {}
    for r in records:
        key = (str(r.get("dataset", "")), f"{r.get('codec', '')}@{r.get('device', 'cpu')}")
        task = str(r.get("task_key", ""))
        pts = out.setdefault(key, [])
        ratio, psnr = _number(r.get("ratio")), _number(r.get("psnr"))
        if r.get("status") in MEASURED_STATUSES and ratio is not None and psnr is not None:
            pts.append(RDPoint(ratio, psnr, task))
        search = (searches.get(task) if task else None) or {}  # no key: no search to match
        for i, point in enumerate(search.get("points") or [], 1):
            if not isinstance(point, (list, tuple)) or len(point) != 3:
                continue
            ratio, psnr = _number(point[1]), _number(point[2])
            if ratio is not None and psnr is not None:
                pts.append(RDPoint(ratio, psnr, f"{task} trial {i}"))
    return {k: v for k, v in out.items() if v}


@dataclass(frozen=True)
class EqualQualityRow:
    """One line of the equal-quality table: a series at one asked target."""

    dataset: str
    series: str  # codec@device
    metric: str  # "psnr" (the row gives the ratio at that PSNR) or "ratio" (the PSNR at that ratio)
    target: float
    result: AtQuality


def equal_quality(series: Mapping[tuple[str, str], list[RDPoint]], *, psnr_targets: Iterable[float] = (),
                  ratio_targets: Iterable[float] = ()) -> list[EqualQualityRow]:
    """Every series at every asked target, by dataset, then target, then series."""
    psnrs = sorted({float(t) for t in psnr_targets if _number(t) is not None})
    ratios = sorted({float(t) for t in ratio_targets if _number(t) is not None and float(t) > 0})
    rows: list[EqualQualityRow] = []
    for dataset in sorted({d for d, _ in series}):
        names = sorted(s for d, s in series if d == dataset)
        for t in psnrs:
            rows += [EqualQualityRow(dataset, s, "psnr", t, ratio_at_psnr(series[(dataset, s)], t)) for s in names]
        for t in ratios:
            rows += [EqualQualityRow(dataset, s, "ratio", t, psnr_at_ratio(series[(dataset, s)], t)) for s in names]
    return rows


def targets_of(records: Iterable[Mapping[str, Any]]) -> tuple[list[float], list[float]]:
    """The asked targets: (PSNR targets, ratio targets) of the psnr- and ratio-mode records."""
    psnrs: set[float] = set()
    ratios: set[float] = set()
    for r in records:
        bound = _number(r.get("bound"))
        if bound is None:
            continue
        if r.get("mode") == "psnr":
            psnrs.add(bound)
        elif r.get("mode") == "ratio":
            ratios.add(bound)
    return sorted(psnrs), sorted(ratios)


__all__ = ["AtQuality", "EqualQualityRow", "RDPoint", "equal_quality", "psnr_at_ratio", "ratio_at_psnr",
           "series_points", "targets_of"]
