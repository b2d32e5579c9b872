"""The rules a claim's verdict follows: speed separations, targets with their tolerance,
degenerate settings. Pure functions of measured numbers; the builder and the checker both
call them, so a claim re-derives exactly when its numbers are the records'.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perfscout.analysis.regression import compare_measured
from perfscout.analysis.timing import MIN_TIMABLE_S

# ---- speed -------------------------------------------------------------------------

#: Fewer repeats than the regression runner decides with (its MIN_REPEATS, 5) cannot reach
#: its significance level; below that a speed is ranked only when the repeats of the two do
#: not overlap at all *and* the medians differ beyond the runner's noise bar (which scales a
#: small sample's scatter up to what 10 repeats would show): stricter, not looser.
MIN_SPEED_REPEATS = 2
#: The change of median time that counts (the regression runner's default threshold).
SPEED_THRESHOLD = 0.05
#: A codec that timed itself (no per-repeat samples) is ranked only this far ahead: beyond
#: the worst spread between repeats measured on shared machines (100 %), with the runner's
#: 1.25 noise margin on the log scale (2^1.25 = 2.4), rounded up.
UNSAMPLED_FACTOR = 3.0


def speed_verdict(fast_s: list[float], slow_s: list[float], fast_median: float | None = None,
                  slow_median: float | None = None) -> dict[str, Any]:
    """Does ``fast`` (per-repeat seconds) really beat ``slow``? ``{"decided": bool, "why": code,
    "n": repeats of the smaller side, "change": of the median time, "ci": its 95 % bootstrap
    interval, "p_value", "strict": the rank test was applied, "statistics": the runner's reason}``.
    ``why`` is ``separated``, ``overlap``, ``scatter``, ``few_repeats``, ``unsampled`` or
    ``undecided``. Deterministic: the bootstrap has a fixed seed."""
    n = min(len(fast_s), len(slow_s))
    out: dict[str, Any] = {"decided": False, "n": n, "change": None, "ci": None, "p_value": None, "strict": False,
                           "statistics": ""}
    if n < MIN_SPEED_REPEATS:
        if fast_median and slow_median and not fast_s and not slow_s:
            ratio = slow_median / fast_median
            out.update(decided=ratio >= UNSAMPLED_FACTOR and min(fast_median, slow_median) >= MIN_TIMABLE_S,
                       change=fast_median / slow_median - 1.0, why="unsampled")
            if out["decided"]:
                out["why"] = "separated"
            return out
        return {**out, "why": "few_repeats"}
    strict = n >= 5
    cmp = compare_measured("time", slow_s, fast_s, better="lower", threshold=SPEED_THRESHOLD,
                           floor=MIN_TIMABLE_S, min_repeats=MIN_SPEED_REPEATS,
                           **({} if strict else {"alpha": 1.0}))
    overlap = not max(fast_s) < min(slow_s)
    decided = cmp.verdict == "improved" and (strict or not overlap)
    ci = [cmp.ci_low, cmp.ci_high] if cmp.ci_low is not None else None
    why = "separated" if decided else "overlap" if overlap else "scatter" if cmp.change is not None else "undecided"
    return {**out, "decided": decided, "why": why, "change": cmp.change, "ci": ci, "p_value": cmp.p_value,
            "strict": strict, "statistics": cmp.reason}


def mbps_range(nbytes: int | None, samples_s: list[float]) -> list[float] | None:
    """[slowest, fastest] per-repeat throughput in MB/s (10^6 bytes, as the record's)."""
    good = [s for s in samples_s if s > 0]
    if not nbytes or not good:
        return None
    return [nbytes / 1e6 / max(good), nbytes / 1e6 / min(good)]


# ---- targets -----------------------------------------------------------------------

#: Bytes of a stream's own header (zfp's is 16; the framing of a chunked stream adds its
#: own per chunk): a bitrate above the asked rate by no more than this is the header.
STREAM_HEADER_BYTES = 64
#: zfp's fixed-rate mode codes blocks of 4^d values: a dimension that is not a multiple of 4
#: is padded, and the padding is coded at the same rate.
ZFP_BLOCK = 4


def _padded_size(shape: str | None) -> int | None:
    try:
        dims = [int(d) for d in str(shape).split(",") if d.strip()]
    except ValueError:
        return None
    return math.prod(-(-d // ZFP_BLOCK) * ZFP_BLOCK for d in dims) if dims else None


def bitrate_allowance(r: dict[str, Any], rate: float) -> float:
    """Bits per value a fixed-overhead stream may add to ``rate``: headers (one per chunk)
    and, in fixed-rate mode, zfp's padding to whole blocks."""
    n = (r.get("nbytes") or 0) / (8 if r.get("dtype") == "f64" else 4)
    if not n:
        return 0.0
    extra_bits = STREAM_HEADER_BYTES * 8 * max(1, int(r.get("chunks") or 1))
    padded = _padded_size(r.get("shape")) if r.get("mode") == "fixed_rate" else None
    if padded and padded > n:
        extra_bits += rate * (padded - n)
    return extra_bits / n


def judge_target(t: dict[str, Any], r: dict[str, Any], search: dict[str, Any] | None,
                 default_ratio_tolerance: float) -> dict[str, Any] | None:
    """Does record ``r`` meet target ``t`` (metric, op, value)? ``{"verdict": met |
    met_within_tolerance | missed, "value", "margin" (value - target), "tolerance" (in the
    metric's unit), "why" (header | search | None)}``; None when the record has no such figure.

    A measurement meets a target within its own declared tolerance: a bitrate within the
    stream's fixed overhead of the asked rate, a ratio that a ratio search for this very
    target stopped within its tolerance of.
    """
    v = r.get(t["metric"])
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    target = float(t["value"])
    margin = float(v) - target
    ok = margin >= 0 if t["op"] == ">=" else margin <= 0
    out: dict[str, Any] = {"value": float(v), "margin": margin, "tolerance": 0.0, "why": None}
    if ok:
        return {**out, "verdict": "met"}
    tol, why = 0.0, None
    if t["metric"] == "bitrate" and t["op"] == "<=":
        tol, why = bitrate_allowance(r, target), "header"
    elif t["metric"] == "ratio" and r.get("mode") == "ratio" and math.isclose(float(r.get("bound") or 0), target):
        rel = float(search["tolerance"]) if search and search.get("tolerance") is not None else default_ratio_tolerance
        tol, why = rel * target, "search"
    if tol and abs(margin) <= tol * (1 + 1e-9):
        return {**out, "verdict": "met_within_tolerance", "tolerance": tol, "why": why}
    return {**out, "verdict": "missed", "tolerance": tol, "why": why}


# ---- degenerate settings -----------------------------------------------------------

#: Below 1 MiB a codec's throughput is mostly start-up cost: measured on this project's
#: 2-core VM, sz3 compresses a 256 KiB field at 147 MB/s and a 4 MiB one at 254 MB/s (58 %),
#: 1 MiB at 228 MB/s (90 %); zfp reaches its rate by 64 KiB. A speed from a smaller field
#: says little about large ones.
SMALL_FIELD_BYTES = 1 << 20


def warnings_for(r: dict[str, Any], fld: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Degenerate or misleading settings of one record: ``[{"warning": id, numbers...}]``."""
    out: list[dict[str, Any]] = []
    fld = fld or {}
    abs_bound = r.get("abs_bound")
    lo, hi, absmax = fld.get("min"), fld.get("max"), fld.get("absmax")
    if abs_bound is not None and lo is not None and hi is not None:
        vrange = float(hi) - float(lo)
        if vrange > 0 and abs_bound >= vrange / 2:
            out.append({"warning": "bound_vs_range", "abs_bound": float(abs_bound), "value_range": vrange,
                        "fraction": float(abs_bound) / vrange})
        dtype = fld.get("dtype") or ("float64" if r.get("dtype") == "f64" else "float32")
        if absmax is not None and np.dtype(dtype).kind == "f":
            spacing = float(np.spacing(np.abs(np.asarray(absmax, dtype=dtype))))
            if 0 < abs_bound < spacing:
                out.append({"warning": "bound_below_resolution", "abs_bound": float(abs_bound), "spacing": spacing,
                            "absmax": float(absmax), "dtype": str(np.dtype(dtype))})
    stored = fld.get("dtype_on_disk")
    if stored and fld.get("stored_itemsize"):
        item = np.dtype(fld.get("dtype") or "float32").itemsize
        widened = int(fld["stored_itemsize"]) < item or np.dtype(stored).kind in "iu"
        if (fld.get("packed") or widened) and r.get("ratio"):
            out.append({"warning": "unpacked", "dtype_on_disk": str(stored), "dtype": str(fld.get("dtype")),
                        "packed": bool(fld.get("packed")), "ratio": float(r["ratio"]),
                        "ratio_vs_stored": float(r["ratio"]) * int(fld["stored_itemsize"]) / item})
    nbytes = r.get("nbytes") or fld.get("nbytes")
    if nbytes and int(nbytes) < SMALL_FIELD_BYTES and r.get("compress_s") is not None:
        out.append({"warning": "small_field", "nbytes": int(nbytes), "threshold": SMALL_FIELD_BYTES})
    return out
