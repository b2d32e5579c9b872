"""The metric pass's compiled fast path: pass A, pass B and the float32 SSIM as numba kernels.

The same computation as :mod:`perfscout.analysis.stream_fast` (read that module first:
the definitions, the shifted-data sums, the fine histogram with its coarse-edge
re-binning, SSIM written on the error), with each chunk or tile done by one fused
compiled loop instead of a dozen NumPy operations over chunk buffers. NumPy's
per-operation passes over 2 MiB buffers were the floor of the NumPy fast path; here an
element is loaded once per pass and every statistic of the pass is updated from
registers.

What is identical to the NumPy fast path, bit for bit: min/max of x, y and e, the worst
|e| and its first flat index, every count (exact zeros, changed zeros, the fine and
coarse histograms), the largest point-wise ratio, and the bound check's counts and
indices. The sums (MSE, moments, Pearson, autocorrelation) are the same float64
formulas summed in another order (the compiler's vectorised order instead of einsum's),
and SSIM's window sums are float32 sums added in another order (along axis 0 a running
sum, summed afresh every 8 planes): within the tolerances :mod:`perfscout.analysis.streaming`
states against the whole-array oracle (tests/unit/test_stream_compiled.py).

Determinism: the chunks and tiles are the same whatever the thread count; they run on
:func:`perfscout.analysis.tile_pool.map_ordered` (the kernels release the GIL) and are
reduced in chunk/tile order, so every figure is the same for any number of threads.
numba's ``parallel=True`` is not used: its reductions combine in a varying order.

Compile cost: the kernels are cached on disk (``cache=True``: next to this file, or,
when the package directory is not writable, in numba's per-user cache directory; a
process that can use neither compiles them in memory each time: see :func:`_jit`).
Measured here: ~5 s to compile every kernel for float32 and float64 (once per machine
and version of this file), ~0.3 s to load them from the cache plus ~0.2 s for numba's
import, so this module is imported only by a metric pass that takes it
(:func:`perfscout.analysis.streaming.metrics_backend`: large pairs, or when asked for),
and :func:`warm` loads everything once in a process that forks tasks. Read-only inputs
are another numba specialisation: compiled (and cached) on their first use.

Scope: float32 and float64 inputs of one dtype (integers and mixed dtypes take the NumPy
fast path); any number of dimensions for the point statistics (flat chunks); SSIM on
fields of at most 3 axes longer than 1 (seen as 3-D with leading axes of length 1); a
field of more gets the NumPy float32 SSIM (:func:`perfscout.analysis.stream_fast.fast_ssim`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from perfscout.analysis import metric_defs as M
from perfscout.analysis.stream_fast import _F32_SSIM_MAX_EXP2, ChunkView, ChunkWatch, _per_thread, plan_pass_b, reduce_pass_b
from perfscout.analysis.stream_records import _Scan, _Spread, _Sums
from perfscout.analysis.tile_pool import halo_tiles, map_ordered

#: Bound kinds of pass A's count of elements beyond a bound.
_NO_BOUND, _ABS_BOUND, _PW_BOUND = 0, 1, 2


def _jit(fn: Any) -> Any:
    """``njit(cache=True, nogil=True)`` with NumPy's float division (x / 0 is inf or
    NaN, no check per division that would keep the loops from vectorising) and fast-math
    explicitly off (numba lets a callee inherit its caller's fast-math flags unless it
    sets its own: see :func:`_minus`), or without the on-disk cache when numba finds
    no writable cache directory (it raises at decoration then): the kernels still run,
    compiled in memory by each process that uses them."""
    try:
        return njit(cache=True, nogil=True, error_model="numpy", fastmath=False)(fn)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return njit(cache=False, nogil=True, error_model="numpy", fastmath=False)(fn)


def _jit_fast(flags: set[str]) -> Any:
    """:func:`_jit` with these fast-math flags. ``reassoc`` lets float sums be reassociated,
    so that they vectorise (a fixed order per compiled kernel and chunk length: the same
    for any thread count); never ``contract`` (fused multiply-adds) nor ``arcp``
    (approximate reciprocals): every element's values stay IEEE-exact, only the sums'
    order changes. A chain like (y - x) - k must go through :func:`_minus`, or
    reassociation could turn it into y - (x + k)."""

    def decorate(fn: Any) -> Any:
        try:
            return njit(cache=True, nogil=True, error_model="numpy", fastmath=flags)(fn)
        except RuntimeError:
            return njit(cache=False, nogil=True, error_model="numpy", fastmath=flags)(fn)

    return decorate


#: Pass B's arithmetic: only finite data reach it (pass A proved them finite; the fast
#: path's magnitudes keep squares and products finite), so no NaN is assumed, and the
#: signs of zeros do not matter (sums, counts, the largest ratio's magnitude).
_jit_sums = _jit_fast({"reassoc", "nnan", "nsz"})
#: A float64 sum that may see a NaN (an SSIM window whose float32 formula degenerates):
#: reassociation only, NaN propagates as in NumPy's sum.
_jit_reassoc = _jit_fast({"reassoc"})


# -- pass A --------------------------------------------------------------------------------


@intrinsic
def _bits(typingctx: Any, value: Any) -> Any:
    """The IEEE bit pattern of a float64 as an int64 (a bit cast, no conversion)."""
    if value != types.float64:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _from_bits(typingctx: Any, value: Any) -> Any:
    """The float64 whose IEEE bit pattern is this int64."""
    if value != types.int64:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


#: Pass A reads a chunk in blocks of this many elements: each block's largest |e| is an
#: integer max (vectorised); only the first block holding the chunk's largest is searched
#: for its first index.
_BLOCK = 1024
_LOW63 = (1 << 63) - 1


@_jit
def _pass_a_kernel(x: Any, y: Any, bound_kind: int, bound: float) -> tuple:
    """One chunk: (finite, min e, max e (e = y - x in float64), max |e|, its first index,
    the count of candidates beyond the bound: |e| >= bound (kind 1) or >= bound * |x|
    (kind 2), |e| > 0; the bound check decides them exactly).

    Extremes as integer reductions of the bit patterns (a float min/max reduction does
    not vectorise; for IEEE doubles ``b ^ ((b >> 63) & LOW63)`` orders as the values, and
    ``b & LOW63`` as their magnitudes, NaN above inf): the same values, bit for bit.
    Finite iff max |e| < inf (a non-finite x or y always makes e inf or NaN)."""
    n = x.size
    low = np.int64(_LOW63)
    b = _bits(np.float64(y[0]) - np.float64(x[0]))
    lo = hi = b ^ ((b >> 63) & low)
    amax = np.int64(-1)
    amax_at = 0
    beyond = 0
    for s in range(0, n, _BLOCK):
        xb = x[s : s + _BLOCK]
        yb = y[s : s + _BLOCK]
        bmax = np.int64(0)
        for i in range(xb.size):
            xv = np.float64(xb[i])
            e = np.float64(yb[i]) - xv
            b = _bits(e)
            k = b ^ ((b >> 63) & low)
            lo = k if k < lo else lo
            hi = k if k > hi else hi
            a = b & low
            bmax = a if a > bmax else bmax
            # candidates of the bound check: |e| at least the (rounded) allowance and not 0;
            # the check decides them exactly (perfscout.codecs.verify.may_exceed)
            if bound_kind == 1:
                beyond += (abs(e) >= bound) & (e != 0.0)
            elif bound_kind == 2:
                beyond += (abs(e) >= bound * abs(xv)) & (e != 0.0)
        if bmax > amax:  # the first block holding the largest |e|
            amax = bmax
            amax_at = s
    first = amax_at
    xb = x[amax_at : amax_at + _BLOCK]
    yb = y[amax_at : amax_at + _BLOCK]
    for i in range(xb.size):
        if (_bits(np.float64(yb[i]) - np.float64(xb[i])) & low) == amax:
            first = amax_at + i
            break
    finite = amax < _bits(np.inf)
    lo_e = _from_bits(lo ^ ((lo >> 63) & low))
    hi_e = _from_bits(hi ^ ((hi >> 63) & low))
    return finite, lo_e, hi_e, _from_bits(amax), first, beyond


@_jit
def _beyond_kernel(x: Any, y: Any, bound_kind: int, bound: float, cand: Any) -> int:
    """The flat indices (into ``cand``) of a chunk's candidates beyond the bound, in
    order; their count. Pass A's test, element by element: counted per block first
    (vectorised), indices gathered only in the blocks that hold any."""
    k = 0
    for s in range(0, x.size, _BLOCK):
        xb = x[s : s + _BLOCK]
        yb = y[s : s + _BLOCK]
        count = 0
        for i in range(xb.size):
            xv = np.float64(xb[i])
            a = abs(np.float64(yb[i]) - xv)
            count += ((a >= bound) if bound_kind == 1 else (a >= bound * abs(xv))) & (a != 0.0)
        if count == 0:
            continue
        for i in range(xb.size):
            xv = np.float64(xb[i])
            a = abs(np.float64(yb[i]) - xv)
            if ((a >= bound) if bound_kind == 1 else (a >= bound * abs(xv))) and a != 0.0:
                cand[k] = s + i
                k += 1
    return k


def _bound_filter(watch: ChunkWatch | None) -> tuple[int, float, bool]:
    """(bound kind, bound, whether every chunk must be shown to the watch): a watch with
    ``bounds`` (abs, pw_rel) is shown only the chunks with an element beyond its bound
    (pass A counts them: |e| > abs, or |e| > pw_rel * |x|, the check's own test), and,
    when it has ``candidates(start, x, y, indices)``, only those elements' indices
    (:func:`_beyond_kernel`) instead of the chunk's e (:class:`ChunkView`)."""
    if watch is None:
        return _NO_BOUND, 0.0, False
    bounds = getattr(watch, "bounds", None)
    if bounds is None:
        return _NO_BOUND, 0.0, True
    abs_bound, pw = bounds
    if pw is not None:
        return _PW_BOUND, float(pw), False
    if abs_bound is not None:
        return _ABS_BOUND, float(abs_bound), False
    return _NO_BOUND, 0.0, False


def _pass_a(x: Any, y: Any, step: int, scan: _Scan, sums: _Sums, threads: int, watch: ChunkWatch | None,
            x_extremes: tuple[float, float] | None) -> bool:
    """stream_fast._pass_a with the compiled chunk kernel; False on a non-finite element."""
    known_x = x_extremes is not None
    kind, bound, show_all = _bound_filter(watch)
    starts = range(0, scan.n_total, step)

    def one(i0: int) -> tuple:
        xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
        finite, lo_e, hi_e, amax, imax, beyond = _pass_a_kernel(xc, yc, kind, bound)
        if not finite:
            return (False,)
        # x's and y's extremes: NumPy's reductions (SIMD, exact; the kernel proved them finite).
        lo_x, hi_x = (-math.inf, math.inf) if known_x else (float(xc.min()), float(xc.max()))
        return True, lo_x, hi_x, float(yc.min()), float(yc.max()), lo_e, hi_e, amax, imax, beyond

    results = map_ordered(one, starts, threads)
    if not all(r[0] for r in results):
        return False
    if known_x:
        scan.x_min, scan.x_max = (float(v) for v in x_extremes)  # type: ignore[union-attr]
    worst_flat = 0
    for i0, (_, lo_x, hi_x, lo_y, hi_y, lo_e, hi_e, amax, imax, _) in zip(starts, results):
        if not known_x:
            scan.x_min, scan.x_max = min(scan.x_min, lo_x), max(scan.x_max, hi_x)
        scan.y_min, scan.y_max = min(scan.y_min, lo_y), max(scan.y_max, hi_y)
        sums.e_min, sums.e_max = min(sums.e_min, lo_e), max(sums.e_max, hi_e)
        if amax > sums.max_abs:  # the first chunk that holds the largest |e|
            sums.max_abs, worst_flat = amax, i0 + imax
    sums.max_flat = worst_flat
    if watch is not None:
        by_candidates = not show_all and hasattr(watch, "candidates")
        cand = np.empty(step if by_candidates and any(r[9] for r in results) else 0, dtype=np.int64)
        partials = []
        for i0, r in zip(starts, results):
            if not (show_all or r[9]):
                partials.append(None)  # no element of the chunk is beyond the bound
                continue
            xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
            if by_candidates:  # the watch needs only the elements beyond the bound
                k = _beyond_kernel(xc, yc, kind, bound, cand)
                partials.append(watch.candidates(i0, xc, yc, cand[:k]))  # type: ignore[attr-defined]
                continue
            e = np.subtract(yc, xc, dtype=np.float64)
            lo_x, hi_x = (-math.inf, math.inf) if known_x else (r[1], r[2])
            partials.append(watch.chunk(ChunkView(i0, xc, yc, e, lo_x, hi_x, r[5], r[6])))
        watch.finish(partials, sums.max_abs, sums.max_flat)
    return True


# -- pass B --------------------------------------------------------------------------------


@_jit
def _coarse_bin(e: float, edges: Any) -> int:
    """numpy.searchsorted(edges, e, side="right") - 1, clipped to a coarse bin."""
    c = 0
    for k in range(edges.size):
        if edges[k] <= e:
            c = k + 1
    c -= 1
    if c < 0:
        c = 0
    last = edges.size - 2
    if c > last:
        c = last
    return c


@_jit
def _minus(a: float, b: float) -> float:
    """a - b, compiled without fast-math flags: inlined into a :func:`_jit_sums` kernel
    it stays one IEEE subtraction (the reassociation allowed there must not turn
    (y - x) - k into y - (x + k), which loses e's digits to x's magnitude)."""
    return a - b


@_jit
def _plus(a: float, b: float) -> float:
    """a + b without fast-math flags (see :func:`_minus`)."""
    return a + b


@_jit_sums
def _pass_b_element(xv: float, yv: float, kx: float, ke: float, sc: float, fhalf: float, top: float) -> tuple:
    """One element of pass B: (e, b = e - ke, dx = x - kx, the bit pattern of |e / x| (0
    for x = 0: no ratio; zero_changed counts those), the fine bin)."""
    e = _minus(yv, xv)
    b = _minus(e, ke)
    dx = _minus(xv, kx)
    nonzero = xv != 0.0
    r = abs(e / (xv if nonzero else 1.0))
    # Non-negative floats order as their bit patterns: the largest ratio is an integer
    # max reduction (which vectorises where a float max does not).
    r_bits = _bits(r) if nonzero else np.int64(0)
    t = _plus(e * sc, fhalf)  # exact zeros land on `half` exactly: the first bin of [0, width)
    return e, b, dx, r_bits, np.int64(min(t, top))  # truncation = floor here (t >= -1 ulp)


@_jit_sums
def _pass_b_kernel(x: Any, y: Any, kx: float, ky: float, ke: float, binned: bool, sc: float, half: int,
                   idx: Any) -> tuple:
    """One chunk of pass B's arithmetic (see stream_fast.fast_point_stats): the counts,
    the bit pattern of max |e / x|, the shifted sums and the lag-1 sum inside the
    chunk, its first and last b; the fine-bin indices go to ``idx`` (for
    :func:`_scatter_kernel`)."""
    n = x.size
    ee = sdx = sb = dxx = dxy = dbb = lag = sdy = dyy = 0.0
    zero_e = zero_changed = 0
    pw_bits = np.int64(0)
    top = np.float64(2 * half - 1)
    fhalf = np.float64(half)
    sc = sc if binned else 0.0
    b_prev = 0.0
    for i in range(n):
        xv = np.float64(x[i])
        yv = np.float64(y[i])
        e, b, dx, r_bits, j = _pass_b_element(xv, yv, kx, ke, sc, fhalf, top)
        zero_e += xv == yv  # e = 0 iff x = y (finite: exact)
        zero_changed += (xv == 0.0) & (yv != 0.0)
        dy = _minus(yv, ky)
        ee += e * e
        sdx += dx
        sb += b
        sdy += dy
        dxx += dx * dx
        dxy += dx * dy
        dyy += dy * dy
        dbb += b * b
        pw_bits = max(pw_bits, r_bits)
        idx[i] = j
        lag += b_prev * b  # b_{i-1} b_i inside the chunk (the first term is 0 * b_0 = 0)
        b_prev = b
    first_b = _minus(_minus(np.float64(y[0]), np.float64(x[0])), ke)
    last_b = _minus(_minus(np.float64(y[n - 1]), np.float64(x[n - 1])), ke)
    return zero_e, ee, pw_bits, zero_changed, sdx, sb, dxx, dxy, dbb, lag, first_b, last_b, sdy, dyy


@_jit
def _scatter_kernel(x: Any, y: Any, idx: Any, per_coarse: int, edges: Any, fine: Any) -> None:
    """The fine histogram of one chunk from pass B's bin indices; an element whose fine
    bin touches a coarse edge is moved to the coarse bin numpy.histogram gives it."""
    mask = per_coarse - 1
    for i in range(x.size):
        j = idx[i]
        if ((j + 1) & mask) <= 1:  # a fine bin beside a coarse edge
            coarse = _coarse_bin(np.float64(y[i]) - np.float64(x[i]), edges)
            have = j // per_coarse
            if coarse < have:
                j = coarse * per_coarse + per_coarse - 1
            elif coarse > have:
                j = coarse * per_coarse
        fine[j] += 1


class _PassBBuffers:
    """One thread's scratch of pass B: the bin indices, its fine histogram."""

    def __init__(self, step: int, fine_bins: int, binned: bool, histograms: list[Any]) -> None:
        self.idx = np.empty(step, dtype=np.int32)  # fine bins < 2^31
        self.fine = np.zeros(fine_bins if binned else 1, dtype=np.int64)
        histograms.append(self.fine)  # list.append is atomic


def supported(x: Any, y: Any) -> bool:
    """Whether the compiled path takes this pair: NumPy float32/float64 arrays of one dtype."""
    return (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype
            and x.dtype in (np.float32, np.float64))


def compiled_point_stats(x: np.ndarray, y: np.ndarray, shape: tuple[int, ...], step: int, fine_bins: int, *,
                         threads: int = 1, watch: ChunkWatch | None = None,
                         x_extremes: tuple[float, float] | None = None) -> tuple[_Scan, _Sums, _Spread] | None:
    """:func:`perfscout.analysis.stream_fast.fast_point_stats` (same arguments, same
    record, None in the same cases) with the compiled chunk kernels; flat C-order
    float32 or float64 ``x``/``y`` of one dtype (:func:`supported`)."""
    n_total = int(x.size)
    scan = _Scan(shape=shape, n_total=n_total, n_valid=n_total)
    sums = _Sums()
    step = max(1, min(step, n_total))
    if x_extremes is not None and not all(map(math.isfinite, x_extremes)):
        x_extremes = None  # only finite extremes prove a finite x
    if not _pass_a(x, y, step, scan, sums, threads, watch, x_extremes):
        return None
    plan = plan_pass_b(np, x, y, step, scan, sums, fine_bins)
    if plan is None:
        return None
    spread, binned, edges = plan.spread, plan.binned, plan.edges
    per_coarse, half, sc = plan.per_coarse, plan.half, plan.sc
    kx, ky, ke = plan.kx, plan.ky, plan.ke
    histograms: list[Any] = []
    buffers = _per_thread(lambda: _PassBBuffers(step, fine_bins, binned, histograms))

    def one(i0: int) -> tuple:
        xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
        bufs = buffers()
        out = _pass_b_kernel(xc, yc, kx, ky, ke, binned, sc, half, bufs.idx)
        if binned:
            _scatter_kernel(xc, yc, bufs.idx, per_coarse, edges, bufs.fine)
        return out

    pw_bits = np.zeros(1, dtype=np.int64)

    def pw_value(pw: int) -> float:  # the kernel returns the largest ratio's bit pattern
        pw_bits[0] = pw
        return float(pw_bits.view(np.float64)[0])

    # Reduced in chunk order (the same chunks for any thread count), as stream_fast reduces.
    reduce_pass_b(map_ordered(one, range(0, n_total, step), threads), sums, spread, histograms if binned else [],
                  kx, ke, n_total, pw_value)
    if not sums.any_nonzero_x:
        sums.max_pw = 0.0
    return scan, sums, spread


# -- SSIM ----------------------------------------------------------------------------------


@_jit
def _box_flat(src: Any, dst: Any, w: int, stride: int, n: int) -> None:
    """dst[f] = src[f] + src[f + stride] + ... + src[f + (w-1) stride] (added in that
    order), f < n: window sums along one axis of a flat C-order block (``stride``: that
    axis's element stride). One long loop: the windows that straddle a row end are
    computed too and never read (as stream_fast's flat sums)."""
    # Shifted views, indexed from 0: a runtime offset inside the index would make numba
    # guard each load against negative indices, and the loop would not vectorise.
    if w == 7:
        a1, a2, a3 = src[stride:], src[2 * stride :], src[3 * stride :]
        a4, a5, a6 = src[4 * stride :], src[5 * stride :], src[6 * stride :]
        for f in range(n):
            dst[f] = src[f] + a1[f] + a2[f] + a3[f] + a4[f] + a5[f] + a6[f]
        return
    for f in range(n):
        dst[f] = src[f]
    for q in range(1, w):
        a = src[q * stride :]
        for f in range(n):
            dst[f] += a[f]


@_jit
def _box_ring(ring: Any, first: int, w: int, m: int, dst: Any, n: int) -> None:
    """dst[f] = the sum over the ring's planes first .. first + w - 1 (in plane order) of
    ring[plane % slots, m, f], f < n: the window sums along axis 0."""
    slots = ring.shape[0]
    if w == 7:
        a0, a1, a2 = ring[first % slots, m], ring[(first + 1) % slots, m], ring[(first + 2) % slots, m]
        a3, a4 = ring[(first + 3) % slots, m], ring[(first + 4) % slots, m]
        a5, a6 = ring[(first + 5) % slots, m], ring[(first + 6) % slots, m]
        for f in range(n):
            dst[f] = a0[f] + a1[f] + a2[f] + a3[f] + a4[f] + a5[f] + a6[f]
        return
    a = ring[first % slots, m]
    for f in range(n):
        dst[f] = a[f]
    for q in range(1, w):
        a = ring[(first + q) % slots, m]
        for f in range(n):
            dst[f] += a[f]


@_jit
def _slide(acc: Any, entering: Any, leaving: Any, n: int) -> None:
    """acc[f] += entering[f] - leaving[f], f < n: the window sums along axis 0 moved by one
    plane (float32; re-summed from the ring every SSIM_RESUM_PLANES planes, so rounding
    cannot build up past a direct sum's)."""
    for f in range(n):
        acc[f] += entering[f] - leaving[f]


@_jit_reassoc
def _sum_f64(a: Any, lo: int, hi: int) -> float:
    """sum(a[lo:hi]) in float64 (vectorised: a fixed order per compiled kernel)."""
    s = 0.0
    v = a[lo:hi]
    for i in range(v.size):
        s += np.float64(v[i])
    return s


@_jit
def _maps_row(xr: Any, yr: Any, ts: Any, tsd: float, scale: float, direct: bool, maps: Any, at: int) -> None:
    """The four maps of one run of elements, into maps[:, at:]: x - t, d = y - x, d^2 and
    (x - t + d)(x - t) (so that Sq = 2 Sp + Sdd gives the sum of x^2 + y^2)."""
    f32 = np.float32
    m0, m1, m2, m3 = maps[0, at:], maps[1, at:], maps[2, at:], maps[3, at:]
    if direct:  # float32 data, no scale: float32 differences, correctly rounded
        for i in range(xr.size):
            xv = xr[i]
            xs = xv - ts
            d = yr[i] - xv
            m0[i] = xs
            m1[i] = d
            m2[i] = d * d
            m3[i] = (xs + d) * xs
    else:  # differences (and the power-of-two scale) in float64, then float32
        for i in range(xr.size):
            xv = np.float64(xr[i])
            xs = f32((xv - tsd) * scale)
            d = f32((np.float64(yr[i]) - xv) * scale)
            m0[i] = xs
            m1[i] = d
            m2[i] = d * d
            m3[i] = (xs + d) * xs


@_jit
def _ssim_tile_kernel(x: Any, y: Any, lo0: int, hi0: int, lo1: int, hi1: int, lo2: int, hi2: int,
                      w0: int, w1: int, w2: int, direct: bool, scale: float, n_win: int,
                      c1n: Any, c2n: Any, maps: Any, rows: Any, ring: Any, s: Any, diss: Any) -> float:
    """sum(1 - SSIM_w) over the windows of one tile (input box [lo, hi) per axis of the
    3-D ``x``/``y``, halo included): stream_fast.fast_ssim's float32 formula on the
    error, per window. Plane by plane along axis 0: a plane's four maps are summed
    along axis 2, then along axis 1 (flat loops over the plane's block), into a ring of
    the last ``w0`` planes, whose sum is the windows' sums."""
    b_in = hi1 - lo1
    c_in = hi2 - lo2
    b_out = b_in - w1 + 1
    c_out = c_in - w2 + 1
    n_rows = b_in * c_in - (w2 - 1)  # flat window sums along axis 2
    n_cols = b_out * c_in - (w2 - 1)  # ... then along axis 1: covers every valid window
    ts = x[lo0, lo1, lo2]  # centre on a value of this tile: small local moments
    tsd = np.float64(ts)
    f32 = np.float32
    n_f = f32(n_win)
    two_n = f32(2 * n_win)
    centre = f32(tsd * scale * n_win)
    whole_rows = lo2 == 0 and hi2 == x.shape[2]  # the block's rows are contiguous in x
    slots = ring.shape[0]  # w0 + 1
    resum = _RESUM_PLANES
    total = 0.0
    for k in range(hi0 - lo0):
        if whole_rows:
            _maps_row(x[lo0 + k, lo1:hi1].reshape(-1), y[lo0 + k, lo1:hi1].reshape(-1), ts, tsd, scale, direct,
                      maps, 0)
        else:
            for j in range(b_in):
                _maps_row(x[lo0 + k, lo1 + j, lo2:hi2], y[lo0 + k, lo1 + j, lo2:hi2], ts, tsd, scale, direct,
                          maps, j * c_in)
        slot = k % slots  # the ring holds this plane's sums and the w0 planes before it
        for m in range(4):
            _box_flat(maps[m], rows[m], w2, 1, n_rows)
            _box_flat(rows[m], ring[slot, m], w1, c_in, n_cols)
        if k < w0 - 1:
            continue
        first = k - w0 + 1  # the output plane whose windows end at plane k
        for m in range(4):
            if w0 > 1 and first % resum != 0:  # one plane in, one out
                _slide(s[m], ring[slot, m], ring[(first - 1) % slots, m], n_cols)
            else:
                _box_ring(ring, first, w0, m, s[m], n_cols)
        sx, sd, sdd, sq = s[0], s[1], s[2], s[3]
        for f in range(n_cols):
            # stream_fast.fast_ssim's formula, in window sums (S), float32:
            #   N(N-1) var d = N Sdd - Sd^2, N(N-1) B = N Sq - Sx^2 - Sy^2 + N(N-1) C2,
            #   N^2 A = (Sx + N t)^2 + (Sy + N t)^2 + N^2 C1.
            a_x = sx[f]
            a_d = sd[f]
            sd2 = a_d * a_d
            a_y = a_x + a_d
            t2 = f32(0.0)
            if n_win > 1:
                ndd = sdd[f] * n_f
                den = sq[f] * two_n + ndd
                den -= a_x * a_x
                den -= a_y * a_y
                den += c2n
                t2 = (ndd - sd2) / den
            cx = a_x + centre
            cy = a_y + centre
            t1 = sd2 / (cx * cx + cy * cy + c1n)
            diss[f] = t1 + t2 - t1 * t2  # 1 - SSIM_w = t1 + t2 - t1 t2 (float32, summed in float64)
        for jo in range(b_out):  # the valid windows of each output row
            total += _sum_f64(diss, jo * c_in, jo * c_in + c_out)
    return total


#: Along axis 0 the window sums move by one plane (added, left plane subtracted) and are
#: summed again from the ring every this many output planes.
_RESUM_PLANES = 8

#: Compiled SSIM tiles (output windows per axis): rows of at most SSIM_ROW_MAX windows
#: (SSIM_ROW_MAX_1D for a 1-D field, whose one row is the field); blocks of
#: SSIM_BLOCK_ROWS input rows per plane, fewer when that exceeds SSIM_PLANE_ELEMENTS
#: elements (the four float32 maps of a ring of eight such blocks stay in a 2 MiB L2
#: cache); SSIM_TILE_PLANES output planes per tile (the halo of w0 - 1 planes is
#: recomputed once per tile). Measured on this 2-core VM (float32, 1 thread): 256^3 with
#: 31-row blocks 0.055-0.06 s (8192-element blocks), 15-row 0.078; 256x512x512 with
#: 31-row blocks (16384 elements) 0.25 s, 15-row 0.29 s; 128 planes a few % faster than 64.
SSIM_ROW_MAX = 512
SSIM_ROW_MAX_1D = 1 << 16
SSIM_BLOCK_ROWS = 32
SSIM_PLANE_ELEMENTS = 1 << 14
SSIM_TILE_PLANES = 128


def _ssim_plan(shape3: tuple[int, int, int], win: tuple[int, int, int]) -> tuple[list[int], list[int]]:
    """(output windows per axis, output windows per tile and axis) of the compiled SSIM."""
    n_out = [n - w + 1 for n, w in zip(shape3, win)]
    c_out = min(n_out[2], SSIM_ROW_MAX if shape3[1] > 1 or shape3[0] > 1 else SSIM_ROW_MAX_1D)
    c_in = c_out + win[2] - 1
    b_in = min(SSIM_BLOCK_ROWS, SSIM_PLANE_ELEMENTS // c_in)
    b_out = max(1, min(n_out[1], b_in - win[1] + 1))
    a_out = min(n_out[0], SSIM_TILE_PLANES)
    return n_out, [a_out, b_out, c_out]


def compiled_ssim(x: np.ndarray, y: np.ndarray, scan: _Scan, max_abs: float, data_range: float, *,
                  threads: int = 1) -> float | None:
    """:func:`perfscout.analysis.stream_fast.fast_ssim` (the same float32 formula on the
    error, the same refusals: None when the magnitudes do not allow float32) with the
    compiled tile kernel, for fields of 1 to 3 dimensions longer than 1 (None for more:
    the caller then runs fast_ssim). ``x``/``y``: C-contiguous, the field's shape, one float dtype."""
    # Axes of length 1 hold windows of length 1: dropping them changes no window, so a
    # field like (1, 64, 64, 64) is the 3-D field it holds.
    shape = tuple(int(n) for n in scan.shape if n != 1)
    if len(shape) > 3:
        return None
    scale = 1.0 if 2.0**-20 <= data_range <= 2.0**20 else math.ldexp(1.0, -math.frexp(data_range)[1])
    limit = 2.0**_F32_SSIM_MAX_EXP2
    if not (max_abs * scale <= limit and scan.peak * scale <= limit and data_range * scale >= 2.0**-21):
        return None
    shape3 = (1,) * (3 - len(shape)) + shape
    x3, y3 = x.reshape(shape3), y.reshape(shape3)
    win = tuple(min(M.SSIM_WINDOW, n) for n in shape3)
    N = math.prod(win)
    r_s = data_range * scale
    c1n = np.float32(N * N * (M.SSIM_K1 * r_s) ** 2)
    c2n = np.float32(N * (N - 1) * (M.SSIM_K2 * r_s) ** 2)
    direct = x.dtype == np.float32 and scale == 1.0
    n_out, tile_out = _ssim_plan(shape3, win)  # type: ignore[arg-type]
    b_in, c_in = tile_out[1] + win[1] - 1, tile_out[2] + win[2] - 1

    def make() -> tuple[Any, ...]:
        f32 = np.float32
        block_in, block_out = b_in * c_in, tile_out[1] * c_in
        return (np.empty((4, block_in), f32), np.empty((4, block_in), f32), np.empty((win[0] + 1, 4, block_out), f32),
                np.empty((4, block_out), f32), np.empty(block_out, f32))

    buffers = _per_thread(make)

    def one(sl: tuple[slice, ...]) -> tuple[float, int]:
        (s0, s1, s2) = sl
        total = _ssim_tile_kernel(x3, y3, s0.start, s0.stop, s1.start, s1.stop, s2.start, s2.stop,
                                  win[0], win[1], win[2], direct, scale, N, c1n, c2n, *buffers())
        count = (s0.stop - s0.start - win[0] + 1) * (s1.stop - s1.start - win[1] + 1) * (s2.stop - s2.start - win[2] + 1)
        return total, count

    total, count = 0.0, 0
    for t, c in map_ordered(one, halo_tiles(n_out, tile_out, win), threads):  # in tile order
        total += t
        count += c
    return 1.0 - total / count


def warm() -> None:
    """Compile (or load from the on-disk cache) every kernel for float32 and float64 on a
    tiny pair: a process that forks tasks (the sweep's forkserver) pays it once."""
    for dtype in (np.float32, np.float64):
        x = np.linspace(1.0, 2.0, 8 * 9 * 10, dtype=dtype).reshape(8, 9, 10)
        y = (x + dtype(1e-3)).astype(dtype)
        xf, yf = x.reshape(-1), y.reshape(-1)
        _beyond_kernel(xf, yf, _ABS_BOUND, 0.0, np.empty(xf.size, dtype=np.int64))  # the bound check's
        got = compiled_point_stats(xf, yf, x.shape, 1 << 18, M.ERR_HIST_BINS * 4096)
        if got is not None:
            scan, sums, _ = got
            compiled_ssim(x, y, scan, sums.max_abs, scan.x_max - scan.x_min)
            compiled_ssim(x, y, scan, sums.max_abs, (scan.x_max - scan.x_min) * 2.0**30)  # the scaled variant
