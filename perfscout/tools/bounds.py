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
    A target PSNR in dB, met when the measured PSNR lands in the window
    ``[target, target + PSNR_WINDOW_DB]`` (0.5 dB): codecs are compared at equal quality,
    not at whatever a first trial overshot to. The search starts from the uniform-error
    model (errors uniform on ``[-e, e]`` give ``MSE = e^2/3``:
    ``e = R * sqrt(3) * 10^(-target/20)``), brackets the window on the codec's own
    absolute-bound control and narrows the bracket in log space; each trial is decompressed
    and its PSNR measured, at most ``PSNR_MAX_TRIALS`` trials. A control that moves in steps
    (zfp's accuracy mode acts only at powers of two, :class:`AbsControl`) may have no
    setting in the window: the outcome says ``too_coarse``, keeps the closest trials on both
    sides and settles on the one that reaches the target with the least overshoot. A PSNR
    below the target is reported as ``bound_violated``.
``ratio``
    A target compression ratio, FRaZ-style: the same bracket-and-narrow search of the
    absolute bound in log space within ``[R * 1e-9, R]``, until the ratio is within
    ``RATIO_TOLERANCE`` (1 %, relative) of the target, the control has no setting between
    the closest trials (``too_coarse``; a bracket narrower than 1 % for a continuous
    control) or after ``RATIO_MAX_ITER`` compressions. The chosen trial is the one in the
    window, else the one reaching the target with the least overshoot, else the closest
    below; the record's ``abs_bound`` is that trial's bound (verified like any other), and
    a missed window is noted in ``error`` (the run itself is valid;
    ``Evaluation.search`` holds every trial).
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
from perfscout.analysis.rate_distortion import PSNR_WINDOW_DB, RATIO_TOLERANCE
from perfscout.analysis.stream_fast import ChunkView
from perfscout.analysis.tile_pool import map_ordered, resolve_threads
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


#: Elements per piece of :func:`min_max` (4 MiB of float32: both reductions of a piece
#: read it from the cache, so the array is read from memory once, not twice).
MIN_MAX_CHUNK = 1 << 20


def min_max(array: np.ndarray, threads: int | None = None) -> tuple[float, float]:
    """``(float(np.min(array)), float(np.max(array)))``, NaN propagating as there, in one
    read of a large C-contiguous array over ``threads`` threads (None: the cores this
    process may use, as the metric pass takes them). Min and max do not depend on the
    order of the elements, so the pieces give the whole array's figures. Measured on a
    256 MiB float32 field: 0.058 s as two NumPy reductions, 0.028 s in pieces on 2 cores;
    after a fork, whose first read of the inherited pages costs about twice a later one
    on the 2-core VM, 0.109 s as two reductions."""
    a = np.asarray(array)
    n = int(a.size)
    if n < 4 * MIN_MAX_CHUNK or not a.flags.c_contiguous:
        return float(np.min(a)), float(np.max(a))
    flat = a.reshape(-1)

    def piece(i0: int) -> tuple[Any, Any]:
        part = flat[i0 : i0 + MIN_MAX_CHUNK]
        return part.min(), part.max()

    parts = map_ordered(piece, range(0, n, MIN_MAX_CHUNK), resolve_threads(threads))
    lows = np.array([p[0] for p in parts], dtype=a.dtype)
    highs = np.array([p[1] for p in parts], dtype=a.dtype)
    return float(np.min(lows)), float(np.max(highs))


def finite_extremes(array: np.ndarray) -> tuple[float, float]:
    """(min, max) over the finite elements, as float64 (InputError when none is finite)."""
    a = np.asarray(array)
    if a.size == 0:
        raise InputError("value range of an empty array is undefined")
    lo, hi = min_max(a)
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
# A psnr or ratio target is a window, not a threshold: a search that stops at the first
# trial past the target compares codecs at unequal quality (zfp's first trial lands 20-35 dB
# above a PSNR target, so "best ratio at PSNR >= X" was biased against it). Both searches
# bracket the target on the codec's own absolute-bound control and then narrow the bracket
# in log space (a secant step where the last one shrank it, else a bisection) until one trial
# lands in the window, the control cannot be set between the two closest trials
# (``too_coarse``), or the stated trial budget is spent.


def psnr_initial_bound(target_db: float, value_range_: float) -> float:
    """Absolute bound whose uniform error would give ``target_db``."""
    return value_range_ * math.sqrt(3.0) * 10 ** (-target_db / 20)


@dataclass(frozen=True)
class AbsControl:
    """Which absolute bounds a codec can actually be set to.

    ``step`` 0: any value (sz3, sz2: the bound is used as given). ``step`` 2: only powers
    of two (zfp's accuracy mode runs a tolerance t as 2^floor(log2 t): every t in
    [2^k, 2^(k+1)) gives the same stream), so a search tries only those and knows when
    no setting lies between two trials."""

    step: float = 0.0

    def snap(self, eb: float) -> float:
        """The smallest bound that gives the same stream as ``eb``."""
        if self.step == 2.0:
            return math.ldexp(0.5, math.frexp(eb)[1])  # eb = m * 2^e, 0.5 <= m < 1: 2^(e-1)
        if self.step > 1.0:
            v = self.step ** math.floor(math.log(eb, self.step))
            return v / self.step if v > eb else (v * self.step if v * self.step <= eb else v)
        return eb

    def between(self, lo: float, hi: float, guess: float) -> float | None:
        """A setting strictly between ``lo`` and ``hi`` (both settings), near ``guess``;
        None when there is none. A continuous control counts a bracket narrower than 1 % as
        none: by the uniform-error model 1 % of bound moves PSNR by 0.09 dB and a ratio by
        about 0.5 %, so a result that still jumps across the window there jumps at one
        setting (sz2 switching to lossless, sz3 switching predictors)."""
        if self.step > 1.0:
            eb = self.snap(guess)
            if eb <= lo:
                eb = lo * self.step
            return eb if eb < hi * (1 - 1e-12) else None
        if hi / lo <= 1.01:
            return None
        return min(max(guess, lo * 1.001), hi / 1.001)


# PSNR targets land in [target, target + PSNR_WINDOW_DB] dB, ratio targets within
# +-RATIO_TOLERANCE (relative): defined once, beside the equal-quality table that reads them
# (perfscout.analysis.rate_distortion).
#: The PSNR search's budget: trials, each one compress, one decompress and one PSNR pass.
PSNR_MAX_TRIALS = 12
#: The ratio search's budget: trials, each one compress (the ratio needs no decompression).
RATIO_MAX_ITER = 24

_DB_PER_E_FOLD = 20 / math.log(10)  # uniform-error model: PSNR falls 20 dB per decade of bound


@dataclass
class SearchOutcome:
    """What a psnr/ratio search settled on, and every trial it made.

    ``window`` is where a trial counts as on target: [target, target + tolerance] dB for
    psnr, target x [1 - tolerance, 1 + tolerance] for ratio. ``closest_below`` /
    ``closest_above``: the nearest trials under and over the window, (abs_bound,
    achieved), None when no trial fell there. The chosen trial is the first in the window;
    failing that the one that reaches the target with the least overshoot (the closest
    above); failing that the closest below. ``stop``: ``in_window``, ``too_coarse`` (no
    setting of the codec's control lies between the closest trials on either side),
    ``unreachable`` (the target lies beyond what the bound's range gives), ``budget``
    (``max_trials`` spent) or ``non_monotone`` (a looser bound gave a better result).
    Only the chosen trial's stream (and, for psnr, reconstruction) is kept."""

    abs_bound: float
    achieved: float  # PSNR (dB) or compression ratio of the chosen trial
    target: float
    iterations: int
    reached: bool  # psnr: the chosen PSNR >= target; ratio: the chosen ratio in the window
    trials: list[tuple[float, float]] = field(default_factory=list)  # (abs_bound, achieved)
    compressed: Compressed | None = None
    reconstructed: np.ndarray | None = None
    metric: str = "psnr"  # "psnr" | "ratio"
    tolerance: float = 0.0  # dB above the target (psnr) or relative (ratio)
    window: tuple[float, float] = (0.0, 0.0)
    closest_below: tuple[float, float] | None = None
    closest_above: tuple[float, float] | None = None
    too_coarse: bool = False
    stop: str = ""
    max_trials: int = 0  # the budget the search ran under
    #: (abs_bound, ratio, psnr) of every trial: the rate-distortion points (psnr None for a
    #: ratio search, which does not decompress).
    points: list[tuple[float, float, float | None]] = field(default_factory=list)

    @property
    def in_window(self) -> bool:
        return self.window[0] <= self.achieved <= self.window[1]

    def summary(self) -> dict[str, Any]:
        """The outcome as plain JSON values (the ``search`` entry of an evaluation's record
        notes, of the agent's observation and of a sweep task's ``search.json``)."""
        def pair(t: tuple[float, float] | None) -> list[float] | None:
            return None if t is None else [float(t[0]), float(t[1])]

        return {
            "target": float(self.target), "metric": self.metric, "tolerance": float(self.tolerance),
            "window": [float(self.window[0]), float(self.window[1])], "reached": bool(self.reached),
            "trials": [[float(eb), float(v)] for eb, v in self.trials],
            "closest_below": pair(self.closest_below), "closest_above": pair(self.closest_above),
            "too_coarse": bool(self.too_coarse),
            # beyond the contract's keys: what was chosen, why the search stopped, its budget, and
            # the rate-distortion points the equal-quality table reads
            "chosen": [float(self.abs_bound), float(self.achieved)], "in_window": self.in_window,
            "stop": self.stop, "max_trials": int(self.max_trials),
            "points": [[float(eb), float(r), None if p is None else float(p)] for eb, r, p in self.points],
        }

    def _window_text(self) -> str:
        lo, hi = self.window
        if self.metric == "psnr":
            return f"[{lo:.6g}, {hi:.6g}] dB"
        return f"{self.target:g} +-{self.tolerance * 100:g} % ({lo:.6g} .. {hi:.6g})"

    def _sides(self) -> str:
        unit = " dB" if self.metric == "psnr" else ""
        sides = [f"{name} {t[1]:.6g}{unit} at abs bound {t[0]:.6g}"
                 for name, t in (("below", self.closest_below), ("above", self.closest_above)) if t is not None]
        return "; closest trials: " + ", ".join(sides) if sides else ""

    def note(self, what: str) -> str:
        """Why the chosen trial is not in the window ("" when it is)."""
        if self.in_window:
            return ""
        why = {"too_coarse": "the codec's bound control is too coarse to land there (its result moves in steps: "
                             "no setting between the closest trials gives a different one)",
               "unreachable": "the target lies beyond what any bound in the searched range gives",
               "budget": f"the trial budget ({self.max_trials}) was spent",
               "non_monotone": "a looser bound gave a better result, so the bracket could not be narrowed"
               }.get(self.stop, self.stop)
        if self.metric == "psnr" and self.reached:
            kept = f"kept {self.achieved:.6g} dB, the trial reaching the target with the least overshoot"
        elif self.closest_above is not None and (self.abs_bound, self.achieved) == self.closest_above:
            kept = f"kept {self.achieved:.6g}, the trial reaching the target with the least overshoot"
        else:
            kept = f"kept the closest, {self.achieved:.6g} at abs bound {self.abs_bound:.6g}"
        head = f"{what} target {self.target:g} not reached within {self._window_text()}"
        if self.metric == "psnr" and self.reached:
            head = f"{what} {self.achieved:.6g} dB is above the window {self._window_text()}"
        return f"{head} after {self.iterations} trial(s): {why}{self._sides()}; {kept}"


class _Chosen:
    """The trial a search settles on, kept with its stream while the search runs: first in
    the window, else the least overshoot above it, else the closest below (one stream in
    memory at a time)."""

    def __init__(self, window: tuple[float, float], log_metric: bool) -> None:
        self.window, self.log = window, log_metric
        self.best: tuple[tuple[int, float], float, float, Compressed, np.ndarray | None] | None = None

    def _rank(self, v: float) -> tuple[int, float]:
        lo, hi = self.window
        if lo <= v <= hi:
            return (0, 0.0)
        if v > hi:
            return (1, math.log(v / hi) if self.log else v - hi)
        return (2, math.log(lo / v) if self.log and v > 0 else lo - v)

    def offer(self, eb: float, v: float, packed: Compressed, recon: np.ndarray | None) -> None:
        rank = self._rank(v)
        if self.best is None or rank < self.best[0]:  # ties: the earlier trial stays
            self.best = (rank, eb, v, packed, recon)


def _closest(trials: list[tuple[float, float]], window: tuple[float, float]
             ) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    below = [t for t in trials if t[1] < window[0]]
    above = [t for t in trials if t[1] > window[1]]
    return (max(below, key=lambda t: t[1]) if below else None,
            min(above, key=lambda t: t[1]) if above else None)


def _steer(first_eb: float, run: Callable[[float], float], window: tuple[float, float], *,
           rising: bool, log_metric: bool, slope: float, floor: float, ceil: float, budget: int,
           control: AbsControl) -> str:
    """Drive ``run(abs_bound) -> achieved`` into ``window``; return why it stopped.

    Works on a score that grows with log(bound) (the metric, or its log for a ratio, negated
    when the metric falls as the bound grows) and assumes it is monotonic. ``slope``: the
    score's expected change per e-fold of the bound, for the first steps before two trials
    give a secant. Bounds stay within [floor, ceil] and on the control's settings."""
    def score(v: float) -> float:
        if log_metric:
            v = math.log(v) if v > 0 else -math.inf
        return v if rising else -v

    a, b = sorted((score(window[0]), score(window[1])))
    mid = 0.5 * (a + b)
    floor = max(floor, math.ulp(0.0))  # a bound is > 0 (a tiny range's floor may underflow to 0)
    # (bound, log bound, score): the loosest bound scoring below a, the tightest scoring above b
    small: tuple[float, float, float] | None = None
    large: tuple[float, float, float] | None = None
    previous: tuple[float, float] | None = None  # the last trial, for a secant slope outside the bracket
    tried: set[float] = set()
    reach = 1.0  # how far an extrapolation reaches, doubled each time it falls short
    last_width = math.inf
    eb = control.snap(min(max(first_eb, floor), ceil)) or floor
    for _ in range(budget):
        tried.add(eb)
        s = score(run(eb))
        u = math.log(eb)
        if a <= s <= b:
            return "in_window"
        if s < a and (small is None or u > small[1]):
            small = (eb, u, s)
        if s > b and (large is None or u < large[1]):
            large = (eb, u, s)
        if small is not None and large is not None:  # bracketed: narrow it
            if small[0] >= large[0]:
                return "non_monotone"
            width = large[1] - small[1]
            t = 0.5
            if width <= 0.5 * last_width and math.isfinite(small[2]) and math.isfinite(large[2]):
                t = min(max((mid - small[2]) / (large[2] - small[2]), 0.1), 0.9)  # secant, kept off the ends
            last_width = width
            nxt = control.between(small[0], large[0], math.exp(small[1] + t * width))
            if nxt is None:
                return "too_coarse"
            eb = nxt
        else:  # one side only: extrapolate towards the window
            est, scale = slope, reach
            if previous is not None and previous[0] != u and math.isfinite(s) and math.isfinite(previous[1]):
                secant = (s - previous[1]) / (u - previous[0])
                if secant > 0:  # two trials on this side measure the slope: aim by it, no reach
                    est, scale = min(max(secant, slope / 10), slope * 10), 1.0
            du = (mid - s) / est if math.isfinite(s) else math.copysign(math.log(1e3), mid - s)
            du = math.copysign(min(abs(du) * scale, math.log(1e6)), du)
            reach *= 2
            # clamped in log space first: a bound near float64's largest value would overflow exp
            nxt = control.snap(min(max(math.exp(min(max(u + du, math.log(floor)), math.log(ceil))), floor), ceil))
            if nxt in tried and control.step > 1.0:  # the same setting: one step on
                nxt = nxt * control.step if du > 0 else nxt / control.step
            if nxt in tried or not floor <= nxt <= ceil:
                return "unreachable"
            eb = nxt
        previous = (u, s)
    return "budget"


def _bound_floor(array: np.ndarray, ref: float) -> float:
    """The smallest bound a search hands a codec: 1e-9 of the range, and never below the
    dtype's smallest value (a bound below it asks for the exact values and crashes the
    SZ3 filter)."""
    floor = float(np.finfo(array.dtype).smallest_subnormal) if np.issubdtype(array.dtype, np.floating) else 0.0
    return min(max(ref * 1e-9, floor), ref)


def search_psnr(
    array: np.ndarray,
    target_db: float,
    compress: Callable[[float], Compressed],
    decompress: Callable[[Compressed], np.ndarray],
    *,
    window_db: float = PSNR_WINDOW_DB,
    max_trials: int = PSNR_MAX_TRIALS,
    control: AbsControl = AbsControl(),
    side_nbytes: int = 0,
) -> SearchOutcome:
    """The abs bound whose PSNR lands in [target, target + window_db]: from the
    uniform-error bound, bracketed then narrowed in log space (module section notes).
    At most ``max_trials`` compress+decompress calls. ``side_nbytes``: bytes stored beside
    the stream (counted in each trial's ratio)."""
    lo, hi = finite_extremes(array)
    if hi <= lo:
        raise InputError("psnr mode needs a non-constant field: the value range R is 0, so PSNR is undefined")
    ref = min(range_times(1.0, lo, hi), FLOAT64_MAX)
    # psnr_initial_bound without forming R (which may exceed float64); the bound of a
    # target below ~5 dB could still exceed it: capped (a tighter start is safe).
    first = min(range_times(math.sqrt(3.0) * 10 ** (-target_db / 20), lo, hi), FLOAT64_MAX)
    window = (float(target_db), float(target_db) + window_db)
    trials: list[tuple[float, float]] = []
    points: list[tuple[float, float, float | None]] = []
    chosen = _Chosen(window, log_metric=False)

    def run(eb: float) -> float:
        packed = compress(eb)
        recon = decompress(packed)
        try:
            got = psnr(array, recon)  # the record's definition: the search and the verdict agree
        except InputError:  # nothing finite came back: the codec's failure, not bad input
            got = -math.inf
        trials.append((eb, got))
        points.append((eb, array.nbytes / (packed.nbytes + side_nbytes), got))
        chosen.offer(eb, got, packed, recon)
        return got

    stop = _steer(first, run, window, rising=False, log_metric=False, slope=_DB_PER_E_FOLD,
                  floor=min(_bound_floor(array, ref), first), ceil=max(first, ref), budget=max_trials,
                  control=control)
    assert chosen.best is not None
    _, eb, got, packed, recon = chosen.best
    below, above = _closest(trials, window)
    return SearchOutcome(eb, got, float(target_db), len(trials), got >= target_db, trials, packed, recon,
                         metric="psnr", tolerance=window_db, window=window, closest_below=below,
                         closest_above=above, too_coarse=stop == "too_coarse", stop=stop, max_trials=max_trials,
                         points=points)


def search_ratio(
    array: np.ndarray,
    target_ratio: float,
    compress: Callable[[float], Compressed],
    *,
    side_nbytes: int = 0,
    tolerance: float = RATIO_TOLERANCE,
    max_iter: int = RATIO_MAX_ITER,
    control: AbsControl = AbsControl(),
) -> SearchOutcome:
    """The abs bound whose ratio lands within ``tolerance`` (relative) of the target,
    FRaZ-style: bracketed from 1e-3 of the range within [1e-9 R, R], then narrowed in log
    space. At most ``max_iter`` compress calls."""
    lo_v, hi_v = finite_extremes(array)
    # The bracket's top is R (capped at float64's largest value when R exceeds it).
    ref = min(range_times(1.0, lo_v, hi_v), FLOAT64_MAX) if hi_v > lo_v else rel_reference(array)[0]
    floor = _bound_floor(array, ref)
    window = (target_ratio * (1 - tolerance), target_ratio * (1 + tolerance))
    trials: list[tuple[float, float]] = []
    points: list[tuple[float, float, float | None]] = []
    chosen = _Chosen(window, log_metric=True)

    def run(eb: float) -> float:
        packed = compress(eb)
        got = array.nbytes / (packed.nbytes + side_nbytes)
        trials.append((eb, got))
        points.append((eb, got, None))
        chosen.offer(eb, got, packed, None)
        return got

    # ratio grows roughly as the bound's square root over the range that matters
    stop = _steer(max(ref * 1e-3, floor), run, window, rising=True, log_metric=True, slope=0.5,
                  floor=floor, ceil=ref, budget=max_iter, control=control)
    assert chosen.best is not None
    _, eb, got, packed, _ = chosen.best
    below, above = _closest(trials, window)
    return SearchOutcome(eb, got, target_ratio, len(trials), window[0] <= got <= window[1], trials, packed, None,
                         metric="ratio", tolerance=tolerance, window=window, closest_below=below,
                         closest_above=above, too_coarse=stop == "too_coarse", stop=stop, max_trials=max_iter,
                         points=points)
