"""The metric pass's compiled kernels: pass A, pass B and the SSIM tile, in numba.

The kernels only; :mod:`perfscout.analysis.stream_compiled` drives them (chunks, tiles,
threads, the reduction in order) and states what they compute and how exactly.
They run in one of two forms, the same machine code either way:

- numba's JIT dispatchers (this module's functions), cached on disk by numba;
- compiled ahead of time into a shared library (:mod:`perfscout.analysis.stream_native`:
  the same functions, wrapped as C-callable ``cfunc``s), which a process loads with
  ctypes without importing numba or LLVM. Why: numba's import and its kernel load
  keep ~50 MiB of anonymous pages resident and take ~0.5 s (1-2 s on a busy 2-core
  machine), and an isolated evaluation's forked child starts with whatever its caller
  holds (benchmarks/isolation_fresh.py).

Bound kinds of :func:`pass_a_kernel`'s count of elements beyond a bound: 0 none, 1 an
absolute bound (|e| >= bound), 2 a point-wise relative one (|e| >= bound * |x|).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

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
#: A float64 sum that may see a NaN (an SSIM window whose formula degenerates):
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
def pass_a_kernel(x: Any, y: Any, bound_kind: int, bound: float) -> tuple:
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
def beyond_kernel(x: Any, y: Any, bound_kind: int, bound: float, cand: Any) -> int:
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
    # truncation = floor here (t >= -1 ulp); to int32 (bins < 2^31), a conversion AVX2 has in
    # vector form, where int64 took four scalar ones per vector of four
    return e, b, dx, r_bits, np.int32(min(t, top))


@_jit_sums
def pass_b_kernel(x: Any, y: Any, kx: float, ky: float, ke: float, binned: bool, sc: float, half: int,
                   idx: Any) -> tuple:
    """One chunk of pass B's arithmetic (see stream_fast.fast_point_stats): the counts,
    the bit pattern of max |e / x|, the shifted sums and the lag-1 sum inside the
    chunk, its first and last b; the fine-bin indices go to ``idx`` (for
    :func:`scatter_kernel`)."""
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
def scatter_kernel(x: Any, y: Any, idx: Any, per_coarse: int, edges: Any, fine: Any) -> None:
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


# -- SSIM ----------------------------------------------------------------------------------


@_jit
def _box_flat(src: Any, dst: Any, w: int, n: int) -> None:
    """dst[f] = src[f] + src[f + 1] + ... + src[f + w - 1] (added in that order), f < n:
    window sums along the last axis of a flat C-order block. One long loop: the windows
    that straddle a row end are computed too and never read (as stream_fast's flat sums)."""
    # Shifted views, indexed from 0: a runtime offset inside the index would make numba
    # guard each load against negative indices, and the loop would not vectorise.
    if w == 7:
        a1, a2, a3, a4, a5, a6 = src[1:], src[2:], src[3:], src[4:], src[5:], src[6:]
        for f in range(n):
            dst[f] = src[f] + a1[f] + a2[f] + a3[f] + a4[f] + a5[f] + a6[f]
        return
    for f in range(n):
        dst[f] = src[f]
    for q in range(1, w):
        a = src[q:]
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
    plane (re-summed from the ring every _RESUM_PLANES planes, so rounding cannot build
    up with the tile's length)."""
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
def _box_rows_slide(src: Any, dst: Any, w: int, c_in: int, b_out: int) -> None:
    """dst[jo * c_in + c] = the sum of src over rows jo .. jo + w - 1 at column c (rows of
    ``c_in``, ``b_out`` output rows): the first output row summed, each next one slid by a
    row (added, left row subtracted; float64: the rounding of a few dozen slides stays
    far below the stated tolerance). Each row is one loop over its columns (vectorised)."""
    d0 = dst[:c_in]
    a = src[:c_in]
    for f in range(c_in):
        d0[f] = a[f]
    for q in range(1, w):
        a = src[q * c_in : (q + 1) * c_in]
        for f in range(c_in):
            d0[f] += a[f]
    for jo in range(1, b_out):
        prev = dst[(jo - 1) * c_in : jo * c_in]
        cur = dst[jo * c_in : (jo + 1) * c_in]
        entering = src[(jo + w - 1) * c_in : (jo + w) * c_in]
        leaving = src[(jo - 1) * c_in : jo * c_in]
        for f in range(c_in):
            cur[f] = prev[f] + (entering[f] - leaving[f])


@_jit
def _maps_row(xr: Any, yr: Any, t: float, maps: Any, at: int) -> None:
    """The four float64 maps of one run of elements, into maps[:, at:]: x - t, d = y - x
    (exact for float32 data), d^2 and (x - t + d)(x - t) (so that Sq = 2 Sp + Sdd gives
    the sum of (x - t)^2 + (y - t)^2)."""
    m0, m1, m2, m3 = maps[0, at:], maps[1, at:], maps[2, at:], maps[3, at:]
    for i in range(xr.size):
        xv = np.float64(xr[i])
        xs = xv - t
        d = np.float64(yr[i]) - xv
        m0[i] = xs
        m1[i] = d
        m2[i] = d * d
        m3[i] = (xs + d) * xs


@_jit
def ssim_tile_kernel(x: Any, y: Any, lo0: int, hi0: int, lo1: int, hi1: int, lo2: int, hi2: int,
                      w0: int, w1: int, w2: int, n_win: int, c1n: float, c2n: float,
                      maps: Any, rows: Any, ring: Any, s: Any, diss: Any) -> float:
    """sum(1 - SSIM_w) over the windows of one tile (input box [lo, hi) per axis of the
    3-D ``x``/``y``, halo included): stream_fast.fast_ssim's formula on the error, per
    window, in float64 window sums centred on the tile's first value. Plane by plane
    along axis 0: a plane's four maps are summed along axis 2 (flat loops over the
    plane's block), then along axis 1 (row by row, slid), into a ring of the last ``w0``
    planes, whose sum is the windows' sums."""
    b_in = hi1 - lo1
    c_in = hi2 - lo2
    b_out = b_in - w1 + 1
    c_out = c_in - w2 + 1
    n_rows = b_in * c_in - (w2 - 1)  # flat window sums along axis 2
    n_cols = b_out * c_in - (w2 - 1)  # every valid window of the block's output rows
    t = np.float64(x[lo0, lo1, lo2])  # centre on a value of this tile: small local moments
    n_f = np.float64(n_win)
    two_n = 2.0 * n_f
    centre = t * n_f
    whole_rows = lo2 == 0 and hi2 == x.shape[2]  # the block's rows are contiguous in x
    slots = ring.shape[0]  # w0 + 1
    resum = _RESUM_PLANES
    total = 0.0
    for k in range(hi0 - lo0):
        if whole_rows:
            _maps_row(x[lo0 + k, lo1:hi1].reshape(-1), y[lo0 + k, lo1:hi1].reshape(-1), t, maps, 0)
        else:
            for j in range(b_in):
                _maps_row(x[lo0 + k, lo1 + j, lo2:hi2], y[lo0 + k, lo1 + j, lo2:hi2], t, maps, j * c_in)
        slot = k % slots  # the ring holds this plane's sums and the w0 planes before it
        for m in range(4):
            _box_flat(maps[m], rows[m], w2, n_rows)
            _box_rows_slide(rows[m], ring[slot, m], w1, c_in, b_out)
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
            # stream_fast.fast_ssim's formula, in window sums (S):
            #   N(N-1) var d = N Sdd - Sd^2, N(N-1) B = N Sq - Sx^2 - Sy^2 + N(N-1) C2,
            #   N^2 A = (Sx + N t)^2 + (Sy + N t)^2 + N^2 C1.
            a_x = sx[f]
            a_d = sd[f]
            sd2 = a_d * a_d
            a_y = a_x + a_d
            t2 = 0.0
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
            diss[f] = t1 + t2 - t1 * t2  # 1 - SSIM_w = t1 + t2 - t1 t2
        for jo in range(b_out):  # the valid windows of each output row
            total += _sum_f64(diss, jo * c_in, jo * c_in + c_out)
    return total


#: Along axis 0 the window sums move by one plane (added, left plane subtracted) and are
#: summed again from the ring every this many output planes.
_RESUM_PLANES = 8
