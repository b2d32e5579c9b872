"""The chunked bound check against the whole-array check it replaced (kept here as the oracle).

``reference_verify_bound`` is the former ``perfscout.tools.bounds.verify_bound`` (float64
copies of the whole field, the rounding slack of every element), its beyond-the-bound
decision made exact in rational arithmetic (issue 30: a rounded difference onto the bound
hid an error beyond it); the chunked
check computes the slack only for elements beyond the bound and must give the same
verdict, counts, indices and message.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, arrays

from perfscout.errors import InputError
from perfscout.codecs import verify as V
from perfscout.tools import bounds as B
from perfscout.tools.bounds import BoundCheck, rounding_slack


def reference_verify_bound(
    original: np.ndarray,
    reconstructed: np.ndarray,
    *,
    abs_bound: float | None = None,
    pw_rel_bound: float | None = None,
) -> BoundCheck:
    """Check every element against ``abs_bound`` or ``bound * |x|`` (``pw_rel_bound``).

    With neither bound (fixed_rate) only the error is measured and ``bound_ok`` is None.
    """
    if original.shape != reconstructed.shape:
        raise InputError(f"reconstruction has shape {reconstructed.shape}, original {original.shape}")
    for name, value in (("abs_bound", abs_bound), ("pw_rel_bound", pw_rel_bound)):
        # An infinite (or NaN) bound would pass every error, inf included: never "ok".
        if value is not None and not (math.isfinite(float(value)) and float(value) >= 0):
            raise InputError(f"cannot verify against {name} = {value!r}: a bound must be finite and >= 0")
    x = original.astype(np.float64, copy=False)
    y = reconstructed.astype(np.float64, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.abs(x - y)
    err = np.where(np.isnan(err), np.inf, err)  # a NaN out of a codec is an unbounded error
    flat_max = int(np.argmax(err))
    index = tuple(int(i) for i in np.unravel_index(flat_max, err.shape))
    max_err = float(err.flat[flat_max])
    if abs_bound is None and pw_rel_bound is None:
        return BoundCheck("ok", None, max_err, index)
    if pw_rel_bound is not None:
        allowed = pw_rel_bound * np.abs(x)
        # Each element's own bound: the field's largest one would excuse a 100% error on
        # a small element as "rounding" (float32: 4 eps of 10 is ~5e-6).
        slack = rounding_slack(original, reconstructed, allowed)
        what = f"point-wise relative bound {pw_rel_bound:g}"
    else:
        allowed = np.float64(abs_bound)
        slack = rounding_slack(original, reconstructed, float(abs_bound))
        what = f"abs bound {abs_bound:.6g}"
    with np.errstate(invalid="ignore"):
        excess = err - allowed
    # Since #30: an element is beyond when its error is, in exact (rational) arithmetic; a
    # rounded difference equal to the allowance may stand for one a hair beyond it.
    for i in np.flatnonzero((excess.reshape(-1) == 0) & (err.reshape(-1) > 0)):
        xv, yv = Fraction(float(x.flat[i])), Fraction(float(y.flat[i]))
        bound = Fraction(abs_bound) if pw_rel_bound is None else Fraction(pw_rel_bound) * abs(xv)
        d = abs(xv - yv) - bound
        excess.flat[i] = float(d) if d <= 0 or float(d) > 0 else np.nextafter(0.0, 1.0)
    beyond = excess > 0
    n_beyond = int(np.count_nonzero(beyond))
    if n_beyond == 0:
        return BoundCheck("ok", True, max_err, index)
    n_viol = int(np.count_nonzero(excess > slack))
    worst_flat = int(np.argmax(excess))
    worst_index = tuple(int(i) for i in np.unravel_index(worst_flat, err.shape))
    worst = float(excess.flat[worst_flat])
    status = "bound_violated" if n_viol else "bound_overshoot"
    detail = (
        f"{n_viol} of them beyond float rounding" if n_viol
        else f"all within float rounding of {np.dtype(original.dtype).name}"
    )
    message = (
        f"{status}: {n_beyond} element(s) exceed the {what}, {detail}; worst excess "
        f"{worst:.3g} at index {worst_index} (error {float(err.flat[worst_flat]):.6g}, value "
        f"{float(x.flat[worst_flat]):.6g}); max error {max_err:.6g} at {index}"
    )
    return BoundCheck(status, False, max_err, index, n_beyond, n_viol, worst, worst_index, message)


def _same(a: BoundCheck, b: BoundCheck) -> None:
    assert (a.status, a.bound_ok, a.max_abs_err_index, a.n_beyond, a.n_violations, a.worst_index) == (
        b.status, b.bound_ok, b.max_abs_err_index, b.n_beyond, b.n_violations, b.worst_index)
    assert a.max_abs_err == b.max_abs_err and (a.worst_excess == b.worst_excess or (
        math.isnan(a.worst_excess) and math.isnan(b.worst_excess)))
    assert a.message == b.message


def _perturbed(x: np.ndarray, eb: float, seed: int, n_over: int, n_slack: int) -> np.ndarray:
    """Within the bound everywhere, then ``n_over`` elements far beyond it and ``n_slack``
    a hair beyond it (inside the rounding slack)."""
    rng = np.random.default_rng(seed)
    y = (x.astype(np.float64) + rng.uniform(-eb, eb, x.shape) * 0.9).astype(x.dtype)
    flat = y.reshape(-1)
    idx = rng.permutation(flat.size)
    for i in idx[:n_over]:
        flat[i] = x.reshape(-1)[i] + 3 * eb
    for i in idx[n_over : n_over + n_slack]:
        flat[i] = np.nextafter(x.dtype.type(x.reshape(-1)[i] + eb), x.dtype.type(np.inf))
    return y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunk", [1, 5, 64, B.BOUND_CHECK_CHUNK])
@pytest.mark.parametrize(("n_over", "n_slack"), [(0, 0), (0, 3), (4, 0), (2, 5)])
def test_chunked_check_equals_whole_array_check(monkeypatch, dtype, chunk, n_over, n_slack) -> None:
    monkeypatch.setattr(V, "BOUND_CHECK_CHUNK", chunk)
    rng = np.random.default_rng(3)
    x = np.cumsum(rng.standard_normal((7, 9, 11)), axis=2).astype(dtype)
    eb = 1e-3
    y = _perturbed(x, eb, 5, n_over, n_slack)
    _same(B.verify_bound(x, y, abs_bound=eb), reference_verify_bound(x, y, abs_bound=eb))
    _same(B.verify_bound(x, y, pw_rel_bound=1e-3), reference_verify_bound(x, y, pw_rel_bound=1e-3))
    _same(B.verify_bound(x, y), reference_verify_bound(x, y))


def test_nan_and_inf_reconstructions_are_unbounded_in_both(monkeypatch) -> None:
    monkeypatch.setattr(V, "BOUND_CHECK_CHUNK", 3)
    x = np.linspace(0, 1, 20)
    y = x.copy()
    y[4], y[13], y[17] = np.nan, np.inf, x[17] + 1.0
    for kw in ({"abs_bound": 0.1}, {"pw_rel_bound": 0.1}):
        got, ref = B.verify_bound(x, y, **kw), reference_verify_bound(x, y, **kw)
        _same(got, ref)
    # Without a bound the oracle said "ok"; since #12 a non-finite error there is "error".
    got, ref = B.verify_bound(x, y), reference_verify_bound(x, y)
    assert (got.status, got.bound_ok) == ("error", None) and ref.status == "ok"
    assert (got.max_abs_err, got.max_abs_err_index) == (ref.max_abs_err, ref.max_abs_err_index)
    assert B.verify_bound(x, y, abs_bound=0.1).max_abs_err_index == (4,)  # first unbounded


@settings(max_examples=80, deadline=None)
@given(
    x=arrays(np.float64, array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=10),
             elements=st.floats(-1e3, 1e3, allow_nan=False)),
    eb=st.floats(1e-6, 10.0),
    seed=st.integers(0, 2**16),
    n_over=st.integers(0, 4),
    n_slack=st.integers(0, 4),
    chunk=st.integers(1, 50),
    f32=st.booleans(),
)
def test_chunked_check_on_random_fields(x, eb, seed, n_over, n_slack, chunk, f32) -> None:
    if f32:
        x = x.astype(np.float32)
    y = _perturbed(x, eb, seed, n_over, n_slack)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(V, "BOUND_CHECK_CHUNK", chunk)
        for kw in ({"abs_bound": eb}, {"pw_rel_bound": min(eb, 0.5)}):
            _same(B.verify_bound(x, y, **kw), reference_verify_bound(x, y, **kw))


def test_empty_arrays_are_refused_clearly() -> None:
    with pytest.raises(InputError, match="empty"):
        B.verify_bound(np.zeros(0), np.zeros(0), abs_bound=1.0)
