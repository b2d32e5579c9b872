"""Error-bound modes, their resolution to what a codec enforces, and the bound contract.

Modes (``bound`` is what the user asks for; ``abs_bound`` what every element is checked
against):

``abs``
    ``|x - x'| <= bound`` for every element.
``rel``
    Value-range relative, as in SZ and qcat: ``abs_bound = bound * R`` with
    ``R = max - min`` over the finite values. ``R`` of float64 data can exceed float64
    (values near +-1.8e308): ``bound * R`` is then computed from the halves
    (``2 * bound * (max/2 - min/2)``), never through an infinite ``R``; a product that
    float64 cannot hold (rel bounds above ~0.5 on such a range) is capped at float64's
    largest value, a tighter bound, and a note says so: an enforced bound is never inf. A backend with a native ``rel`` mode runs
    it; others run ``abs`` with the resolved bound. **Constant field** (``R = 0``):
    ``rel`` is taken relative to the constant's magnitude, ``abs_bound = bound * |c|``;
    for an **all-zero** field it is read as absolute, ``abs_bound = bound``. Either way
    the codec runs in ``abs`` mode and the record's ``abs_bound`` says what was enforced.
``pw_rel``
    Point-wise relative: ``|x - x'| <= bound * |x|`` for every element (so zeros must
    come back exactly). Native backends only (sz2); there is no ``abs_bound``.
``psnr``
    A target PSNR in dB. From the uniform-error model (errors uniform on
    ``[-e, e]`` give ``MSE = e^2/3``): ``e = R * sqrt(3) * 10^(-target/20)``. The result is
    decompressed and its PSNR measured; if it falls short, ``e`` is tightened by the
    shortfall and the codec re-run, up to ``PSNR_TRIES`` times. Missing the target is
    reported as ``bound_violated``.
``ratio``
    A target compression ratio, found FRaZ-style: bisection of the absolute bound in
    log space between ``R * 1e-9`` and ``R``, stopping when the ratio is within
    ``RATIO_TOLERANCE`` (relative) of the target, when the bracket has narrowed below
    0.1% (a codec whose ratio moves in steps, like zfp's), or after ``RATIO_MAX_ITER``
    trials. The closest trial wins; the record's ``abs_bound`` is that trial's bound
    (verified like any other), and a missed target is noted in ``error`` (the run itself
    is valid; ``Evaluation.search`` holds every trial).
``fixed_rate``
    zfp's bits per value. Not an error bound: ``bound_ok`` is ``None``.

Verification statuses. Every result is decompressed and compared element by element
with the bound, exactly: ``|x - x'| > bound`` is decided for the real numbers the floats
stand for, never by a rounded float64 difference (:mod:`perfscout.codecs.verify`, where
the check lives, below the codecs' users; this module re-exports it). An element's *rounding slack* is two units in the last
place of the data type at its magnitude (``max(|x|, |x'|)``) plus ``4 * eps * bound``
(the bound's own representation in the codec's arithmetic), where for ``pw_rel`` the
bound is the element's own ``bound * |x|``:

* ``ok``: every element within the bound (``bound_ok=True``);
* ``bound_overshoot``: some elements beyond the bound, none by more than their
  rounding slack: a reconstruction-rounding artefact, not a broken codec
  (``bound_ok=False``, reported, never hidden);
* ``bound_violated``: at least one element beyond the bound by more than its rounding
  slack (``bound_ok=False``).

:func:`verify_and_measure` gives this verdict and every quality metric from one pass
over the pair (the check rides the metric pass's first read of each chunk; its general
paths, NaN/Inf or float64 overflow, fall back to this module's own chunked scan): the
verdict is :func:`verify_bound`'s, field for field.

Non-finite input (NaN, +-Inf): refused by default with :class:`NonfiniteInputError`
(which names the count and the first position). With ``nonfinite="passthrough"`` the
non-finite positions (a bitmap) and their exact bit patterns are stored beside the
codec stream (zlib-packed, counted in the compressed size), the codec sees them
replaced by the mean of the finite values, and decoding puts them back bit for bit.
Bounds, ``R`` and metrics then refer to the finite values only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfscout.analysis.metrics import psnr
from perfscout.analysis.stream_fast import ChunkView
from perfscout.analysis.tile_pool import resolve_threads
from perfscout.codecs.base import ALL_MODES, Compressed

# The verdict and the non-finite pass-through live below the codecs' users (the numcodecs
# adapters call them too); re-exported here, where evaluate and the CLI have always found them.
from perfscout.codecs.verify import (  # noqa: F401
    BOUND_CHECK_CHUNK,
    NONFINITE_POLICIES,
    BoundCheck,
    BoundScan,
    NonfiniteInputError,
    NonfiniteSplit,
    beyond_in_chunk,
    check_verify_inputs,
    exceeds,
    find_nonfinite,
    may_exceed,
    merge_beyond,
    refuse_nonfinite,
    restore_nonfinite,
    rounding_slack,
    scan_bound,
    split_nonfinite,
    unpack_nonfinite,
    verdict,
    verify_bound,
)
from perfscout.errors import InputError

PSNR_TRIES = 5
RATIO_TOLERANCE = 0.05
RATIO_MAX_ITER = 24


# -- bound validation and resolution ------------------------------------------------------
def check_mode_bound(mode: str, bound: float) -> float:
    """The bound as a float, or InputError for an unknown mode or an impossible bound."""
    if mode not in ALL_MODES:
        raise InputError(f"unknown mode {mode!r}; modes: {', '.join(ALL_MODES)}")
    try:
        value = float(bound)
    except (TypeError, ValueError) as exc:
        raise InputError(f"bound must be a number, got {bound!r}") from exc
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"bound must be a finite number > 0, got {bound!r}")
    if mode == "ratio" and value < 1:
        raise InputError(f"a target compression ratio must be >= 1, got {value}")
    if mode == "fixed_rate" and value > 64:
        raise InputError(f"fixed_rate is bits per value and must be <= 64, got {value}")
    if mode == "psnr" and math.sqrt(3.0) * 10 ** (-value / 20) < MIN_BOUND_FACTOR:
        # the uniform-error bound R·√3·10^(−dB/20) is below 1e-300 of any range: no codec
        # is handed a bound of 0 or a denormal (the HDF5 filters crash on those)
        raise InputError(f"a PSNR target of {value:g} dB asks for errors below 1e-300 of the value range, "
                         f"which no bound can express; targets up to {PSNR_MAX_DB:g} dB can be searched "
                         "(a lossless result has infinite PSNR: use mode abs with a tiny bound instead)")
    return value


#: The smallest bound a searched mode may start from, relative to the value range.
MIN_BOUND_FACTOR = 1e-300
#: The largest PSNR target whose starting bound stays above MIN_BOUND_FACTOR · R.
PSNR_MAX_DB = math.floor(20 * math.log10(math.sqrt(3.0) / MIN_BOUND_FACTOR))


FLOAT64_MAX = float(np.finfo(np.float64).max)


def finite_extremes(array: np.ndarray) -> tuple[float, float]:
    """(min, max) over the finite elements, as float64 (InputError when none is finite)."""
    a = np.asarray(array)
    if a.size == 0:
        raise InputError("value range of an empty array is undefined")
    lo, hi = float(np.min(a)), float(np.max(a))
    if math.isfinite(lo) and math.isfinite(hi):
        return lo, hi  # NaN would propagate into both and an infinity be one of them: all finite
    finite = np.isfinite(a)
    if not bool(finite.all()):
        if not bool(finite.any()):
            raise InputError("value range undefined: no element is finite")
        a = a[finite]
    return float(np.min(a)), float(np.max(a))


def range_times(factor: float, lo: float, hi: float) -> float:
    """``factor * (hi - lo)`` without an infinite intermediate; inf only when the result
    itself exceeds float64. (hi - lo of two finite doubles can overflow; their halves'
    difference cannot, and halving is exact for every value that large.)"""
    with np.errstate(over="ignore"):
        diff = hi - lo
        if math.isfinite(diff):
            return float(np.float64(factor) * diff)
        return float(np.float64(2.0) * (np.float64(factor) * (hi * 0.5 - lo * 0.5)))


def _range_text(lo: float, hi: float) -> str:
    half = hi * 0.5 - lo * 0.5
    return f"R = max - min = 2 x {half:.6g} (min {lo:.6g}, max {hi:.6g})"


def rel_reference(array: np.ndarray) -> tuple[float, str]:
    """What a ``rel`` bound multiplies: R, or |c| for a constant field, or 1 when all zero.

    InputError when R itself exceeds float64 (use :func:`rel_abs_bound`, which does not
    need R to fit, to resolve a rel bound)."""
    lo, hi = finite_extremes(array)
    if hi > lo:
        r = range_times(1.0, lo, hi)
        if not math.isfinite(r):
            raise InputError(f"the value range exceeds float64: {_range_text(lo, hi)}")
        return r, ""
    magnitude = max(abs(lo), abs(hi))
    if magnitude > 0:
        return magnitude, f"constant field (R = 0): rel bound taken relative to |value| = {magnitude:.6g}"
    return 1.0, "all-zero field (R = 0): rel bound taken as absolute"


def rel_abs_bound(array: np.ndarray, bound: float, *,
                  extremes: tuple[float, float] | None = None) -> tuple[float, str, bool]:
    """(abs_bound, note, range_fits) for ``rel`` at ``bound``: ``bound * R`` (or ``bound *
    |c|``, or ``bound``: see :func:`rel_reference`), computed so that it cannot overflow.

    ``range_fits`` says whether R itself is a finite value of the array's dtype with room
    to spare (a native rel mode computes R in the data's own arithmetic, so it may only
    run then). A product that float64 cannot represent is capped at its largest value
    (tighter than asked, said in the note), never inf. ``extremes``: :func:`finite_extremes`
    of ``array`` when the caller has it already (evaluate shares it with the metric pass)."""
    lo, hi = finite_extremes(array) if extremes is None else extremes
    dtype = np.dtype(array.dtype) if np.issubdtype(array.dtype, np.floating) else np.dtype(np.float64)
    if hi > lo:
        eb = range_times(bound, lo, hi)
        note = ""
        fits = range_times(1.0, lo, hi) <= float(np.finfo(dtype).max) / 4
        what = _range_text(lo, hi)
    else:
        ref, note = rel_reference(array)
        eb, fits, what = float(np.float64(bound) * np.float64(ref)), False, f"|value| = {ref:.6g}"
    if not math.isfinite(eb):
        eb = FLOAT64_MAX
        note = "; ".join(n for n in (note, (
            f"rel bound {bound:g} x {what} exceeds the largest float64: enforcing {FLOAT64_MAX:.6g} "
            "instead (a tighter bound)")) if n)
    return eb, note, fits


def codec_abs_bound(abs_bound: float, dtype: np.dtype) -> float:
    """The absolute bound handed to a codec: the enforced one, capped at the dtype's
    largest value (a tighter bound is always safe; libraries that hold the bound in the
    data's type would otherwise turn it into inf)."""
    return min(float(abs_bound), float(np.finfo(dtype).max))


# -- the bound check inside the metric pass --------------------------------------------------
class _OnePassCheck:
    """The bound check as a :class:`perfscout.analysis.stream_fast.ChunkWatch`: the metric
    pass's first read of each chunk already holds e = y - x in float64 and its extremes
    (the same numbers :func:`scan_bound` computes: |y - x| = |x - y| exactly), so the
    largest error and its index come from that pass, and only a chunk that may hold an
    element beyond the bound gets :func:`beyond_in_chunk`: for ``abs``, max |e| at least the
    bound; for ``pw_rel``, max |e| at least ``bound * min |x|`` of the chunk (below it no
    element can be beyond: rounding is monotonic; at it, one may be, which the exact
    comparison of :mod:`perfscout.codecs.verify` decides). Partials come back in chunk order and
    are merged as the sequential scan would."""

    def __init__(self, abs_bound: float | None, pw_rel_bound: float | None) -> None:
        self.abs_bound, self.pw_rel_bound = abs_bound, pw_rel_bound
        # What the compiled pass counts per chunk (perfscout.analysis.stream_compiled):
        # only a chunk with an element beyond the bound is shown to chunk().
        self.bounds = (abs_bound, pw_rel_bound)
        self.scan: BoundScan | None = None  # set by finish: the whole check

    def chunk(self, view: ChunkView) -> BoundScan | None:
        abs_bound, pw = self.abs_bound, self.pw_rel_bound
        if abs_bound is None and pw is None:
            return None
        worst = max(-view.e_min, view.e_max)
        if pw is None:
            if not may_exceed(worst, abs_bound):
                return None
        else:
            lo, hi = view.x_min, view.x_max
            smallest = 0.0 if lo <= 0.0 <= hi else min(abs(lo), abs(hi))
            if not may_exceed(worst, pw * smallest):
                return None
        part = BoundScan()
        x = np.asarray(view.x).astype(np.float64, copy=False)
        beyond_in_chunk(part, view.start, view.x, view.y, x, np.abs(view.e), abs_bound, pw)
        return part

    def candidates(self, start: int, xc: np.ndarray, yc: np.ndarray, cand: np.ndarray) -> BoundScan:
        """The chunk's partial from the flat indices (in order, into the chunk starting at
        ``start``) of its elements that may be beyond the bound (rounded error at least the
        rounded allowance), which the compiled metric pass finds
        (perfscout.analysis.stream_compiled): the worst excess of the chunk is one of
        theirs (every other element's excess is < 0), so :func:`beyond_in_chunk` on them
        alone gives the same counts, worst excess and (mapped back) index."""
        part = BoundScan()
        if not cand.size:
            return part
        xs, ys = xc[cand], yc[cand]
        x = xs.astype(np.float64)
        beyond_in_chunk(part, 0, xs, ys, x, np.abs(ys.astype(np.float64) - x), self.abs_bound, self.pw_rel_bound)
        part.worst_flat = start + int(cand[part.worst_flat])
        return part

    def finish(self, partials: list[Any], max_abs: float, max_flat: int) -> None:
        out = BoundScan(max_err=max_abs, max_flat=max_flat)
        for part in partials:
            if part is not None:
                merge_beyond(out, part)
        self.scan = out


@dataclass
class VerifiedMetrics:
    """What :func:`verify_and_measure` found."""

    check: BoundCheck
    metrics: dict[str, Any] = field(default_factory=dict)  # empty when the metric pass failed
    metrics_error: Exception | None = None  # why (ArithmeticError or InputError), else None
    one_pass: bool = False  # the verdict came out of the metric pass (else from its own scan)


def verify_and_measure(
    original: np.ndarray,
    reconstructed: np.ndarray,
    compressed_nbytes: int,
    *,
    abs_bound: float | None = None,
    pw_rel_bound: float | None = None,
    threads: int | None = None,
    x_extremes: tuple[float, float] | None = None,
) -> VerifiedMetrics:
    """:func:`verify_bound` and :func:`perfscout.analysis.metrics.quality_metrics` in one
    pass over the pair: the same verdict (status, counts, indices, message: this
    module's contract) and the same figures as calling the two.

    The metric pass's fast path (finite pair, no rescale) carries the check
    (:class:`_OnePassCheck`); when the general passes take over (NaN/Inf, extreme
    magnitudes, float64 overflow), the check runs its own scan (:func:`scan_bound`).
    ``threads``: the metric pass's worker threads (:func:`perfscout.analysis.tile_pool.resolve_threads`).
    ``x_extremes``: ``original``'s min and max when the caller knows every element is
    finite (:func:`finite_extremes`, computed once for a ``rel`` bound): the pass then
    does not read them again (for a ``pw_rel`` bound it is ignored: that check wants
    each chunk's own extremes). Bad input (shapes, bounds, an empty array, the
    compressed size, an unknown ``$PERFSCOUT_METRICS_BACKEND``) raises InputError; a
    failure of the metric pass itself (no finite element compared, an overflow) is
    returned in ``metrics_error`` beside a verdict that stands on its own."""
    from perfscout.analysis.streaming import check_compressed_nbytes, requested_backend, stream_quality_metrics

    what = check_verify_inputs(original, reconstructed, abs_bound, pw_rel_bound)
    check_compressed_nbytes(compressed_nbytes)
    requested_backend()  # an unknown $PERFSCOUT_METRICS_BACKEND is bad input, not a failed metric pass
    threads = resolve_threads(threads)
    watch = _OnePassCheck(abs_bound, pw_rel_bound)
    metrics: dict[str, Any] = {}
    error: Exception | None = None
    try:
        metrics = stream_quality_metrics(original, reconstructed, compressed_nbytes, threads=threads, watch=watch,
                                         x_extremes=None if pw_rel_bound is not None else x_extremes)
    except (ArithmeticError, InputError) as exc:
        error = exc
    scan = watch.scan if watch.scan is not None else scan_bound(original, reconstructed, abs_bound, pw_rel_bound)
    return VerifiedMetrics(verdict(original, reconstructed, what, scan), metrics, error, watch.scan is not None)


# -- searched modes --------------------------------------------------------------------------
def psnr_initial_bound(target_db: float, value_range_: float) -> float:
    """Absolute bound whose uniform error would give ``target_db``."""
    return value_range_ * math.sqrt(3.0) * 10 ** (-target_db / 20)


@dataclass
class SearchOutcome:
    """What a psnr/ratio search settled on."""

    abs_bound: float
    achieved: float  # PSNR (dB) or compression ratio of the chosen trial
    target: float
    iterations: int
    reached: bool
    trials: list[tuple[float, float]] = field(default_factory=list)  # (abs_bound, achieved)
    compressed: Compressed | None = None
    reconstructed: np.ndarray | None = None

    def note(self, what: str) -> str:
        if self.reached:
            return ""
        return (
            f"{what} target {self.target:g} not reached after {self.iterations} trial(s); "
            f"closest {self.achieved:.6g} at abs bound {self.abs_bound:.6g}"
        )


def search_psnr(
    array: np.ndarray,
    target_db: float,
    compress: Callable[[float], Compressed],
    decompress: Callable[[Compressed], np.ndarray],
    *,
    tries: int = PSNR_TRIES,
) -> SearchOutcome:
    """Start from the uniform-error bound, tighten by the shortfall until PSNR >= target."""
    lo, hi = finite_extremes(array)
    if hi <= lo:
        raise InputError("psnr mode needs a non-constant field: the value range R is 0, so PSNR is undefined")
    # psnr_initial_bound without forming R (which may exceed float64); the bound of a
    # target below ~5 dB could still exceed it: capped (a tighter start is safe).
    eb = min(range_times(math.sqrt(3.0) * 10 ** (-target_db / 20), lo, hi), FLOAT64_MAX)
    trials: list[tuple[float, float]] = []
    best: SearchOutcome | None = None
    for i in range(1, tries + 1):
        packed = compress(eb)
        recon = decompress(packed)
        try:
            got = psnr(array, recon)  # the record's definition: the search and the verdict agree
        except InputError:  # nothing finite came back: the codec's failure, not bad input
            got = -math.inf
        trials.append((eb, got))
        best = SearchOutcome(eb, got, target_db, i, got >= target_db, trials, packed, recon)
        if got >= target_db:
            break
        # Shortfall of d dB means the RMS error is 10^(d/20) too large; 10% margin.
        eb *= 10 ** ((got - target_db) / 20) * 0.9 if math.isfinite(got) else 1e-3
        if not eb > 0:
            break
    assert best is not None
    return best


def search_ratio(
    array: np.ndarray,
    target_ratio: float,
    compress: Callable[[float], Compressed],
    *,
    side_nbytes: int = 0,
    tolerance: float = RATIO_TOLERANCE,
    max_iter: int = RATIO_MAX_ITER,
) -> SearchOutcome:
    """FRaZ-style log-space bisection of the absolute bound for a target ratio."""
    lo_v, hi_v = finite_extremes(array)
    # The bracket's top is R (capped at float64's largest value when R exceeds it).
    ref = min(range_times(1.0, lo_v, hi_v), FLOAT64_MAX) if hi_v > lo_v else rel_reference(array)[0]
    # ... and its floor the dtype's resolution: a bound below its smallest value asks for
    # the exact values (and crashes the SZ3 filter).
    floor = float(np.finfo(array.dtype).smallest_subnormal) if np.issubdtype(array.dtype, np.floating) else 0.0
    lo, hi = min(max(ref * 1e-9, floor), ref), ref
    trials: list[tuple[float, float]] = []
    # Only the closest stream so far is kept: up to max_iter streams of a large field
    # would otherwise sit in memory at once.
    best: tuple[float, float, Compressed] | None = None

    def miss(got: float) -> float:
        return abs(math.log(got / target_ratio))

    def ratio_at(eb: float) -> float:
        nonlocal best
        packed = compress(eb)
        got = array.nbytes / (packed.nbytes + side_nbytes)
        trials.append((eb, got))
        if best is None or miss(got) < miss(best[1]):  # ties: the earlier trial stays
            best = (eb, got, packed)
        return got

    def close(got: float) -> bool:
        return abs(got - target_ratio) <= tolerance * target_ratio

    r_hi = ratio_at(hi)
    if r_hi >= target_ratio and not close(r_hi):
        r_lo = ratio_at(lo)
        if r_lo < target_ratio and not close(r_lo):
            # Stop when the bracket has collapsed: zfp's accuracy mode, for one, changes
            # only at powers of two, so its ratio is a staircase the target may fall between.
            while len(trials) < max_iter and hi / lo > 1.001:
                mid = math.sqrt(lo * hi)
                got = ratio_at(mid)
                if close(got):
                    break
                if got < target_ratio:
                    lo = mid
                else:
                    hi = mid
    assert best is not None
    eb, got, packed = best
    return SearchOutcome(eb, got, target_ratio, len(trials), close(got), trials, packed, None)
