"""The streaming metric pass's fast path: two fused passes over chunks for the common case.

The common case is what every bounded lossy codec returns for a field without NaN/Inf:
both arrays finite and their magnitudes inside [2^-200, 2^200], so no rescale is needed
(see :mod:`perfscout.analysis.metrics`). Then the point statistics need two reads of
the pair instead of three, and each read does the least work per element:

- pass A, in the data's own dtype: min/max of x and y (finite min and max prove the
  chunk finite: NaN propagates through both, an infinity shows in one; x's are skipped
  when the caller already has them, the range a ``rel`` bound was resolved with); e = y - x
  in float64 (exact for float32 inputs, the oracle's rounding for float64), its min/max;
  the worst |e|'s first index from the one chunk that holds the maximum. A
  :class:`ChunkWatch` rides along: the bound check of :mod:`perfscout.tools.bounds`
  (``verify_and_measure``) reads its verdict off these chunks, so the pair is not read
  again for it;
- pass B, with pass A's max|e| known: e again, the fine error histogram by one multiply
  and ``bincount`` (elements next to a coarse edge are re-binned by the oracle's own edge
  comparison, so the 16-bin histogram stays identical), the point-wise ratio, and the
  moments of x, y and e as dot products of values shifted by the first chunk's means
  (shifted-data sums: no second centring pass, no cancellation when the mean dwarfs the
  spread).

Both passes and SSIM (:func:`fast_ssim`, float64 window sums, tile by tile with each tile's halo)
run their chunks/tiles on a thread pool (:mod:`perfscout.analysis.tile_pool`; NumPy
releases the GIL in its loops) and reduce the partial results in chunk/tile order: the
figures are the same, bit for bit, for any number of threads. Every temporary of a
pass is one of a few chunk buffers allocated once per thread (a fresh 2 MiB array per
operation costs page faults, measured 1.7x slower per operation on this VM).

:func:`fast_point_stats` returns None when the case is not the common one; the caller
then runs the general passes (:mod:`perfscout.analysis.streaming`, one thread), which
handle non-finite elements and rescaling. Both agree with the whole-array oracle within
the tolerances stated there.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from perfscout.analysis import metric_defs as M
from perfscout.analysis.stream_records import _Scan, _Spread, _Sums
from perfscout.analysis.tile_pool import map_ordered
from perfscout.analysis.xp import to_float


def _dot(xp: ModuleType, a: Any, b: Any) -> float:
    """sum(a * b) without a temporary. NumPy: einsum, not BLAS dot, whose worker threads
    spin on a loaded machine (measured 10x the CPU time of einsum per 256 Ki chunk)."""
    if xp is np:
        return float(np.einsum("i,i->", a, b))
    return to_float(xp.dot(a, b))


@dataclass
class ChunkView:
    """One flat chunk as pass A sees it, handed to a :class:`ChunkWatch`."""

    start: int  # flat (C-order) index of the chunk's first element
    x: Any  # the original's chunk, its own dtype
    y: Any  # the reconstruction's chunk
    e: Any  # y - x in float64: a buffer of the pass, valid only during the call
    x_min: float
    x_max: float
    e_min: float
    e_max: float


class ChunkWatch(Protocol):
    """Work that rides along pass A (the bound check of :mod:`perfscout.tools.bounds`):
    ``chunk`` sees every chunk, possibly on several threads at once (so it must not
    mutate shared state: it returns its partial result); ``finish`` gets the partials in
    chunk order with the pass's max |e| and its first flat index, once pass A has read
    every chunk (never when it stopped at a non-finite element: then the caller's own
    general path must do the work)."""

    def chunk(self, view: ChunkView) -> Any: ...

    def finish(self, partials: list[Any], max_abs: float, max_flat: int) -> None: ...


def _per_thread(factory: Any) -> Any:
    """A getter of this thread's own ``factory()`` value, made on the thread's first call:
    chunk buffers allocated once per thread (a fresh 2 MiB array per operation costs
    page faults: 1.7x slower per operation on this VM)."""
    local = threading.local()

    def get() -> Any:
        value = getattr(local, "value", None)
        if value is None:
            value = local.value = factory()
        return value

    return get


def _pass_a(xp: ModuleType, x: Any, y: Any, step: int, scan: _Scan, sums: _Sums,
            threads: int, watch: ChunkWatch | None, x_extremes: tuple[float, float] | None = None) -> bool:
    """Ranges, finiteness, the error's extremes and the worst index; False on a
    non-finite element. Chunks on ``threads`` threads, reduced in chunk order. With
    ``x_extremes`` (x known finite, its min and max) x's are not read again: a chunk's
    view then has x_min = -inf, x_max = inf (nothing known of the chunk alone)."""
    n_total = scan.n_total
    known_x = x_extremes is not None
    buffers = _per_thread(lambda: xp.empty(step, dtype=xp.float64))

    def one(i0: int) -> tuple[Any, ...] | None:
        xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
        m = int(xc.size)
        lo_x, hi_x = (-math.inf, math.inf) if known_x else (to_float(xc.min()), to_float(xc.max()))
        lo_y, hi_y = to_float(yc.min()), to_float(yc.max())
        if not (math.isfinite(lo_y) and math.isfinite(hi_y) and (known_x or (math.isfinite(lo_x) and math.isfinite(hi_x)))):
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            e = xp.subtract(yc, xc, out=buffers()[:m], dtype=xp.float64)
        lo_e, hi_e = to_float(e.min()), to_float(e.max())
        if not (math.isfinite(lo_e) and math.isfinite(hi_e)):
            return None  # float64 overflow near its limits: the general pass rescales
        part = None if watch is None else watch.chunk(ChunkView(i0, xc, yc, e, lo_x, hi_x, lo_e, hi_e))
        return lo_x, hi_x, lo_y, hi_y, lo_e, hi_e, part

    results = map_ordered(one, range(0, n_total, step), threads)
    if any(r is None for r in results):
        return False
    worst_chunk = -1
    if known_x:
        scan.x_min, scan.x_max = (float(v) for v in x_extremes)  # type: ignore[union-attr]
    for k, (lo_x, hi_x, lo_y, hi_y, lo_e, hi_e, _) in enumerate(results):
        if not known_x:
            scan.x_min, scan.x_max = min(scan.x_min, lo_x), max(scan.x_max, hi_x)
        scan.y_min, scan.y_max = min(scan.y_min, lo_y), max(scan.y_max, hi_y)
        sums.e_min, sums.e_max = min(sums.e_min, lo_e), max(sums.e_max, hi_e)
        worst = max(-lo_e, hi_e)
        if worst > sums.max_abs:  # the first chunk that holds the largest |e|
            sums.max_abs, worst_chunk = worst, k
    if worst_chunk >= 0:  # its first largest element (every error 0: index 0)
        i0 = worst_chunk * step
        xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
        e = xp.subtract(yc, xc, out=buffers()[: int(xc.size)], dtype=xp.float64)
        sums.max_flat = i0 + int(xp.argmax(xp.abs(e, out=e)))
    if watch is not None:
        watch.finish([r[6] for r in results], sums.max_abs, sums.max_flat)
    return True


def _fine_bins(xp: ModuleType, e: Any, sc: float, half: int, tbuf: Any, ibuf: Any,
               coarse_edges: Any, per_coarse: int, nbuf: Any = None) -> Any:
    """Fine-bin indices of ``e``: floor(e * sc + half), clipped; elements whose fine bin
    touches a coarse edge are moved to the coarse bin numpy.histogram would give them.
    ``nbuf``: a uint16 buffer (fine bins <= 2^16) for the edge test, which then reads a
    quarter of the bytes."""
    m = int(e.size)
    t = xp.multiply(e, sc, out=tbuf[:m])
    t += half  # exact zeros land on `half` exactly: the first bin of [0, width)
    # max |e| lands on 2 half: the last bin; t >= -1 ulp truncates to 0, the first.
    xp.minimum(t, 2 * half - 1, out=t)
    idx = ibuf[:m]
    xp.copyto(idx, t, casting="unsafe")  # truncation = floor here (t >= -1 ulp)
    # A fine bin's index is within one of a coarse edge's multiple of per_coarse only
    # for the bins on either side of that edge.
    if nbuf is not None and 2 * half <= 1 << 16:
        near = nbuf[:m]
        xp.copyto(near, t, casting="unsafe")  # the same truncation, in uint16
        near += 1  # 65535 + 1 wraps to 0: the multiple 2^16, as in int64
        near &= per_coarse - 1
    else:
        near = (idx + 1) & (per_coarse - 1)
    cand = xp.flatnonzero(near <= 1)
    if int(cand.size):
        coarse = xp.searchsorted(coarse_edges, e[cand], side="right") - 1
        coarse = xp.clip(coarse, 0, int(coarse_edges.size) - 2)
        have = idx[cand] // per_coarse
        low = coarse < have  # the oracle puts it below the edge: the last fine bin there
        high = coarse > have
        if bool(xp.any(low)) or bool(xp.any(high)):
            fixed = xp.where(low, coarse * per_coarse + per_coarse - 1,
                             xp.where(high, coarse * per_coarse, idx[cand]))
            idx[cand] = fixed
    return idx


@dataclass
class PassBPlan:
    """What pass B needs once pass A has read every chunk (:func:`plan_pass_b`)."""

    spread: _Spread
    binned: bool  # the fine histogram is taken (max |e| > 0)
    edges: np.ndarray  # the oracle's coarse edges in e's units (zeros when not binned)
    per_coarse: int  # fine bins per coarse bin
    half: int  # fine bins on each side of 0
    sc: float  # fine bins per unit of e
    kx: float  # the shifts: the first chunk's means of x, y and e = y - x
    ky: float
    ke: float


def plan_pass_b(xp: ModuleType, x: Any, y: Any, step: int, scan: _Scan, sums: _Sums,
                fine_bins: int) -> PassBPlan | None:
    """The step between the passes, shared by this module and :mod:`.stream_compiled`:
    the peak magnitude (None when it needs the general pass's rescale, or when max |e| is
    a few subnormals whose edges the general pass bins rescaled), the fine histogram's
    scale and the oracle's coarse edges, and the shifts of the shifted-data sums (the
    first chunk's means: close to the field's, known before the chunks run)."""
    scan.peak = max(abs(scan.x_min), abs(scan.x_max), abs(scan.y_min), abs(scan.y_max))
    if scan.peak != 0 and not (2.0**-M._SAFE_EXP2 <= scan.peak <= 2.0**M._SAFE_EXP2):
        return None
    sums.any_nonzero_x = not (scan.x_min == 0 and scan.x_max == 0)
    spread = _Spread()
    peak_e = sums.max_abs
    if 0 < peak_e < 2.0**-900:
        return None
    binned = peak_e > 0
    edges = np.zeros(M.ERR_HIST_BINS + 1)
    per_coarse = half = 0
    sc = 0.0
    if binned:
        spread.fine_j = -math.frexp(peak_e)[1]
        spread.fine_top = math.ldexp(peak_e, spread.fine_j)
        top = spread.fine_top  # the oracle's coarse edges, in e's units (scaling by 2**-j is exact)
        edges = np.ldexp(np.linspace(-top, top, M.ERR_HIST_BINS + 1), -spread.fine_j)
        per_coarse = fine_bins // M.ERR_HIST_BINS
        half = fine_bins // 2
        sc = half / peak_e
    x0 = x[:step]
    m0 = int(x0.size)
    kx = to_float(xp.sum(x0, dtype=xp.float64)) / m0
    ky = to_float(xp.sum(y[:step], dtype=xp.float64)) / m0
    ke = to_float(xp.sum(xp.subtract(y[:step], x0, dtype=xp.float64))) / m0
    return PassBPlan(spread, binned, edges, per_coarse, half, sc, kx, ky, ke)


def fast_point_stats(xp: ModuleType, x: Any, y: Any, shape: tuple[int, ...], step: int,
                     fine_bins: int, *, threads: int = 1, watch: ChunkWatch | None = None,
                     x_extremes: tuple[float, float] | None = None) -> tuple[_Scan, _Sums, _Spread] | None:
    """Pass A and pass B over flat C-order ``x``/``y``; None when the general passes
    are needed (a non-finite element, or magnitudes that need the rescale). The chunks
    run on ``threads`` threads (NumPy only) and are reduced in chunk order: the same
    figures, bit for bit, whatever the thread count. ``watch`` rides along pass A.
    ``x_extremes``: x's min and max when every element of x is known finite (not re-read)."""
    n_total = int(x.size)
    scan = _Scan(shape=shape, n_total=n_total, n_valid=n_total)
    sums = _Sums()
    step = max(1, min(step, n_total))
    threads = threads if xp is np else 1  # a GPU runs one stream of kernels
    if x_extremes is not None and not all(map(math.isfinite, x_extremes)):
        x_extremes = None  # only finite extremes prove a finite x
    if not _pass_a(xp, x, y, step, scan, sums, threads, watch, x_extremes):
        return None
    plan = plan_pass_b(xp, x, y, step, scan, sums, fine_bins)
    if plan is None:
        return None
    spread, binned = plan.spread, plan.binned
    coarse_edges = xp.asarray(plan.edges) if binned else None
    per_coarse, half, sc = plan.per_coarse, plan.half, plan.sc
    kx, ky, ke = plan.kx, plan.ky, plan.ke
    histograms: list[Any] = []  # one fine histogram per thread

    class _Bufs:
        def __init__(self) -> None:
            self.e, self.t, self.d = (xp.empty(step, dtype=xp.float64) for _ in range(3))
            self.i = xp.empty(step, dtype=xp.int64) if binned else None
            self.n = xp.empty(step, dtype=xp.uint16) if binned else None
            self.b = xp.empty(step, dtype=bool)
            self.fine = xp.zeros(fine_bins, dtype=xp.int64) if binned else None
            if binned:
                histograms.append(self.fine)  # list.append is atomic

    buffers = _per_thread(_Bufs)
    any_nonzero_x = sums.any_nonzero_x

    def one(i0: int) -> tuple[Any, ...]:
        xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
        m = int(xc.size)
        bufs = buffers()
        e = xp.subtract(yc, xc, out=bufs.e[:m], dtype=xp.float64)
        zero_e = int(xp.count_nonzero(xp.equal(xc, yc, out=bufs.b[:m])))  # e = 0 iff x = y (finite: exact)
        d_ee = _dot(xp, e, e)
        pw, zero_changed = 0.0, 0
        if any_nonzero_x:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                r = xp.divide(e, xc, out=bufs.t[:m])
            lo, hi = to_float(r.min()), to_float(r.max())
            if not (math.isfinite(lo) and math.isfinite(hi)):
                # x = 0 somewhere (0/0, e/0) or a ratio past float64: as the general pass.
                zero = xc == 0
                zero_changed = int(xp.count_nonzero(zero & (yc != 0)))
                r[zero] = 0.0
                lo, hi = to_float(r.min()), to_float(r.max())
            pw = max(-lo, hi)
        else:
            zero_changed = int(xp.count_nonzero(yc))
        if binned:
            idx = _fine_bins(xp, e, sc, half, bufs.t, bufs.i, coarse_edges, per_coarse, bufs.n)
            bufs.fine += xp.bincount(idx, minlength=fine_bins)
        b = e
        b -= ke
        dx = xp.subtract(xc, kx, out=bufs.d[:m], dtype=xp.float64)
        dy = xp.subtract(yc, ky, out=bufs.t[:m], dtype=xp.float64)  # the ratios and bins are done with t
        lag = _dot(xp, b[:-1], b[1:]) if m > 1 else 0.0
        return (zero_e, d_ee, pw, zero_changed, to_float(xp.sum(dx)), to_float(xp.sum(b)),
                _dot(xp, dx, dx), _dot(xp, dx, dy), _dot(xp, b, b), lag, to_float(b[0]), to_float(b[-1]),
                to_float(xp.sum(dy)), _dot(xp, dy, dy))

    reduce_pass_b(map_ordered(one, range(0, n_total, step), threads), sums, spread, histograms if binned else [],
                  kx, ke, n_total)
    return scan, sums, spread


def reduce_pass_b(partials: Any, sums: _Sums, spread: _Spread, histograms: list[Any], kx: float, ke: float,
                  n: int, pw_value: Any = None) -> None:
    """Pass B's per-chunk partials (in chunk order: zero_e, sum e^2, max point-wise ratio,
    zero-changed count, then the shifted sums and dot products) reduced into ``sums`` and
    ``spread``, the additions in the order of the one-thread loop, and the threads' fine
    histograms summed; shared by this module and :mod:`.stream_compiled`, whose kernels
    return the same tuple (``pw_value`` turns its ratio's bit pattern into the float)."""
    s_dx = s_b = d_xx = d_xy = d_bb = d_lag = d_ee = s_dy = d_yy = 0.0
    first_b = last_b = 0.0
    prev: float | None = None
    for zero_e, ee, pw, zc, sdx, sb, dxx, dxy, dbb, lag, b0, b1, sdy, dyy in partials:
        sums.zero_e += zero_e
        d_ee += ee
        sums.max_pw = max(sums.max_pw, pw if pw_value is None else pw_value(pw))
        sums.zero_changed += zc
        s_dx += sdx
        s_b += sb
        d_xx += dxx
        d_xy += dxy
        d_bb += dbb
        d_lag += lag
        s_dy += sdy
        d_yy += dyy
        if prev is None:
            first_b = b0
        else:
            d_lag += prev * b0  # the pair that straddles the chunk seam
        prev = last_b = b1
    if histograms:  # integer counts: the sum of the threads' histograms is exact in any order
        spread.fine = histograms[0]
        for h in histograms[1:]:
            spread.fine += h
    sums.sum_x = kx * n + s_dx
    sums.sum_e = ke * n + s_b
    sums.sum_y = sums.sum_x + sums.sum_e
    sums.sum_e2 = d_ee
    c = s_b / n  # mean of b = e - ke
    see = max(0.0, d_bb - s_b * c)
    spread.see = spread.ac_den = see
    spread.ac_num = d_lag - c * (2 * s_b - first_b - last_b) + (n - 1) * c * c
    # x's and y's spreads each from their own shifted sums: y's as sxx + 2 cov(x, e) + see
    # would cancel to noise when y varies far less than x (then Pearson came out > 1).
    spread.sxx = max(0.0, d_xx - s_dx * s_dx / n)
    spread.syy = max(0.0, d_yy - s_dy * s_dy / n)
    spread.sxy = d_xy - s_dx * s_dy / n


# -- SSIM on the error, in float64 window sums -------------------------------------------------

#: The fast SSIM refuses (the general pass then runs) a reconstruction whose worst error
#: exceeds 2^SSIM_MAX_ERR_EXP2 data ranges: there a window's y can sit so far from the
#: tile's centre, against its spread and C2, that B's cancellation could eat float64's digits.
SSIM_MAX_ERR_EXP2 = 2


def ssim_takes(scan: _Scan, max_abs: float, data_range: float) -> bool:
    """Whether the fast SSIM (:func:`fast_ssim`, and the compiled tile kernel of
    :mod:`.stream_compiled`) takes this pair: a data range neither 0 nor so small that
    C1 = (K1 R)^2 leaves float64's normal range, magnitudes inside the fast path's
    [2^-200, 2^200] (no rescale), and a worst error within 2^SSIM_MAX_ERR_EXP2 data ranges."""
    return (2.0**-400 <= data_range and scan.peak <= 2.0**M._SAFE_EXP2
            and max_abs <= math.ldexp(data_range, SSIM_MAX_ERR_EXP2))


def _dot_nd(xp: ModuleType, a: Any, b: Any) -> float:
    """sum(a * b) of two float64 maps of any layout (einsum reads strided views without
    a copy and makes no temporary)."""
    if xp is np:
        sub = "abcdefghijklmnopqrstuvwxyz"[: a.ndim]
        return float(np.einsum(f"{sub},{sub}->", a, b))
    return to_float(xp.sum(a * b))


def _axis_view(a: Any, axis: int, start: int, stop: int) -> Any:
    sl = [slice(None)] * a.ndim
    sl[axis] = slice(start, stop)
    return a[tuple(sl)]


@lru_cache(maxsize=64)
def _doubling_plan(w: int) -> tuple[int, tuple[tuple[int, int], ...]]:
    """For a window of ``w``: the number of doublings (partial sums of 2^i elements for
    i <= top) and the (i, offset) pieces added to the largest one, e.g. 7 -> (2, ((1, 4), (0, 6)))."""
    top = w.bit_length() - 1
    pieces, offset = [], 1 << top
    for i in range(top - 1, -1, -1):
        if w >> i & 1:
            pieces.append((i, offset))
            offset += 1 << i
    return top, tuple(pieces)


def _box_sums_rows(a: Any, win: tuple[int, ...]) -> tuple[Any, Any]:
    """:func:`box_sums_doubling` for a caller that does element-wise work on the sums:
    ``(sums, valid)`` where ``sums`` is contiguous (on the last-axis flat path: the flat
    sums, windows straddling two rows included) and ``valid(m)`` views any array laid out
    like ``sums`` as the windows proper. Element-wise operations on a contiguous array run
    in one long loop, 3-4x faster than on the strided view (one short loop per row)."""
    w = win[-1]
    if w == 1 or not isinstance(a, np.ndarray):
        return box_sums_doubling(a, win), lambda m: m
    lead = box_sums_doubling(a, win[:-1] + (1,))
    c = np.ascontiguousarray(lead)
    flat = _last_axis_flat_raw(c, w)
    shape = c.shape[:-1] + (int(c.shape[-1]) - w + 1,)
    units = tuple(st // c.itemsize for st in c.strides)  # element strides of the row layout

    def valid(m: Any) -> Any:
        return np.lib.stride_tricks.as_strided(m, shape=shape, strides=tuple(u * m.itemsize for u in units))

    return flat, valid


def _last_axis_flat_raw(c: np.ndarray, w: int) -> np.ndarray:
    """Flat window sums of ``w`` over C-contiguous ``c`` (see :func:`_last_axis_flat`)."""
    f = c.reshape(-1)
    n = int(f.size) - w + 1
    top, pieces = _doubling_plan(w)
    parts = [f]
    for i in range(top):
        p, k = parts[i], 1 << i
        parts.append(p[: p.size - k] + p[k:])
    acc = parts[top][:n]  # top >= 1: an array of our own, added to in place
    for i, offset in pieces:
        acc += parts[i][offset : offset + n]
    return acc


def _last_axis_flat(a: np.ndarray, w: int) -> np.ndarray:
    """Window sums of ``w`` along the last axis, computed on the flattened (C-order) array:
    a few long additions instead of one short one per row (4x faster on 16x16x256 tiles),
    the same additions in the same order for every window inside a row; the windows that
    straddle two rows are computed and never looked at (the strided view skips them)."""
    c = np.ascontiguousarray(a)
    length = int(c.shape[-1])
    acc = _last_axis_flat_raw(c, w)
    # Element (..., k) of a row starting at flat r * length is acc[r * length + k], k <= length - w.
    return np.lib.stride_tricks.as_strided(acc, shape=c.shape[:-1] + (length - w + 1,), strides=c.strides)


def box_sums_doubling(a: Any, win: tuple[int, ...]) -> Any:
    """Sums over every fully contained window of shape ``win``, separable, with partial
    sums of power-of-two lengths: a 7-wide window costs 4 adds per element and axis
    instead of 6 (7 = 4 + 2 + 1: pairs, pairs of pairs, then three slices added).
    Returns a new array (a copy when every window edge is 1)."""
    out = a
    last = len(win) - 1
    for axis, w in enumerate(win):
        if w == 1:
            continue
        if axis == last and isinstance(out, np.ndarray):
            out = _last_axis_flat(out, w)
            continue
        n = int(out.shape[axis]) - w + 1
        top, pieces = _doubling_plan(w)
        parts = [out]  # parts[i]: sums of 2^i consecutive elements
        for i in range(top):
            p, k = parts[i], 1 << i
            m = int(p.shape[axis]) - k
            parts.append(_axis_view(p, axis, 0, m) + _axis_view(p, axis, k, k + m))
        acc = _axis_view(parts[top], axis, 0, n)  # top >= 1: an array of our own, added to in place
        for i, offset in pieces:
            acc += _axis_view(parts[i], axis, offset, offset + n)
        out = acc
    return out if out is not a else a.copy()  # always a new array: callers update it in place


def fast_ssim(xp: ModuleType, x: Any, y: Any, scan: _Scan, max_abs: float, data_range: float,
              tiles: Any, *, threads: int = 1) -> float | None:
    """Mean SSIM (the definition of :func:`perfscout.analysis.metrics.ssim`) written on the
    error d = y - x, in float64 window sums; None when :func:`ssim_takes` refuses the pair.

    With A = mu_x^2 + mu_y^2 + C1 and B = var x + var y + C2 (sample moments of a window)::

        SSIM_w = (A - mu_d^2)(B - var d) / (A B) = (1 - t1)(1 - t2),  t1 = mu_d^2 / A,  t2 = var d / B

    so the window's dissimilarity 1 - SSIM_w = t1 + t2 - t1 t2 comes from sums of d and d^2
    over A and B (each at least C1 or C2). The one cancellation is B's: N(N-1) var x comes
    from N Sxx - Sx^2, which loses the bits by which the window's values, seen from the
    centre t they were shifted by, exceed its spread and C2. Each tile is centred on one
    of its values, so |x - t| <= R and |y - t| <= R + max|e| <= 5R (:func:`ssim_takes`):
    that factor is at most ~2.3 (5R)^2 / (K2 R)^2 ~ 6e4, times a few dozen float64
    roundings of the sums: ~4e-10 of B at worst, below the stated 1e-8 of 1 - SSIM with
    room. Float32 sums lost up to 1.8e-4 of 1 - SSIM on a field of two plateaus a data
    range apart (tests/unit/test_metrics_streaming.py).

    ``tiles`` yields the input slices (halo included); ``x``/``y`` have the field's shape.
    """
    if not ssim_takes(scan, max_abs, data_range):
        return None
    win = tuple(min(M.SSIM_WINDOW, int(n)) for n in scan.shape)
    N = math.prod(win)
    # In window sums (S) instead of means: with Sy = Sx + Sd,
    #   N(N-1) var d = N Sdd - Sd^2,   N(N-1) B = N Sq - Sx^2 - Sy^2 + N(N-1) C2,
    #   N^2 A = (Sx + N t)^2 + (Sy + N t)^2 + N^2 C1   (t: the tile's centre),
    # sample (N-1) moments as in metrics.ssim; a one-element window has no variance (t2 = 0).
    n_f, c1n, c2n = float(N), N * N * (M.SSIM_K1 * data_range) ** 2, N * (N - 1) * (M.SSIM_K2 * data_range) ** 2
    f64 = xp.float64

    def one(sl: tuple[slice, ...]) -> tuple[float, int]:
        xt, yt = x[sl], y[sl]
        ts = float(xt[(0,) * xt.ndim])  # centre on a value of this tile: small local moments
        xs = xp.subtract(xt, ts, dtype=f64)
        d = xp.subtract(yt, xt, dtype=f64)  # exact for float32 data
        # x^2 + y^2 = 2 x y + d^2: the window sums of x y and d^2 give those of x^2 + y^2
        # (Sq = 2 Sp + Sdd), one map of products instead of two squares and a sum.
        p = xs + d
        p *= xs
        # Contiguous sums (the windows across row ends included, dropped by valid() at
        # the reductions): the element-wise work below runs in long loops.
        sx, valid = _box_sums_rows(xs, win)
        del xs
        sd, _ = _box_sums_rows(d, win)
        d *= d
        sdd, _ = _box_sums_rows(d, win)
        del d
        sq, _ = _box_sums_rows(p, win)
        del p
        sd2 = sd * sd
        sy = sx + sd
        if N > 1:
            sq *= 2 * n_f  # N Sq = 2N Sp + N Sdd
            sdd *= n_f
            sq += sdd
            sdd -= sd2  # N(N-1) var d
            sq -= sx * sx
            sq -= sy * sy
            sq += c2n  # N(N-1) B
            sdd /= sq  # t2
        del sq
        centre = ts * N
        sx += centre
        sx *= sx
        sy += centre
        sy *= sy
        sx += sy
        sx += c1n  # N^2 A
        sd2 /= sx  # t1
        # sum(1 - SSIM_w) = sum(t1 + t2 - t1 t2): three reductions, no map of the sum
        t1, t2 = valid(sd2), valid(sdd)
        total = to_float(xp.sum(t1))
        if N > 1:
            total += to_float(xp.sum(t2)) - _dot_nd(xp, t1, t2)
        return total, int(t1.size)

    total, count = 0.0, 0
    for t, c in map_ordered(one, tiles, threads if xp is np else 1):  # in tile order
        total += t
        count += c
    return 1.0 - total / count
