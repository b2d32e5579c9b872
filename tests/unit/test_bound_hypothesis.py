"""Property tests of the bound contract on random arrays, for every CPU backend.

Arrays are 1-D to 3-D, float32 or float64, with values spanning many decades
(including subnormals and exact zeros). For each example the verdict of
:func:`verify_bound` is checked against an independent element-wise computation, and
the backends that promise the bound are held to it:

* SZ family (sz3, sz2, sz3-h5), abs mode: never ``bound_violated``, on any input;
* zfp's accuracy mode: within bound while the data's dynamic range fits its integer
  precision (max|x| / bound below 2^20 for f32, 2^48 for f64); beyond that it may
  violate, which must be *reported* (the verdict always matches the independent check);
* sz2 pw_rel: the verdict is always honest, and the bound holds on single-signed
  values (non-zero, non-subnormal); on mixed-sign data SZ 2.1 sometimes loses the
  sign of a value (e.g. a negative first element among positives), which the
  verifier reports as ``bound_violated``.

sz2 refuses arrays of exactly 20 values, and both SZ filters (sz2, sz3-h5) refuse
absolute bounds below the smallest normal double: those crash the libraries.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from perfscout.codecs import get_codec
from perfscout.codecs.h5filters import SMALLEST_NORMAL_BOUND
from perfscout.errors import CodecError, InputError
from perfscout.tools.bounds import rounding_slack, verify_bound
from perfscout.tools.evaluate import evaluate_full

SZ_FAMILY = ("sz3", "sz2", "sz3-h5")

# Magnitudes near 1e300 overflow float64 in some metric intermediates (squares in SSIM);
# the bound check does not square anything, and is what these tests are about.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
LIMIT = {np.float32: float(np.float32(1e37)), np.float64: 1e300}  # max - min stays finite


@st.composite
def fields(
    draw: st.DrawFn, *, nonzero: bool = False, subnormal: bool = True,
    styles: tuple[str, ...] = ("any", "smooth", "decades"),
) -> np.ndarray:
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=12))
    limit = LIMIT[dtype]
    width = 32 if dtype is np.float32 else 64
    style = draw(st.sampled_from(styles))
    if style == "any":  # anything finite, subnormals and zeros included
        elements = st.floats(-limit, limit, width=width, allow_nan=False, allow_subnormal=subnormal)
        a = draw(hnp.arrays(dtype, shape, elements=elements))
    else:
        n = int(np.prod(shape))
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        if style == "smooth":  # a ramp plus noise at one random scale
            scale = 10.0 ** draw(st.integers(-30 if dtype is np.float32 else -300, 30))
            a = (np.cumsum(rng.standard_normal(n)) * scale).reshape(shape)
        else:  # every element at its own decade
            lo = -40 if dtype is np.float32 else -300
            a = rng.standard_normal(n) * 10.0 ** rng.integers(lo, 30, n)
        a = np.clip(a, -limit, limit).astype(dtype).reshape(shape)
    if nonzero:
        tiny = np.finfo(dtype).tiny
        a = np.where(np.abs(a) < tiny, dtype(1.0), a).astype(dtype)
    return np.ascontiguousarray(a)


bounds = st.floats(1e-6, 1e3).map(lambda b: float(f"{b:.3g}"))


def independent_status(
    x: np.ndarray, y: np.ndarray, allowed: np.ndarray | float, bound: np.ndarray | float,
    pw_rel: float | None = None,
) -> str:
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.abs(x.astype(np.float64) - y.astype(np.float64))
    err = np.where(np.isnan(err), np.inf, err)
    excess = np.array(err - allowed, dtype=np.float64)
    # beyond in exact arithmetic (issue 30): a rounded error equal to the allowance may
    # stand for one a hair beyond it; those are decided in rationals here
    for i in np.flatnonzero((excess.reshape(-1) == 0) & (err.reshape(-1) > 0)):
        xv = Fraction(float(x.flat[i]))
        d = abs(xv - Fraction(float(y.flat[i])))
        exact = Fraction(float(allowed)) if pw_rel is None else Fraction(pw_rel) * abs(xv)
        excess.flat[i] = np.nextafter(0.0, 1.0) if d > exact else 0.0
    if not (excess > 0).any():
        return "ok"
    return "bound_violated" if (excess > rounding_slack(x, y, bound)).any() else "bound_overshoot"


def sz2_refuses(codec: str, x: np.ndarray) -> bool:
    """sz2 refuses exactly-20-value arrays (they crash SZ 2.1; see h5filters.SZ2Codec)."""
    return codec == "sz2" and x.size == 20


def roundtrip(codec: str, mode: str, bound: float, x: np.ndarray) -> np.ndarray | None:
    c = get_codec(codec, mode, bound)
    if sz2_refuses(codec, x):
        with pytest.raises(CodecError, match="exactly 20 values"):
            c.compress(x)
        return None
    y = c.decompress(c.compress(x))
    assert y.shape == x.shape and y.dtype == x.dtype
    return y


@pytest.mark.parametrize("codec", SZ_FAMILY)
@settings(max_examples=40)
@given(x=fields(), bound=bounds)
def test_sz_family_abs_bound_holds(codec: str, x: np.ndarray, bound: float) -> None:
    y = roundtrip(codec, "abs", bound, x)
    if y is None:
        return
    check = verify_bound(x, y, abs_bound=bound)
    assert check.status == independent_status(x, y, bound, bound)
    assert check.status in ("ok", "bound_overshoot"), check.message


@settings(max_examples=50)
@given(x=fields(), bound=bounds)
def test_zfp_abs_verdict_is_honest_and_holds_within_its_precision(x: np.ndarray, bound: float) -> None:
    y = roundtrip("zfp", "abs", bound, x)
    check = verify_bound(x, y, abs_bound=bound)
    assert check.status == independent_status(x, y, bound, bound)
    headroom = 2.0**20 if x.dtype == np.float32 else 2.0**48
    if float(np.max(np.abs(x.astype(np.float64)))) / bound < headroom:
        assert check.status in ("ok", "bound_overshoot"), check.message


def _pw_status(x: np.ndarray, y: np.ndarray, bound: float) -> tuple[str, str]:
    check = verify_bound(x, y, pw_rel_bound=bound)
    allowed = bound * np.abs(x.astype(np.float64))
    expected = independent_status(x, y, allowed, allowed, pw_rel=bound)  # per-element bound and slack
    return check.status, expected


@settings(max_examples=30)
@given(x=fields(nonzero=True, subnormal=False), bound=st.sampled_from([1e-4, 1e-3, 1e-2, 1e-1]))
def test_sz2_pointwise_verdict_is_honest(x: np.ndarray, bound: float) -> None:
    # Any input: SZ 2.1 loses signs in some cases (see test_evaluate), which is reported.
    y = roundtrip("sz2", "pw_rel", bound, x)
    if y is not None:
        got, expected = _pw_status(x, y, bound)
        assert got == expected


@settings(max_examples=30)
@given(x=fields(nonzero=True, subnormal=False), sign=st.sampled_from([-1, 1]),
       bound=st.sampled_from([1e-4, 1e-3, 1e-2, 1e-1]))
def test_sz2_pointwise_bound_holds_on_single_signed_values(x: np.ndarray, sign: int, bound: float) -> None:
    x = (np.abs(x) * sign).astype(x.dtype)
    y = roundtrip("sz2", "pw_rel", bound, x)
    if y is not None:
        got, expected = _pw_status(x, y, bound)
        assert got == expected and got in ("ok", "bound_overshoot")


@pytest.mark.parametrize("codec", (*SZ_FAMILY, "zfp"))
@settings(max_examples=15)
@given(x=fields(), rel=st.sampled_from([1e-5, 1e-3, 1e-1]))
def test_evaluate_rel_record_matches_independent_check(codec: str, x: np.ndarray, rel: float) -> None:
    ev = evaluate_full(x, codec, "rel", rel, repeats=1)
    r = ev.result
    if sz2_refuses(codec, x):  # a refusal inside the run is an error record, not a crash
        assert r.status == "error" and "exactly 20 values" in r.error and r.bound_ok is None
        return
    if codec in ("sz2", "sz3-h5") and 0 < r.abs_bound < SMALLEST_NORMAL_BOUND:  # subnormal R
        assert r.status == "error" and "smallest normal double" in r.error
        return
    if codec == "sz3-h5" and r.abs_bound < float(np.finfo(x.dtype).smallest_subnormal):  # below f32's resolution
        assert r.status == "error" and "below the smallest float32 value" in r.error
        return
    assert r.status in ("ok", "bound_overshoot", "bound_violated"), r.error
    assert r.status == independent_status(x, ev.reconstructed, r.abs_bound, r.abs_bound)
    assert r.bound_ok is (r.status == "ok")
    if codec in SZ_FAMILY:
        assert r.status != "bound_violated", r.error


# -- issue #12: overflow and huge-range families, every codec, through evaluate -------------
@st.composite
def overflow_fields(draw: st.DrawFn) -> np.ndarray:
    """Values near the dtype's largest (for float64, max - min overflows) or spanning every
    decade: where a value range and every bound derived from it could become inf."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=10))
    n = int(np.prod(shape))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    fmax = float(np.finfo(dtype).max)
    family = draw(st.sampled_from(["top", "smooth_top", "spikes", "decades"]))
    with np.errstate(all="ignore"):
        if family == "top":
            x = rng.choice([-1.0, 1.0], n) * fmax * rng.uniform(0.3, 1.0, n)
        elif family == "smooth_top":
            x = np.cumsum(rng.standard_normal(n))
            x = x / max(float(np.abs(x).max()), 1e-300) * fmax * 0.99
        elif family == "spikes":
            x = rng.standard_normal(n)
            x[rng.integers(0, n, max(1, n // 10))] = fmax * 0.95 * rng.choice([-1.0, 1.0])
        else:
            top = 300 if dtype is np.float64 else 37
            x = rng.standard_normal(n) * 10.0 ** rng.integers(-top, top, n).astype(np.float64)
    return np.ascontiguousarray(np.clip(x, -fmax, fmax).astype(dtype).reshape(shape))


OVERFLOW_CASES = [(c, m) for c in ("sz3", "sz2", "sz3-h5", "zfp", "szp-gpu") for m in ("abs", "rel", "psnr", "ratio")]


def _exact_rel(x: np.ndarray, rel: float) -> float:
    from fractions import Fraction

    lo, hi = float(x.min()), float(x.max())
    exact = Fraction(rel) * (Fraction(hi) - Fraction(lo)) if hi > lo else Fraction(rel) * Fraction(max(abs(lo), abs(hi)))
    return float(min(exact, Fraction(float(np.finfo(np.float64).max))))


@pytest.mark.parametrize(("codec", "mode"), OVERFLOW_CASES)
@settings(max_examples=12, deadline=None)
@given(x=overflow_fields(), pick=st.integers(0, 3))
def test_overflow_families_never_claim_ok_falsely(codec: str, mode: str, x: np.ndarray, pick: int) -> None:
    bound = {"abs": [1e-3, 1e30, 1e300, 1.0][pick], "rel": [1e-3, 1e-6, 0.1, 0.9][pick],
             "psnr": [40.0, 80.0, 20.0, 120.0][pick], "ratio": [2.0, 5.0, 10.0, 30.0][pick]}[mode]
    device = "cuda" if codec == "szp-gpu" else "cpu"  # szp-gpu: its NumPy reference without a GPU
    try:
        ev = evaluate_full(x, codec, mode, bound, device=device, repeats=1)
    except (InputError, CodecError):
        return  # refused with a clear error (e.g. a known crasher)
    r = ev.result
    assert r.status != "codec_crashed", r.error  # every crasher in this family is refused up front
    if r.abs_bound is not None:
        assert np.isfinite(r.abs_bound), r
    if mode == "rel" and r.abs_bound is not None:
        assert r.abs_bound <= _exact_rel(x, bound) * (1 + 1e-12)  # never loosened (the old inf / max cap)
    if r.status in ("ok", "gpu_unavailable") and r.bound_ok:
        y = ev.reconstructed
        assert y is not None and r.max_abs_err is not None and np.isfinite(r.max_abs_err)
        assert independent_status(x, y, r.abs_bound, r.abs_bound) == "ok"
    if r.status in ("ok",) and mode == "psnr":
        assert r.psnr is not None and r.psnr >= bound
