"""Bound verdicts decided exactly: ``|x - y| <= bound`` (or ``<= bound * |x|``) as real numbers.

A float64 subtraction ``x - y`` rounds; when it rounds onto the bound itself, a check of the
rounded difference says "within" for an element whose exact error is beyond it (found by a
fuzz: sz2 in ratio mode on a tiny float64 field, ``bound_ok=True`` with the exact error
2.2e-16 over the absolute bound). The oracle here is :class:`fractions.Fraction` (every
float is a rational number: the comparison is exact), and the pairs are built to sit on
the ulp boundary: ``y`` the dtype's neighbours of ``x +- bound``, and bounds set to the
*rounded* difference of a pair of far-apart magnitudes (where the subtraction is inexact).

Every entry point that gives a verdict is held to the oracle: ``verify_bound``,
``verify_and_measure`` (the NumPy and the numba metric passes), the GPU path's
``verify_on_device`` (on NumPy arrays), the numcodecs adapter's chunk check, and real
codecs in the searched modes (the resolved absolute bound of ratio and psnr).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from perfscout.codecs import verify as V
from perfscout.tools import bounds as B

DTYPES = (np.float32, np.float64)


def exact_beyond(x: np.ndarray, y: np.ndarray, *, abs_bound: float | None = None,
                 pw_rel_bound: float | None = None) -> int:
    """How many elements are beyond the bound, in exact rational arithmetic."""
    n = 0
    for xv, yv in zip(x.reshape(-1).tolist(), y.reshape(-1).tolist()):
        err = abs(Fraction(xv) - Fraction(yv))
        allowed = Fraction(abs_bound) if pw_rel_bound is None else Fraction(pw_rel_bound) * abs(Fraction(xv))
        n += err > allowed
    return n


def _neighbours(values: np.ndarray, dtype: type) -> np.ndarray:
    v = values.astype(dtype)
    return np.concatenate([v, np.nextafter(v, dtype(np.inf)), np.nextafter(v, dtype(-np.inf))])


def abs_boundary_case(rng: np.random.Generator, dtype: type, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """x, y and an absolute bound with many pairs on its ulp boundary."""
    top = 30 if dtype is np.float32 else 200
    if rng.random() < 0.5:
        # a bound set to the rounded difference of far-apart magnitudes of mixed signs:
        # the subtraction is inexact, the exact error a hair above or below the bound
        xa = dtype(rng.choice([-1, 1]) * 10.0 ** rng.uniform(-top / 3, top / 3))
        ya = dtype(-np.sign(xa) * rng.choice([-1, 1]) * 10.0 ** (np.log10(abs(float(xa))) - rng.uniform(8, 25)))
        eb = float(abs(np.float64(xa) - np.float64(ya)))
        x = np.full(n, xa, dtype=dtype)
        y = np.full(n, ya, dtype=dtype)
        k = n // 3
        y[:k] = np.nextafter(y[:k], dtype(np.inf))
        y[k:2 * k] = np.nextafter(y[k:2 * k], dtype(-np.inf))
        return x, y, eb
    scale = 10.0 ** rng.uniform(-top / 3, top / 3)
    x = (rng.standard_normal(n // 3 + 1) * scale).astype(dtype)
    eb = float(scale * 10.0 ** rng.uniform(-7 if dtype is np.float32 else -15, -1))
    sign = rng.choice([-1.0, 1.0], size=x.size)
    target = x.astype(np.float64) + sign * eb
    y = _neighbours(target, dtype)[: 3 * x.size]
    x = np.tile(x, 3)
    return x[:n], y[:n], eb


def pw_boundary_case(rng: np.random.Generator, dtype: type, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """x, y and a point-wise relative bound with many pairs on its ulp boundary."""
    top = 30 if dtype is np.float32 else 250
    x = (rng.standard_normal(n // 3 + 1) * 10.0 ** rng.uniform(-top, top, size=n // 3 + 1)).astype(dtype)
    b = float(10.0 ** rng.uniform(-6 if dtype is np.float32 else -14, -1))
    if rng.random() < 0.5:  # the bound is a rounded ratio of one pair: ties of the product
        y0 = np.nextafter(x[0], dtype(np.inf)) if rng.random() < 0.5 else x[0] * dtype(1 + 4 * b)
        b = float(abs(np.float64(x[0]) - np.float64(y0)) / abs(np.float64(x[0]))) or b
    sign = rng.choice([-1.0, 1.0], size=x.size)
    target = x.astype(np.float64) * (1.0 + sign * b)
    y = _neighbours(target, dtype)[: 3 * x.size]
    x = np.tile(x, 3)
    return x[:n], y[:n], b


SEEDS = range(60)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_abs_verdicts_are_exact_on_the_ulp_boundary(dtype: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y, eb = abs_boundary_case(rng, dtype, 96)
    want = exact_beyond(x, y, abs_bound=eb)
    got = B.verify_bound(x, y, abs_bound=eb)
    assert got.n_beyond == want, (got, eb)
    assert got.bound_ok is (want == 0)
    # one boundary element alone in a field that holds the bound: the verdict hinges on it
    for i in range(0, x.size, 7):
        xs, ys = x[i:i + 1], y[i:i + 1]
        assert B.verify_bound(xs, ys, abs_bound=eb).bound_ok is (exact_beyond(xs, ys, abs_bound=eb) == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_pw_rel_verdicts_are_exact_on_the_ulp_boundary(dtype: type, seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    x, y, b = pw_boundary_case(rng, dtype, 96)
    want = exact_beyond(x, y, pw_rel_bound=b)
    got = B.verify_bound(x, y, pw_rel_bound=b)
    assert got.n_beyond == want, (got, b)
    assert got.bound_ok is (want == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seed", range(30))
def test_rel_resolved_bound_verdicts_are_exact(dtype: type, seed: int) -> None:
    """rel: the check is against the resolved absolute bound (bound * R), held exactly."""
    rng = np.random.default_rng(2000 + seed)
    x = (rng.standard_normal(64) * 10.0 ** rng.uniform(-20, 20)).astype(dtype)
    rel = float(10.0 ** rng.uniform(-6, -1))
    eb, _, _ = B.rel_abs_bound(x, rel)
    y = _neighbours(x.astype(np.float64) + rng.choice([-1.0, 1.0], size=x.size) * eb, dtype)
    xx = np.tile(x, 3)
    got = B.verify_bound(xx, y, abs_bound=eb)
    assert got.n_beyond == exact_beyond(xx, y, abs_bound=eb)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_metric_pass_gives_the_exact_verdict(backend: str, dtype: type, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify_and_measure reads its verdict off the metric pass (NumPy or numba): the same
    exact count as verify_bound, on fields large enough to take the chunked paths."""
    monkeypatch.setenv("PERFSCOUT_METRICS_BACKEND", backend)
    for seed in range(12):
        rng = np.random.default_rng(3000 + seed)
        for case in (abs_boundary_case, pw_boundary_case):
            x, y, bound = case(rng, dtype, 3000)
            # a finite, non-constant field around the boundary pairs (the pass wants a range)
            pad = np.linspace(-1, 1, 5000).astype(dtype) * (np.abs(x).max() or dtype(1))
            xx, yy = np.concatenate([pad, x]), np.concatenate([pad, y])
            kw = {"abs_bound": bound} if case is abs_boundary_case else {"pw_rel_bound": bound}
            want = exact_beyond(x, y, **kw)
            fused = B.verify_and_measure(xx, yy, xx.nbytes // 2, threads=1, **kw)
            assert fused.check.n_beyond == want, (backend, case.__name__, seed, fused.check)
            assert fused.check.bound_ok is (want == 0)
            assert fused.check == B.verify_bound(xx, yy, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_gpu_path_gives_the_exact_verdict(dtype: type) -> None:
    from perfscout.tools.gpu_eval import verify_on_device

    for seed in range(20):
        x, y, eb = abs_boundary_case(np.random.default_rng(4000 + seed), dtype, 90)
        got = verify_on_device(x, y, eb)
        assert got.n_beyond == exact_beyond(x, y, abs_bound=eb), (seed, got)
        assert got.bound_ok is (got.n_beyond == 0)


def test_the_issue_example_a_rounded_difference_onto_the_bound() -> None:
    """x - y rounds to exactly the bound while the exact error is 2^-53 beyond it."""
    x = np.array([1.0, 0.0])
    y = np.array([-(2.0 ** -53), 0.0])  # |x - y| = 1 + 2^-53, which rounds to 1.0
    assert float(np.abs(x - y)[0]) == 1.0
    check = B.verify_bound(x, y, abs_bound=1.0)
    assert check.bound_ok is False and check.status == "bound_overshoot" and check.n_beyond == 1
    assert check.worst_excess > 0
    assert V.exceeds(x, y, abs_bound=1.0).tolist() == [True, False]


@pytest.mark.parametrize("mode", ["ratio", "psnr"])
@pytest.mark.parametrize("codec", ["sz2", "sz3", "zfp"])
def test_searched_modes_verdicts_are_exact_on_real_codecs(codec: str, mode: str) -> None:
    """A real search (sz2/sz3/zfp, tiny float64 and float32 fields, the issue's setting):
    the record's verdict agrees with the exact count against its resolved abs bound."""
    from perfscout.tools.evaluate import evaluate_full

    for seed in range(6):
        rng = np.random.default_rng(5000 + seed)
        dtype = DTYPES[seed % 2]
        x = (rng.standard_normal((6, 7)) * 10.0 ** rng.uniform(-3, 3)).astype(dtype)
        ev = evaluate_full(x, codec, mode, 4.0 if mode == "ratio" else 60.0, repeats=1)
        rec = ev.result
        if rec.abs_bound is None or ev.reconstructed is None:
            continue
        want = exact_beyond(x, ev.reconstructed, abs_bound=rec.abs_bound)
        if want:
            assert rec.bound_ok is False, (codec, mode, seed, want, rec)
        else:  # a missed PSNR target is bound_violated though every element held the bound
            assert rec.bound_ok or (mode == "psnr" and rec.status == "bound_violated"), (codec, mode, seed, rec)
