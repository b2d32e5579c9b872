"""The definitions the whole-array and the streaming metrics share (constants, scalar
formulas, the N-D box sum): one place, so the two implementations cannot drift apart.

See :mod:`perfscout.analysis.metrics` for what the metrics mean.
"""

from __future__ import annotations

import math
from types import ModuleType
from typing import Any

#: SSIM stabilising constants, as in Wang et al. 2004 (and Z-checker, skimage).
SSIM_K1 = 0.01
SSIM_K2 = 0.03
#: Default SSIM window edge: 7 elements along every axis (Z-checker, skimage default).
SSIM_WINDOW = 7
#: Error quantiles reported in ``err_hist`` (the tails matter most for bounds).
ERR_QUANTILES = (0.0, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0)
#: Coarse histogram of the signed error over [-max|e|, +max|e|]: enough bins to see a
#: uniform (quantiser) vs. peaked (predictor) shape, few enough to store per result.
ERR_HIST_BINS = 16


#: Magnitudes inside [2^-SAFE, 2^SAFE] (about 1e+-60) survive the fourth powers in
#: SSIM's denominator and the squares of MSE in float64.
_SAFE_EXP2 = 200


def _unscale(v: float, exp2: int) -> float:
    """v * 2**-exp2 in Python floats, saturating to +-inf (or 0) instead of raising."""
    if exp2 == 0 or v == 0 or not math.isfinite(v):
        return v
    try:
        return math.ldexp(v, -exp2)
    except OverflowError:
        return math.copysign(math.inf, v)


def _log10(v: float) -> float:
    """log10 that maps 0 to -inf instead of raising."""
    return math.log10(v) if v > 0 else -math.inf


def _ratio_or_limit(num: float, den: float) -> float:
    """num/den, with 0/0 -> 0 (nothing to normalise) and k/0 -> inf."""
    if den > 0:
        return num / den
    return 0.0 if num == 0 else math.inf


#: Up to this window edge the box filter adds shifted slices (w - 1 contiguous adds per
#: axis: about 2.5x faster than a cumulative sum for w = 7 and free of its running-sum
#: rounding); wider windows use the O(1)-per-element cumulative-sum difference.
_SHIFTED_ADDS_MAX_WINDOW = 16


def _axis_slice(ndim: int, axis: int, start: int, stop: int | None) -> tuple[slice, ...]:
    sl = [slice(None)] * ndim
    sl[axis] = slice(start, stop)
    return tuple(sl)


def _box_sums(xp: ModuleType, a: Any, win: tuple[int, ...]) -> Any:
    """Sums over every fully contained window of shape ``win`` ("valid" windows).

    Separable, one axis at a time, with operations NumPy and CuPy share (no SciPy).
    """
    out = a
    for axis, w in enumerate(win):
        if w == 1:
            continue
        n = int(out.shape[axis]) - w + 1
        if w <= _SHIFTED_ADDS_MAX_WINDOW:
            acc = out[_axis_slice(out.ndim, axis, 0, n)].copy()
            for j in range(1, w):
                acc += out[_axis_slice(out.ndim, axis, j, j + n)]
        else:
            c = xp.cumsum(out, axis=axis)
            zero_shape = list(c.shape)
            zero_shape[axis] = 1
            c = xp.concatenate([xp.zeros(zero_shape, dtype=c.dtype), c], axis=axis)
            acc = c[_axis_slice(c.ndim, axis, w, None)] - c[_axis_slice(c.ndim, axis, 0, n)]
        out = acc
    return out


def _log10_mse(mse: float, max_abs: float, n: int) -> float:
    """log10(MSE), or a lower bound of it when the squares of tiny errors underflowed."""
    if mse > 0:
        return math.log10(mse)
    if max_abs > 0:  # MSE >= max|e|^2 / n
        return 2 * math.log10(max_abs) - math.log10(n)
    return -math.inf


def _psnr_db(R: float, log_mse: float, exact: bool) -> float:
    """20 log10(R) - 10 log10(MSE); +inf when exact, -inf when R = 0 < MSE."""
    return math.inf if exact else 20 * _log10(R) - 10 * log_mse
