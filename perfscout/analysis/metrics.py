"""Quality metrics of a lossy reconstruction, with qcat / Z-checker definitions.

Notation: ``x`` is the original, ``y`` the reconstruction, ``e = y - x`` the error,
``n`` the number of elements, ``R = max(x) - min(x)`` the value range of the original,
``MSE = mean(e**2)``. Every metric is computed in float64 whatever the input dtype
(except the record's SSIM window sums, float32 on the error: see ``quality_metrics``),
with array operations over chunks (no Python loop over elements; the full record is
streamed, :mod:`perfscout.analysis.streaming`), through the array namespace of the
inputs (:mod:`perfscout.analysis.xp`), so CuPy arrays stay on the device until the
final scalars.

Non-finite originals: a codec may pass NaN/Inf through losslessly. Such an element
counts as exact when the reconstruction holds the same value (NaN for NaN, the same
infinity); if it does not, or if a finite original comes back non-finite, the worst
error is ``inf`` at that element. All other statistics use the elements where both
``x`` and ``y`` are finite; the spatial metrics (SSIM, lag-1 autocorrelation) see
the exactly-reproduced non-finite elements as zero in both arrays.

Extreme magnitudes: squares of values near 1e±308 (or of subnormals) over- or
underflow float64, which would turn a real error into PSNR = +inf. When the largest
magnitude is outside [2^-200, 2^200] (about 1e+-60), both arrays are first scaled by the same power
of two (exact: only exponents change), the scale-free metrics (PSNR, NRMSE, SNR,
relative errors, Pearson, SSIM, autocorrelation) are computed on the scaled arrays,
and the dimensional ones (errors, RMSE, MSE, R, histogram) are scaled back; a value
that does not fit float64 after scaling back is reported as inf (or 0 for ``mse``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from perfscout.analysis.metric_defs import (  # noqa: F401  (re-exported: part of this module's API)
    _SAFE_EXP2,
    _SHIFTED_ADDS_MAX_WINDOW,
    ERR_HIST_BINS,
    ERR_QUANTILES,
    SSIM_K1,
    SSIM_K2,
    SSIM_WINDOW,
    _axis_slice,
    _box_sums,
    _log10,
    _log10_mse,
    _psnr_db,
    _ratio_or_limit,
    _unscale,
)
from perfscout.analysis.xp import get_namespace, to_float
from perfscout.errors import InputError

#: SSIM works through slabs of about this many input elements (4 Mi: ~32 MiB per
#: float64 temporary), so a 512^3 field needs a few hundred MiB, not tens of GiB.
SSIM_SLAB_ELEMENTS = 1 << 22

@dataclass
class _Pair:
    """Original and reconstruction in float64, with the bookkeeping for non-finites."""

    xp: ModuleType
    x: Any  # original, float64; non-finite elements replaced by 0
    y: Any  # reconstruction, float64; same replacement
    valid: Any | None  # both finite (None: every element is)
    n_valid: int
    mismatch_flat: int | None  # first element whose non-finite value was not reproduced
    nonfinite_count: int
    exp2: int = 0  # x and y above hold the inputs times 2**exp2 (see the module notes)
    x_raw: Any = None  # the unscaled float64 arrays (the same objects when exp2 == 0)
    y_raw: Any = None

    def flat_valid(self, a: Any) -> Any:
        flat = a.reshape(-1)
        return flat if self.valid is None else flat[self.valid.reshape(-1)]


def _as_arrays(original: Any, reconstructed: Any) -> tuple[ModuleType, Any, Any]:
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
    return xp, x.astype(xp.float64, copy=False), y.astype(xp.float64, copy=False)


def _rescale_exponent(xp: ModuleType, x: Any, y: Any) -> int:
    """k such that max(|x|, |y|) * 2**k is in [0.5, 1), or 0 when no rescale is needed."""
    peak = max(to_float(xp.max(xp.abs(x))), to_float(xp.max(xp.abs(y))))
    if peak == 0 or 2.0**-_SAFE_EXP2 <= peak <= 2.0**_SAFE_EXP2:
        return 0
    return -math.frexp(peak)[1]


def _scaled(xp: ModuleType, x: Any, y: Any) -> tuple[Any, Any, int]:
    k = _rescale_exponent(xp, x, y)
    if k == 0:
        return x, y, 0
    return xp.ldexp(x, k), xp.ldexp(y, k), k


def _prepare(original: Any, reconstructed: Any) -> _Pair:
    xp, x, y = _as_arrays(original, reconstructed)
    fx = xp.isfinite(x)
    fy = xp.isfinite(y)
    if bool(xp.all(fx)) and bool(xp.all(fy)):
        xs, ys, k = _scaled(xp, x, y)
        return _Pair(xp, xs, ys, None, int(x.size), None, 0, k, x, y)
    both = fx & fy
    reproduced = ~fx & ((x == y) | (xp.isnan(x) & xp.isnan(y)))
    mismatch = ~both & ~reproduced
    mismatch_flat = int(xp.argmax(mismatch.reshape(-1))) if bool(xp.any(mismatch)) else None
    n_valid = int(xp.count_nonzero(both))
    if n_valid == 0:
        raise InputError("no element is finite in both the original and the reconstruction")
    x0, y0 = xp.where(both, x, 0.0), xp.where(both, y, 0.0)
    xs, ys, k = _scaled(xp, x0, y0)
    nonfinite = int(x.size - xp.count_nonzero(fx))
    return _Pair(xp, xs, ys, both, n_valid, mismatch_flat, nonfinite, k, x0, y0)


def value_range(x: Any) -> float:
    """R = max(x) - min(x) over the finite elements (qcat's value range)."""
    xp = get_namespace(x)
    a = xp.asarray(x)
    if a.size == 0:
        raise InputError("value range of an empty array is undefined")
    a = a.astype(xp.float64, copy=False)
    finite = xp.isfinite(a)
    if not bool(xp.all(finite)):
        if not bool(xp.any(finite)):
            raise InputError("value range undefined: no element is finite")
        a = a[finite]
    return to_float(xp.max(a)) - to_float(xp.min(a))  # may be inf past float64's range


def _max_abs_scaled(p: _Pair) -> tuple[float, tuple[int, ...]]:
    """max |e| in the scaled units of ``p`` (inf on a non-finite mismatch) and its index."""
    xp = p.xp
    shape = tuple(p.x.shape)
    if p.mismatch_flat is not None:
        return math.inf, tuple(int(i) for i in np.unravel_index(p.mismatch_flat, shape))
    abs_e = xp.abs(p.y - p.x).reshape(-1)  # exact: scaling by 2**k commutes with it
    flat = int(xp.argmax(abs_e))
    return to_float(abs_e[flat]), tuple(int(i) for i in np.unravel_index(flat, shape))


def max_abs_error(original: Any, reconstructed: Any) -> tuple[float, tuple[int, ...]]:
    """Worst absolute error max|y - x| and the (C-order) index of its first occurrence.

    ``inf`` (at that element) when a non-finite original is not reproduced exactly or
    a finite original comes back non-finite.
    """
    p = _prepare(original, reconstructed)
    value, index = _max_abs_scaled(p)
    return _unscale(value, p.exp2), index


# -- SSIM ----------------------------------------------------------------------------


def _ssim_prepared(
    xp: ModuleType,
    x: Any,
    y: Any,
    window: int,
    data_range: float | None,
    slab_elements: int | None = None,
) -> float:
    slab_elements = slab_elements or SSIM_SLAB_ELEMENTS
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise InputError(f"SSIM window must be a positive integer, got {window!r}")
    if bool(xp.all(x == y)):
        return 1.0
    if data_range is None:
        R = to_float(xp.max(x)) - to_float(xp.min(x))
        if R == 0:
            # A constant original has no range: use the range the pair spans, which is
            # > 0 whenever the two arrays differ (they do, identical returned above).
            R = max(to_float(xp.max(x)), to_float(xp.max(y))) - min(
                to_float(xp.min(x)), to_float(xp.min(y))
            )
    else:
        R = float(data_range)
        if not math.isfinite(R) or R <= 0:
            raise InputError(f"SSIM data_range must be a positive finite number, got {data_range!r}")
    c1 = (SSIM_K1 * R) ** 2
    c2 = (SSIM_K2 * R) ** 2
    win = tuple(min(window, int(n)) for n in x.shape)
    # Centre on the original's mean before summing squares: local variances are then
    # differences of small numbers, not of two huge ones (float64 cancellation).
    shift = to_float(xp.mean(x))
    # Slabs along the slowest axis bound the memory of the window maps (about ten
    # float64 arrays of the slab's size) whatever the field's size.
    n_out = int(x.shape[0]) - win[0] + 1
    row = math.prod(int(n) for n in x.shape[1:])
    rows = max(1, slab_elements // max(1, row) - (win[0] - 1))
    total, count = 0.0, 0
    for i0 in range(0, n_out, rows):
        i1 = min(n_out, i0 + rows)
        xs = x[i0 : i1 + win[0] - 1] - shift
        ys = y[i0 : i1 + win[0] - 1] - shift
        s = _ssim_map(xp, xs, ys, win, shift, c1, c2)
        total += to_float(xp.sum(s))
        count += int(s.size)
    return total / count


def _ssim_map(
    xp: ModuleType, xc: Any, yc: Any, win: tuple[int, ...], shift: float, c1: float, c2: float
) -> Any:
    """SSIM of every valid window of the (centred) slab ``xc``/``yc``."""
    N = math.prod(win)
    mx = _box_sums(xp, xc, win) / N
    my = _box_sums(xp, yc, win) / N
    # Sample (N-1) covariances, as in Wang et al. 2004 and skimage's default.
    norm = N / (N - 1) if N > 1 else 1.0
    vx = (_box_sums(xp, xc * xc, win) / N - mx * mx) * norm
    vy = (_box_sums(xp, yc * yc, win) / N - my * my) * norm
    cxy = (_box_sums(xp, xc * yc, win) / N - mx * my) * norm
    mx = mx + shift
    my = my + shift
    with np.errstate(invalid="ignore", divide="ignore"):
        s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx * mx + my * my + c1) * (vx + vy + c2))
    if not bool(xp.all(xp.isfinite(s))):
        # Only when C1/C2 underflow (R below ~1e-150 of the largest |value|, i.e. a
        # reconstruction astronomically off): a 0/0 window is two identical constant
        # windows (similarity 1); anything else non-finite counts as dissimilar (0).
        same = (mx == my) & (vx == vy) & (cxy == vx)
        s = xp.where(xp.isfinite(s), s, xp.where(same, 1.0, 0.0))
    return s


def ssim(a: Any, b: Any, *, window: int = SSIM_WINDOW, data_range: float | None = None) -> float:
    """Mean structural similarity of ``b`` to ``a`` over N-D uniform windows.

    For every window position that lies fully inside the array (``window`` elements
    along each axis, stride 1, no padding), with window means mu, sample (N-1)
    variances sigma^2 and covariance sigma_ab::

        SSIM_w = (2 mu_a mu_b + C1)(2 sigma_ab + C2) / ((mu_a^2 + mu_b^2 + C1)(sigma_a^2 + sigma_b^2 + C2))

    with C1 = (0.01 R)^2, C2 = (0.03 R)^2, R = ``data_range`` (default: value range of
    ``a``); the result is the mean over all windows. Works for 1-D to N-D.

    Axes shorter than the window: the window shrinks to the axis length along that
    axis (so a 41 x 128 x 128 field uses 7x7x7 windows, a 3 x 100 field 3x7 windows and
    a length-1 axis is effectively ignored) rather than refusing or padding.
    Identical inputs give exactly 1.0. If ``a`` is constant (R = 0) and ``b`` differs,
    R falls back to the range spanned by both arrays together.
    """
    xp, x, y = _as_arrays(a, b)
    if not (bool(xp.all(xp.isfinite(x))) and bool(xp.all(xp.isfinite(y)))):
        raise InputError("SSIM needs finite inputs (NaN/Inf found)")
    if data_range is not None:
        R = float(data_range)
        if not math.isfinite(R) or R <= 0:
            raise InputError(f"SSIM data_range must be a positive finite number, got {data_range!r}")
    xs, ys, k = _scaled(xp, x, y)  # SSIM is invariant to scaling x, y and R together
    return _ssim_prepared(xp, xs, ys, window, None if data_range is None else math.ldexp(R, k))


# -- the full set --------------------------------------------------------------------


def psnr(original: Any, reconstructed: Any) -> float:
    """PSNR in dB, exactly as :func:`quality_metrics` reports it, without the rest.

    For a search that evaluates PSNR many times (``psnr`` mode): the same definition
    and the same handling of non-finite elements and extreme magnitudes as the record,
    in two streaming passes (no full-size temporaries).
    """
    from perfscout.analysis.streaming import stream_psnr

    return stream_psnr(original, reconstructed)


def quality_metrics(original: Any, reconstructed: Any, compressed_nbytes: int, *,
                    threads: int | None = None) -> dict[str, Any]:
    """Every quality figure of a reconstruction, as plain Python values.

    Definitions (x original, y reconstruction, e = y - x, n elements, R = max x - min x):

    - ``ratio`` = nbytes(x) / compressed_nbytes (x's own dtype size, e.g. 4 for f32)
    - ``bitrate`` = 8 * compressed_nbytes / n (bits per value; 32 = uncompressed f32)
    - ``max_abs_err`` = max |e|; ``max_abs_err_index`` its C-order index
    - ``max_rel_err`` = max |e| / R (value-range relative, the ``rel`` bound's metric);
      R = 0: 0 when exact, else inf
    - ``max_pw_rel_err`` = max |e_i| / |x_i| over the elements with x_i != 0 (point-wise
      relative; 0 when there is none). ``zero_changed_count`` counts elements with
      x_i = 0 whose reconstruction is not 0 (infinite point-wise error, reported apart)
    - ``rmse`` = sqrt(MSE), MSE = mean(e^2); ``mse`` is included too
    - ``nrmse`` = sqrt(MSE) / R (R = 0: 0 when exact, else inf)
    - ``psnr`` = 20 log10(R) - 10 log10(MSE) dB; MSE = 0 -> +inf; R = 0 < MSE -> -inf
    - ``snr`` = 10 log10(var(x) / MSE) dB, var the population variance; MSE = 0 -> +inf
    - ``pearson`` = cov(x, y) / (std x * std y); 1 for identical arrays, NaN when one of
      them is constant and they differ (undefined)
    - ``ssim``: :func:`ssim` with 7-wide windows and data range R (for finite inputs
      the record sums the windows in float64, written on the error: within 1e-8 of
      1 - SSIM of :func:`ssim`, see :mod:`perfscout.analysis.stream_fast`)
    - ``err_autocorr_lag1``: lag-1 autocorrelation of e in flattened C order
    - ``err_hist``: error quantiles, mean/std, zero fraction and a 16-bin histogram
    - ``value_range`` (R), ``nonfinite_count`` (non-finite elements of x)

    Computed in streaming passes over chunks (:mod:`perfscout.analysis.streaming`):
    memory is the two inputs plus a few MiB; the error quantiles come from a fine
    histogram and are within one of its bins (2 max|e| / 65536) of ``numpy.quantile``.
    ``threads``: the pass's worker threads (:func:`perfscout.analysis.tile_pool.resolve_threads`);
    the figures do not depend on it.
    """
    from perfscout.analysis.streaming import stream_quality_metrics  # imports this module

    return stream_quality_metrics(original, reconstructed, compressed_nbytes, threads=threads)
