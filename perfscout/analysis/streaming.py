"""Quality metrics in a few streaming passes over chunks, never over whole-array temporaries.

:func:`stream_quality_metrics` computes what :func:`perfscout.analysis.metrics.quality_metrics`
reports (same keys, same definitions: see that module's notes on non-finite elements and
extreme magnitudes) while holding, besides the two inputs, only chunk-sized float64
temporaries. Memory is therefore the inputs plus a few MiB, whatever the field's size.

Passes over flat chunks of ``STREAM_CHUNK_ELEMENTS`` (C order; sized for the L2 cache):

1. in the data's own dtype (float32 stays float32: min, max, abs and isfinite are exact
   there): finiteness bookkeeping, the value range, the magnitude that decides the
   power-of-two rescale;
2. in float64, scaled: max |e| and its first index, sums for the means and the MSE,
   min/max e, the point-wise relative error, exact-zero counts;
3. in float64, centred on pass 2's means: variances and covariance (Pearson, SNR, the
   error's std), the lag-1 autocorrelation (carrying one element across chunk seams),
   and a fine error histogram of ``FINE_HIST_BINS`` bins;

then SSIM over N-D tiles of about ``SSIM_TILE_ELEMENTS`` with the ``window - 1`` halo
each tile needs (tiles split every axis but the last, so halos stay a small share).

Agreement with the whole-array definitions (the oracle kept in the tests):

- max errors, their index, R, counts, the 16-bin histogram: identical (the fine bins
  refine the coarse ones exactly: both edge sets come from the same power-of-two
  subdivision of [-peak, peak]);
- sums (MSE, PSNR, SNR, NRMSE, Pearson, autocorrelation; SSIM on this general path): the
  same formulas summed in a different order, relative differences of order 1e-12;
- error quantiles other than 0 and 1 (which are the exact min/max): from the fine
  histogram, within one fine bin, ``2 * max|e| / FINE_HIST_BINS``, of ``numpy.quantile``.

The common case (both arrays finite, no rescale needed) takes the fused fast path of
:mod:`perfscout.analysis.stream_fast` instead: two passes for the point statistics and
SSIM written on the error in float64 window sums, within 1e-8 of the dissimilarity
1 - SSIM (the passes above stay for NaN/Inf and extreme magnitudes, and SSIM of a
reconstruction more than four data ranges off).

For NumPy arrays of float32 or float64 of at least ``COMPILED_MIN_ELEMENTS`` that path
runs as compiled kernels (:mod:`perfscout.analysis.stream_compiled`, numba's: the same
definitions, about 4x less CPU; compiled ahead of time into a library that loads without
numba, :mod:`perfscout.analysis.stream_native`, or numba's JIT where that library cannot
be built) when numba or that library is there; ``$PERFSCOUT_METRICS_BACKEND``
(``numba``/``numpy``) overrides the size rule. CuPy arrays, integer or mixed dtypes and
smaller pairs take the NumPy code of stream_fast.

The fast path runs on every core this process may use, or on the ``threads`` it is given
(:mod:`perfscout.analysis.tile_pool`), with the same result for any thread count; it
also carries the bound check when :func:`perfscout.tools.bounds.verify_and_measure` asks
(``watch``), so evaluate reads the pair for its verdict and its metrics in one pass.

The same code runs on CuPy arrays (:mod:`perfscout.analysis.xp`), with larger chunks:
a GPU codec's output is verified on the device; only scalars come back.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import os
from types import ModuleType
from typing import Any

import numpy as np

from perfscout.analysis import metric_defs as M
from perfscout.analysis.stream_fast import ChunkWatch, fast_point_stats, fast_ssim
from perfscout.analysis.stream_records import _Scan, _Spread, _Sums
from perfscout.analysis.tile_pool import halo_tiles, resolve_threads
from perfscout.analysis.xp import get_namespace, to_float
from perfscout.errors import InputError

#: Flat chunk of the point statistics: 256 Ki elements, 2 MiB per float64 temporary
#: (a handful of them stay in a 4 MiB L2 cache).
STREAM_CHUNK_ELEMENTS = 1 << 18
#: On a GPU one kernel launch per operation per chunk is the cost: use big chunks
#: (16 Mi elements: about a dozen float64 temporaries of 128 MiB, ~1.5 GiB in all).
GPU_CHUNK_ELEMENTS = 1 << 24
#: SSIM tile (input elements, halo included): 40^3, about ten float64 window maps of
#: this size at once (~5 MiB). Smaller tiles measured faster on 256^3 than larger ones
#: with a smaller halo share: the maps stay in the L2 cache.
SSIM_TILE_ELEMENTS = 1 << 16
GPU_SSIM_TILE_ELEMENTS = 1 << 24
#: The fast SSIM (stream_fast.fast_ssim) keeps about six float64 maps of a tile (~6 MiB;
#: the same bytes as the float32 maps of 2^17-element tiles it kept before).
SSIM_FAST_TILE_ELEMENTS = 1 << 16
#: Fine error histogram behind the quantiles: a multiple of ERR_HIST_BINS (the coarse
#: histogram is its exact aggregate) and a power of two (edges nest exactly).
FINE_HIST_BINS = M.ERR_HIST_BINS * 4096


def _inputs(original: Any, reconstructed: Any) -> tuple[ModuleType, Any, Any]:
    xp = get_namespace(original, reconstructed)
    x = xp.asarray(original)
    y = xp.asarray(reconstructed)
    if x.shape != y.shape:
        raise InputError(
            f"original and reconstruction differ in shape: {tuple(x.shape)} vs {tuple(y.shape)}"
        )
    if x.ndim == 0:
        raise InputError("metrics need an array with at least one dimension, got a 0-d scalar")
    if x.size == 0:
        raise InputError(f"metrics need a non-empty array, got shape {tuple(x.shape)}")
    # Flat chunks are views only of C-contiguous arrays (a strided one is copied once).
    return xp, xp.ascontiguousarray(x).reshape(-1), xp.ascontiguousarray(y).reshape(-1)


def _step(xp: ModuleType) -> int:
    return GPU_CHUNK_ELEMENTS if xp is not np else STREAM_CHUNK_ELEMENTS


def _f64(xp: ModuleType, a: Any) -> Any:
    return a.astype(xp.float64, copy=False)


# -- pass 1: range, finiteness, scale ----------------------------------------------------


def _scan(xp: ModuleType, x: Any, y: Any, shape: tuple[int, ...]) -> _Scan:
    s = _Scan(shape=shape, n_total=int(x.size))
    step = _step(xp)
    for i0 in range(0, s.n_total, step):
        xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
        fx, fy = xp.isfinite(xc), xp.isfinite(yc)
        all_x, all_y = bool(xp.all(fx)), bool(xp.all(fy))
        if all_x and all_y:
            xv, yv = xc, yc
            s.n_valid += int(xc.size)
        else:
            s.any_invalid = True
            both = fx & fy
            s.nonfinite_x += int(xc.size - int(xp.count_nonzero(fx)))
            if s.mismatch_flat is None:
                # A non-finite original counts as exact only when reproduced (NaN for NaN,
                # the same infinity); any other non-finite element is an unbounded error.
                with np.errstate(invalid="ignore"):
                    reproduced = ~fx & ((xc == yc) | (xp.isnan(xc) & xp.isnan(yc)))
                mismatch = ~both & ~reproduced
                if bool(xp.any(mismatch)):
                    s.mismatch_flat = i0 + int(xp.argmax(mismatch))
            nb = int(xp.count_nonzero(both))
            s.n_valid += nb
            if nb == 0:
                continue
            xv, yv = xc[both], yc[both]
        s.x_min = min(s.x_min, to_float(xp.min(xv)))
        s.x_max = max(s.x_max, to_float(xp.max(xv)))
        s.y_min = min(s.y_min, to_float(xp.min(yv)))
        s.y_max = max(s.y_max, to_float(xp.max(yv)))
        s.peak = max(s.peak, to_float(xp.max(xp.abs(xv))), to_float(xp.max(xp.abs(yv))))
    if s.n_valid == 0:
        raise InputError("no element is finite in both the original and the reconstruction")
    if s.peak != 0 and not (2.0**-M._SAFE_EXP2 <= s.peak <= 2.0**M._SAFE_EXP2):
        s.exp2 = -math.frexp(s.peak)[1]
    return s


def _valid_chunk(xp: ModuleType, scan: _Scan, xc: Any, yc: Any) -> tuple[Any, Any, Any | None]:
    """float64 copies of a chunk with the non-valid elements set to 0, and the valid mask
    (None when every element of the chunk is valid)."""
    x64, y64 = _f64(xp, xc), _f64(xp, yc)
    if not scan.any_invalid:
        return x64, y64, None
    valid = xp.isfinite(x64) & xp.isfinite(y64)
    if bool(xp.all(valid)):
        return x64, y64, None
    return xp.where(valid, x64, 0.0), xp.where(valid, y64, 0.0), valid


# -- pass 2: extremes and sums -----------------------------------------------------------


def _dot(xp: ModuleType, a: Any, b: Any) -> float:
    """sum(a * b) in one pass without a temporary (einsum: no BLAS threads to wake)."""
    if xp is np:
        return float(np.einsum("i,i->", a, b))
    return to_float(xp.sum(a * b))


def _sums(xp: ModuleType, x: Any, y: Any, scan: _Scan, *, pointwise: bool = True) -> _Sums:
    out = _Sums()
    k = scan.exp2
    # The valid originals are all zero (then no point-wise ratio exists) iff min = max = 0.
    out.any_nonzero_x = not (scan.x_min == 0 and scan.x_max == 0)
    step = _step(xp)
    for i0 in range(0, scan.n_total, step):
        xr, yr, valid = _valid_chunk(xp, scan, x[i0 : i0 + step], y[i0 : i0 + step])
        with np.errstate(over="ignore", invalid="ignore"):
            er = yr - xr  # may overflow to inf near float64's limits: honest there
        if pointwise and out.any_nonzero_x:
            # Point-wise ratios on the unscaled values: scaling a field that spans more
            # than float64's exponents could flush its smallest elements to zero.
            # Elements with x = 0 (invalid ones are 0 too) divide by inf: ratio 0.
            ax = xp.abs(xr)
            zero = ax == 0
            with np.errstate(over="ignore", invalid="ignore"):
                ratio = xp.abs(er) / xp.where(zero, math.inf, ax)
            out.max_pw = max(out.max_pw, to_float(xp.max(ratio)))
            out.zero_changed += int(xp.count_nonzero(zero & (yr != 0)))
            del ax, ratio
        elif pointwise:
            out.zero_changed += int(xp.count_nonzero(yr))
        if k:
            xs, ys = xp.ldexp(xr, k), xp.ldexp(yr, k)
            e = ys - xs
        else:
            xs, ys, e = xr, yr, er  # exact for float32 inputs; invalid elements are 0 - 0
        abs_e = xp.abs(e)
        j = int(xp.argmax(abs_e))
        m = to_float(abs_e[j])
        if m > out.max_abs:
            out.max_abs, out.max_flat = m, i0 + j
        ev = e if valid is None else e[valid]
        if ev.size:
            out.e_min = min(out.e_min, to_float(xp.min(ev)))
            out.e_max = max(out.e_max, to_float(xp.max(ev)))
            out.zero_e += int(ev.size - int(xp.count_nonzero(ev)))
        out.sum_x += to_float(xp.sum(xs))
        out.sum_y += to_float(xp.sum(ys))
        out.sum_e += to_float(xp.sum(e))
        out.sum_e2 += _dot(xp, e, e)
    return out


# -- pass 3: spreads, autocorrelation, histogram -----------------------------------------


def _spread(xp: ModuleType, x: Any, y: Any, scan: _Scan, sums: _Sums) -> _Spread:
    out = _Spread()
    k, n, n_total = scan.exp2, scan.n_valid, scan.n_total
    mean_x, mean_y, mean_e = sums.sum_x / n, sums.sum_y / n, sums.sum_e / n
    mean_all = sums.sum_e / n_total  # the autocorrelation's mean: zeros where invalid
    hist_peak = sums.max_abs
    if hist_peak > 0:
        # Bin on the error scaled so that its peak is in [0.5, 1): exact (a power of two),
        # as the whole-array summary does.
        out.fine_j = -math.frexp(hist_peak)[1]
        out.fine_top = math.ldexp(hist_peak, out.fine_j)
        out.fine = xp.zeros(FINE_HIST_BINS, dtype=xp.int64)
    step = _step(xp)
    for i0 in range(0, n_total, step):
        xr, yr, valid = _valid_chunk(xp, scan, x[i0 : i0 + step], y[i0 : i0 + step])
        xs, ys = (xp.ldexp(xr, k), xp.ldexp(yr, k)) if k else (xr, yr)
        e = ys - xs
        a = e - mean_all
        out.ac_den += _dot(xp, a, a)
        if a.size > 1:
            out.ac_num += _dot(xp, a[:-1], a[1:])
        if out._prev is not None:  # the pair that straddles the chunk seam
            out.ac_num += out._prev * to_float(a[0])
        out._prev = to_float(a[-1])
        if valid is not None:
            xs, ys, e = xs[valid], ys[valid], e[valid]
            if not e.size:
                continue
        dx = xs - mean_x
        dy = ys - mean_y
        out.sxx += _dot(xp, dx, dx)
        out.syy += _dot(xp, dy, dy)
        out.sxy += _dot(xp, dx, dy)
        if valid is None and n == n_total:
            out.see += _dot(xp, a, a)  # a is e - mean(e) already
        else:
            de = e - mean_e
            out.see += _dot(xp, de, de)
        if out.fine is not None:
            out.fine += _fine_counts(xp, e, hist_peak, out)
    return out


def _fine_counts(xp: ModuleType, e: Any, peak: float, spread: _Spread) -> Any:
    """Counts of the fine bins over [-peak, peak] (edges from the power-of-two rescale)."""
    if peak >= 2.0**-900:
        # Binning e over [-peak, peak] is binning e * 2**j over [-top, top] scaled by an
        # exact power of two (no subnormal edges here): the same counts, one op less.
        counts, _ = xp.histogram(e, bins=FINE_HIST_BINS, range=(-peak, peak))
    else:  # numpy cannot form the bins over a range of a few subnormals
        counts, _ = xp.histogram(xp.ldexp(e, spread.fine_j), bins=FINE_HIST_BINS,
                                 range=(-spread.fine_top, spread.fine_top))
    return counts


def _quantiles(xp: ModuleType, spread: _Spread, sums: _Sums, n: int, exp2: int) -> dict[str, float]:
    """numpy.quantile's 'linear' definition on order statistics read from the fine bins."""
    if spread.fine is None:  # every error is 0
        return {f"{p:g}": 0.0 for p in M.ERR_QUANTILES}
    counts = np.asarray(spread.fine.tolist() if xp is not np else spread.fine, dtype=np.int64)
    cum = np.cumsum(counts)
    top, j = spread.fine_top, spread.fine_j
    width = 2 * top / FINE_HIST_BINS
    lo_e, hi_e = math.ldexp(sums.e_min, j), math.ldexp(sums.e_max, j)
    zero_bin = FINE_HIST_BINS // 2  # [0, width): the edge at 0 is exact (an even split)

    def order_stat(r: int) -> float:
        """The r-th smallest error (0-based), placed within its bin by its rank there."""
        if r <= 0:
            return lo_e
        if r >= n - 1:
            return hi_e
        b = int(np.searchsorted(cum, r, side="right"))
        before = int(cum[b - 1]) if b else 0
        if b == zero_bin and r - before < sums.zero_e:
            return 0.0  # exact zeros are counted apart: they come first in [0, width)
        v = -top + width * (b + (r - before + 0.5) / int(counts[b]))
        return min(max(v, lo_e), hi_e)

    out = {}
    for p in M.ERR_QUANTILES:
        h = (n - 1) * p
        r = int(math.floor(h))
        v = order_stat(r)
        if h > r:
            v = v + (h - r) * (order_stat(r + 1) - v)
        out[f"{p:g}"] = M._unscale(math.ldexp(v, -j), exp2) if v else 0.0
    return out


def _coarse_histogram(xp: ModuleType, spread: _Spread, n: int, exp2: int) -> tuple[list[float], list[int]]:
    if spread.fine is None:  # exact reconstruction: one degenerate bin holding everything
        return [0.0, 0.0], [n]
    fine = spread.fine.reshape(M.ERR_HIST_BINS, -1).sum(axis=1)
    counts = [int(c) for c in fine.tolist()]
    edges = np.linspace(-spread.fine_top, spread.fine_top, M.ERR_HIST_BINS + 1)
    return [M._unscale(float(v), exp2 + spread.fine_j) for v in edges.tolist()], counts


# -- SSIM over tiles ---------------------------------------------------------------------


def _tile_lengths(shape: tuple[int, ...], win: tuple[int, ...], target: int) -> list[int]:
    """Input tile length per axis (halo included), about equal along the axes that are
    split, so that a tile holds about ``target`` elements (float64 maps of a tile stay in
    the L2 cache, which beats a smaller halo share: measured on 256^3)."""
    lengths = list(shape)
    free = list(range(len(shape)))
    budget = float(target)
    while free:
        side = budget ** (1.0 / len(free))
        short = [a for a in free if shape[a] <= side]
        if not short:
            for a in free:  # never so thin that the halo dominates
                lengths[a] = min(shape[a], max(int(side), 4 * win[a]))
            break
        for a in short:
            budget /= shape[a]
            free.remove(a)
    return lengths


def _ssim_map(
    xp: ModuleType, xc: Any, yc: Any, win: tuple[int, ...], shift: float, c1: float, c2: float
) -> Any:
    """SSIM of every valid window of the centred tile ``xc``/``yc``: the formula of
    :func:`perfscout.analysis.metrics._ssim_map` with four window sums instead of five
    (the denominator needs only var x + var y, so x^2 + y^2 is summed once)."""
    N = math.prod(win)
    box = M._box_sums
    mx = box(xp, xc, win) / N
    my = box(xp, yc, win) / N
    norm = N / (N - 1) if N > 1 else 1.0  # sample (N-1) moments, as Wang et al. and skimage
    sq = xc * xc
    sq += yc * yc
    vsum = (box(xp, sq, win) / N - mx * mx - my * my) * norm
    del sq
    xc *= yc  # the tile is this function's own copy
    cxy = (box(xp, xc, win) / N - mx * my) * norm
    mx += shift
    my += shift
    with np.errstate(invalid="ignore", divide="ignore"):
        s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vsum + c2))
    if not bool(xp.all(xp.isfinite(s))):
        # Only when C1/C2 underflow (R below ~1e-150 of the largest |value|): a 0/0 window
        # is two identical windows (equal means, var(x - y) = 0): similarity 1; anything
        # else non-finite counts as dissimilar (0).
        same = (mx == my) & (vsum == 2 * cxy)
        s = xp.where(xp.isfinite(s), s, xp.where(same, 1.0, 0.0))
    return s


def _row_tile_lengths(shape: tuple[int, ...], win: tuple[int, ...], target: int) -> list[int]:
    """Tiles that keep the last (contiguous) axis whole and split the others, when a
    tile of ``target`` elements still has room for rows: contiguous rows beat a smaller
    halo share (float32 SSIM on 256^3: 22x22x256 tiles 0.44 s, 50^3 cubes 0.58 s; on
    64x512x512 22x22x512 0.49 s, 50^3 0.60 s), up to rows of about four targets."""
    last = int(shape[-1])
    if len(shape) == 1 or last * (3 * max(win[:-1]) + 1) ** (len(shape) - 1) > 4 * target:
        return _tile_lengths(shape, win, target)
    lengths = [int(n) for n in shape]
    free = list(range(len(shape) - 1))
    budget = float(target // last)
    while free:  # axes shorter than an equal share are taken whole; the rest share what is left
        side = budget ** (1.0 / len(free))
        short = [a for a in free if shape[a] <= side]
        if not short:
            for a in free:  # at least three windows' worth of output per halo
                lengths[a] = min(int(shape[a]), max(int(side), 3 * win[a] + 1))
            break
        for a in short:
            budget /= shape[a]
            free.remove(a)
    return lengths


_tiles = halo_tiles  # the tile generator (analysis.tile_pool), also the compiled SSIM's


def _tile_plan(xp: ModuleType, shape: tuple[int, ...], target: int | None = None
               ) -> tuple[list[int], list[int], tuple[int, ...]]:
    win = tuple(min(M.SSIM_WINDOW, int(n)) for n in shape)
    n_out = [int(n) - w + 1 for n, w in zip(shape, win)]
    if target is None:
        target = GPU_SSIM_TILE_ELEMENTS if xp is not np else SSIM_TILE_ELEMENTS
    tile_in = _row_tile_lengths(shape, win, target)
    tile_out = [max(1, t - w + 1) for t, w in zip(tile_in, win)]
    return n_out, tile_out, win


def stream_ssim(xp: ModuleType, x: Any, y: Any, scan: _Scan, shift: float, data_range: float) -> float:
    """Mean SSIM over every valid 7-wide window (see :func:`perfscout.analysis.metrics.ssim`),
    tile by tile; ``x``/``y`` in the original shape, their own dtype."""
    shape = scan.shape
    win = tuple(min(M.SSIM_WINDOW, int(n)) for n in shape)
    n_out = [int(n) - w + 1 for n, w in zip(shape, win)]
    target = GPU_SSIM_TILE_ELEMENTS if xp is not np else SSIM_TILE_ELEMENTS
    tile_in = _tile_lengths(shape, win, target)
    tile_out = [max(1, t - w + 1) for t, w in zip(tile_in, win)]
    c1 = (M.SSIM_K1 * data_range) ** 2
    c2 = (M.SSIM_K2 * data_range) ** 2
    k = scan.exp2
    total, count = 0.0, 0
    for sl in _tiles(n_out, tile_out, win):
        xr, yr, _ = _valid_chunk(xp, scan, x[sl], y[sl])
        if k:
            xr, yr = xp.ldexp(xr, k), xp.ldexp(yr, k)
        # Centre on the original's mean before summing squares: local variances are then
        # differences of small numbers, not of two huge ones (float64 cancellation).
        s = _ssim_map(xp, xr - shift, yr - shift, win, shift, c1, c2)
        total += to_float(xp.sum(s))
        count += int(s.size)
    return total / count


def _ssim_range(scan: _Scan, R: float) -> float:
    """The SSIM data range: R; for a constant original, the range of the original with
    zeros where elements were not compared, else the range the pair spans together
    (> 0 whenever the two differ)."""
    if R > 0:
        return R
    zero = [0.0] if scan.any_invalid else []
    k = scan.exp2
    lo_x, hi_x = min([scan.x_min, *zero]), max([scan.x_max, *zero])
    if hi_x > lo_x:
        return math.ldexp(hi_x, k) - math.ldexp(lo_x, k)
    lo, hi = min(lo_x, scan.y_min), max(hi_x, scan.y_max)
    return math.ldexp(hi, k) - math.ldexp(lo, k)


# -- the record ----------------------------------------------------------------------------


def stream_psnr(original: Any, reconstructed: Any) -> float:
    """PSNR in dB with the record's definition (two cheap passes, no full-size temporaries)."""
    xp, x, y = _inputs(original, reconstructed)
    scan = _scan(xp, x, y, tuple(xp.asarray(original).shape))
    sums = _sums(xp, x, y, scan, pointwise=False)
    max_abs = math.inf if scan.mismatch_flat is not None else sums.max_abs
    R = math.ldexp(scan.x_max, scan.exp2) - math.ldexp(scan.x_min, scan.exp2)
    mse = sums.sum_e2 / scan.n_valid
    return M._psnr_db(R, M._log10_mse(mse, max_abs, scan.n_valid), max_abs == 0)


#: The fast path's backend switch: unset (or ``auto``) chooses by size (COMPILED_MIN_ELEMENTS),
#: ``numba`` takes the compiled kernels for any size, ``numpy`` never.
ENV_BACKEND = "PERFSCOUT_METRICS_BACKEND"
BACKENDS = ("auto", "numba", "numpy")
#: Pairs of at least this many elements take the compiled kernels by default: below it the
#: NumPy fast path costs under ~0.13 s (measured: 0.5 s for 16 Mi float32 elements on one
#: core here), less than a fresh process pays to import numba and load the cached
#: kernels (~0.5 s); the choice depends on the size only, so a given field always gets
#: the same figures, whatever the process loaded before.
COMPILED_MIN_ELEMENTS = 1 << 22


def requested_backend() -> str:
    """``$PERFSCOUT_METRICS_BACKEND`` (see ENV_BACKEND), ``auto`` when unset; InputError
    for an unknown value. Imports nothing."""
    wanted = os.environ.get(ENV_BACKEND, "").strip().lower() or "auto"
    if wanted not in BACKENDS:
        raise InputError(f"${ENV_BACKEND} must be one of {', '.join(BACKENDS)} (or unset), got {wanted!r}")
    return wanted


def metrics_backend(size: int | None = None) -> str:
    """The fast path the metric pass takes for a NumPy float pair of ``size`` elements
    (None: of any size that the automatic choice sends to the compiled kernels):
    ``numba`` (:mod:`perfscout.analysis.stream_compiled`) or ``numpy`` (stream_fast).
    ``numba`` needs numba to import; ``$PERFSCOUT_METRICS_BACKEND`` overrides the size
    rule (:func:`requested_backend`)."""
    wanted = requested_backend()
    if wanted == "numpy" or (wanted == "auto" and size is not None and size < COMPILED_MIN_ELEMENTS):
        return "numpy"
    return "numba" if _compiled_module() is not None else "numpy"


@functools.lru_cache(maxsize=1)
def _compiled_module() -> ModuleType | None:
    """perfscout.analysis.stream_compiled, imported on the first metric pass that takes it
    (the kernels' load is not paid by a process that never does); None without the
    kernels' library and without a working numba (missing, or one that fails to load:
    the NumPy fast path then runs)."""
    try:
        return importlib.import_module("perfscout.analysis.stream_compiled")
    except Exception:  # noqa: BLE001 - ImportError, or llvmlite's OSError/RuntimeError on a broken install
        return None


def warm_before_fork(x: Any) -> bool:
    """Load the compiled kernels in this process when a pair like ``x`` will take them, so
    that children forked from it (one per isolated evaluation) inherit them instead of each
    importing numba and loading the cached kernels again (1-2 s a child on a busy 2-core
    machine). Once per process; True when the kernels are loaded. Never raises: a pass
    that cannot use them falls back as it always does."""
    try:
        if not isinstance(x, np.ndarray) or metrics_backend(int(x.size)) != "numba":
            return False
    except InputError:
        return False  # an unknown backend switch is reported by the pass itself
    return _warmed()


def kernels_pending(x: Any) -> bool:
    """Whether a pair like ``x`` would take the compiled kernels and loading them here
    would take long: this process has not loaded them, and they would come from numba
    (its import and cache: ~0.5 s) or from a library still to be built, not from this
    machine's built library (0.04-0.06 s: :func:`warm_before_fork` loads it in passing).
    Imports nothing: numba's presence is looked up, not imported (a broken install is
    found by the warm-up, which then falls back)."""
    if _warmed.cache_info().currsize or not isinstance(x, np.ndarray):
        return False
    try:
        wanted = requested_backend()
    except InputError:
        return False
    if wanted == "numpy" or (wanted == "auto" and int(x.size) < COMPILED_MIN_ELEMENTS):
        return False
    if x.dtype not in (np.float32, np.float64):
        return False
    from perfscout.analysis import stream_native

    if stream_native.built():
        return False
    return importlib.util.find_spec("numba") is not None


@functools.lru_cache(maxsize=1)
def _warmed() -> bool:
    compiled = _compiled_module()
    if compiled is None:
        return False
    try:
        compiled.warm()
    except Exception:  # noqa: BLE001 - the child compiles on its own then, as before
        return False
    return True


def _compiled_backend(x: Any, y: Any) -> ModuleType | None:
    """The compiled module when it takes this pair (NumPy floats of one dtype, the
    backend by size or by the switch), else None."""
    if not isinstance(x, np.ndarray) or metrics_backend(int(x.size)) != "numba":
        return None
    compiled = _compiled_module()
    return compiled if compiled is not None and compiled.supported(x, y) else None


def check_compressed_nbytes(compressed_nbytes: Any) -> None:
    """InputError unless ``compressed_nbytes`` is an integer byte count > 0."""
    if isinstance(compressed_nbytes, bool) or int(compressed_nbytes) != compressed_nbytes:
        raise InputError(f"compressed size must be an integer byte count, got {compressed_nbytes!r}")
    if compressed_nbytes <= 0:
        raise InputError(f"compressed size must be > 0 bytes, got {compressed_nbytes}")


def stream_quality_metrics(original: Any, reconstructed: Any, compressed_nbytes: int, *,
                           threads: int | None = None, watch: ChunkWatch | None = None,
                           x_extremes: tuple[float, float] | None = None) -> dict[str, Any]:
    """Every figure of :func:`perfscout.analysis.metrics.quality_metrics`, streamed.

    ``threads``: worker threads of the fast path (:func:`perfscout.analysis.tile_pool.resolve_threads`;
    None: the cores this process may use, or ``OMP_NUM_THREADS``); the figures do not
    depend on it. ``watch`` rides along the fast path's first pass
    (:class:`perfscout.analysis.stream_fast.ChunkWatch`: the bound check's one-pass hook);
    its ``finish`` is not called when the general passes take over before that pass ends.
    ``x_extremes``: the original's min and max, when the caller has them and knows every
    element of it finite (the range a ``rel`` bound was resolved with): not read again."""
    check_compressed_nbytes(compressed_nbytes)
    xp, x, y = _inputs(original, reconstructed)
    shape = tuple(int(n) for n in xp.asarray(original).shape)
    orig_nbytes = int(xp.asarray(original).nbytes)
    n_threads = resolve_threads(threads)
    compiled = _compiled_backend(x, y)
    if compiled is not None:
        fast = compiled.compiled_point_stats(x, y, shape, _step(xp), FINE_HIST_BINS, threads=n_threads, watch=watch,
                                             x_extremes=x_extremes)
    else:
        fast = fast_point_stats(xp, x, y, shape, _step(xp), FINE_HIST_BINS, threads=n_threads, watch=watch,
                                x_extremes=x_extremes)
    if fast is not None:  # finite, no rescale: two fused passes
        scan, sums, spread = fast
    else:
        scan = _scan(xp, x, y, shape)
        sums = _sums(xp, x, y, scan)
        spread = _spread(xp, x, y, scan, sums)
    k, n, n_total = scan.exp2, scan.n_valid, scan.n_total

    # Scaled units from here (inputs times 2**k, usually k = 0), unscaled on the way out.
    R = math.ldexp(scan.x_max, k) - math.ldexp(scan.x_min, k)
    if scan.mismatch_flat is not None:
        max_abs, max_flat = math.inf, scan.mismatch_flat
    else:
        max_abs, max_flat = sums.max_abs, sums.max_flat
    max_idx = tuple(int(i) for i in np.unravel_index(max_flat, shape))
    mse = sums.sum_e2 / n
    log_mse = M._log10_mse(mse, max_abs, n)
    var_x, var_y, cov = spread.sxx / n, spread.syy / n, spread.sxy / n
    # A constant array has no variance, whatever its mean's rounding left in the sums.
    if scan.x_min == scan.x_max:
        var_x = cov = 0.0
    if scan.y_min == scan.y_max:
        var_y = cov = 0.0
    exact = max_abs == 0
    if exact:
        pearson = 1.0
    elif var_x > 0 and var_y > 0:
        pearson = cov / (math.sqrt(var_x) * math.sqrt(var_y))
    else:
        pearson = math.nan

    if exact or sums.max_abs == 0:  # x == y wherever both are compared: identical windows
        ssim = 1.0
    else:
        xs, ys, r_ssim = x.reshape(shape), y.reshape(shape), _ssim_range(scan, R)
        ssim = None
        if k == 0 and not scan.any_invalid and compiled is not None:
            ssim = compiled.compiled_ssim(xs, ys, scan, sums.max_abs, r_ssim, threads=n_threads)
        if ssim is None and k == 0 and not scan.any_invalid:
            target = GPU_SSIM_TILE_ELEMENTS if xp is not np else SSIM_FAST_TILE_ELEMENTS
            ssim = fast_ssim(xp, xs, ys, scan, sums.max_abs, r_ssim, _tiles(*_tile_plan(xp, shape, target)),
                             threads=n_threads)
        if ssim is None:
            ssim = stream_ssim(xp, xs, ys, scan, sums.sum_x / n_total, r_ssim)

    ac = 0.0 if n_total < 2 or spread.ac_den == 0 else spread.ac_num / spread.ac_den
    edges, counts = _coarse_histogram(xp, spread, n, k)
    rmse = math.sqrt(mse)
    return {
        "ratio": orig_nbytes / int(compressed_nbytes),
        "bitrate": 8.0 * int(compressed_nbytes) / n_total,
        "max_abs_err": M._unscale(max_abs, k),
        "max_abs_err_index": max_idx,
        "max_rel_err": M._ratio_or_limit(max_abs, R),
        "max_pw_rel_err": sums.max_pw if sums.any_nonzero_x else 0.0,
        "zero_changed_count": sums.zero_changed,
        "mse": M._unscale(M._unscale(mse, k), k),
        "rmse": M._unscale(rmse, k),
        "nrmse": M._ratio_or_limit(rmse if mse > 0 or exact else 10.0 ** min(log_mse / 2, 300.0), R),
        "psnr": M._psnr_db(R, log_mse, exact),
        "snr": math.inf if exact else 10 * M._log10(var_x) - 10 * log_mse,
        "pearson": pearson,
        "ssim": ssim,
        "err_autocorr_lag1": ac,
        "err_hist": {
            "n": n,
            "mean": M._unscale(sums.sum_e / n, k),
            "std": M._unscale(math.sqrt(spread.see / n), k),
            "zero_fraction": sums.zero_e / n,
            "quantiles": _quantiles(xp, spread, sums, n, k),
            "edges": edges,
            "counts": counts,
        },
        "value_range": M._unscale(R, k),
        "nonfinite_count": scan.nonfinite_x,
    }
