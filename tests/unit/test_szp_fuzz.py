"""Fuzzing the strict bound: many small, adversarial arrays through both implementations.

Every element of every decoded array must be within the stream's absolute bound (and
non-finite inputs must come back bit for bit). The CPU part runs in CI: a seeded loop of
SZP_CPU_FUZZ_N arrays (default 30 000) plus hypothesis-drawn arrays. The GPU part
(marked ``gpu``) runs SZP_GPU_FUZZ_N arrays (default 20 000) and also checks that every GPU
stream is byte-identical to the reference's (in the format the kernels write,
gpu.WRITE_VERSION). Recorded runs: benchmarks/results/szp_gpu_README.md.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from perfscout.codecs.szp import format as F

CPU_N = int(os.environ.get("SZP_CPU_FUZZ_N", "30000"))
GPU_N = int(os.environ.get("SZP_GPU_FUZZ_N", "20000"))
GPU_SEED = int(os.environ.get("SZP_GPU_FUZZ_SEED", "7"))  # several processes: several seeds

SPECIALS = {
    np.float32: [np.nan, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-45, -1e-45, 1.2e-38, 0.0, -0.0],
    np.float64: [np.nan, np.inf, -np.inf, 1.7e308, -1.7e308, 5e-324, 2.2e-308, 0.0, -0.0],
}


def random_case(rng: np.random.Generator) -> tuple[np.ndarray, str, float, int]:
    """One adversarial (array, mode, bound, block_ndim)."""
    dtype = np.float32 if rng.random() < 0.6 else np.float64
    ndim = int(rng.choice([1, 1, 2, 2, 3, 3, 4]))
    if ndim == 1:
        shape = (int(rng.integers(1, 200)),)
    else:
        shape = tuple(int(rng.integers(1, 14)) for _ in range(ndim))
    n = int(np.prod(shape))
    bound = float(10.0 ** rng.uniform(-7, 1))
    if rng.random() < 0.03:
        bound = float(rng.choice([1e-40, 1e-300, 1e30, 1e300]))
    mode = "abs" if rng.random() < 0.5 else "rel"
    kind = int(rng.integers(0, 8))
    scale = 10.0 ** rng.uniform(-6, 8)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is intended
        x = _values(rng, kind, n, scale, bound).astype(dtype)
    if rng.random() < 0.2:  # inject special values
        k = int(rng.integers(1, max(2, n // 4)))
        x[rng.integers(0, n, k)] = rng.choice(SPECIALS[dtype], k)
    block_ndim = int(rng.integers(1, min(ndim, 3) + 1))
    return x.reshape(shape), mode, bound, block_ndim


def _values(rng: np.random.Generator, kind: int, n: int, scale: float, bound: float) -> np.ndarray:
    if kind == 0:  # smooth
        x = np.cumsum(rng.standard_normal(n)) * scale
    elif kind == 1:  # white noise
        x = rng.standard_normal(n) * scale
    elif kind == 2:  # mixed magnitudes (q overflow and rounding failures)
        x = rng.standard_normal(n) * 10.0 ** rng.integers(-10, 30, n)
    elif kind == 3:  # exact half-steps: ties in the rounding
        x = (rng.integers(-1000, 1000, n) + 0.5) * 2 * bound
    elif kind == 4:  # constant
        x = np.full(n, rng.standard_normal() * scale)
    elif kind == 5:  # integers on the quantisation grid and around it
        x = rng.integers(-(2**27), 2**27, n) * 2 * bound + rng.choice([0, 1e-12, -1e-12], n)
    elif kind == 6:  # a step function
        x = np.where(np.arange(n) < n // 2, scale, -scale) + rng.standard_normal(n)
    else:  # far from zero (a temperature in kelvin): format 4's rounding step, bounds near eps * |x|
        spread = scale * 10.0 ** rng.uniform(-7, -1)
        x = rng.choice([-1.0, 1.0]) * scale + np.cumsum(rng.standard_normal(n)) * spread
    return x


def check_within(x: np.ndarray, y: np.ndarray, stream: bytes) -> None:
    h = F.parse_header(stream)
    assert y.shape == x.shape and y.dtype == x.dtype
    finite = np.isfinite(x)
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.abs(x[finite].astype(np.float64) - y[finite].astype(np.float64))
    if err.size:
        worst = int(np.argmax(err))
        assert err[worst] <= h.abs_bound, (
            f"bound violated: |{x[finite][worst]!r} - {y[finite][worst]!r}| = {err[worst]!r} "
            f"> {h.abs_bound!r} ({h.mode} {h.bound!r}, {x.dtype}, shape {x.shape})")
    assert np.array_equal(x[~finite].view(np.uint8), y[~finite].view(np.uint8))


def test_seeded_fuzz_reference() -> None:
    rng = np.random.default_rng(20261130)
    outliers = 0
    for _ in range(CPU_N):
        x, mode, bound, bnd = random_case(rng)
        s = F.encode(x, mode, bound, bnd)
        check_within(x, F.decode(s), s)
        outliers += F.parse_header(s).n_outliers
    assert outliers > 0  # the generator does reach the outlier path


@given(
    x=hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64]),
        shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=12),
        elements={"allow_nan": True, "allow_infinity": True, "allow_subnormal": True},
    ),
    mode=st.sampled_from(["abs", "rel"]),
    exponent=st.floats(min_value=-12, max_value=6),
    bnd=st.integers(min_value=1, max_value=3),
)
def test_hypothesis_fuzz_reference(x: np.ndarray, mode: str, exponent: float, bnd: int) -> None:
    bnd = min(bnd, x.ndim)
    s = F.encode(x, mode, 10.0**exponent, bnd)
    check_within(x, F.decode(s), s)


def _flush(a: np.ndarray) -> np.ndarray:
    """Flush subnormals to (signed) zero, as GPU float32 code built with -ftz does."""
    a = np.asarray(a)
    return np.where(np.abs(a) < np.finfo(a.dtype).smallest_normal, np.copysign(0, a), a).astype(a.dtype)


def _quantize_ftz(x: np.ndarray, qz: F.Quantizer) -> tuple[np.ndarray, np.ndarray]:
    """format.quantize as a flush-to-zero machine would compute it."""
    T = x.dtype.type
    xf, recip, step = _flush(x), _flush(T(qz.recip)), _flush(T(qz.step))
    mag = x.view(np.uint32) & np.uint32(0x7FFFFFFF)
    sub = (mag != 0) & (mag < np.uint32(0x00800000))
    with np.errstate(all="ignore"):
        qf = np.rint(_flush(xf * recip))
        ok = (np.abs(qf) < F.QLIMIT) & ~sub
        q = np.where(ok, qf, T(0)).astype(np.int32)
        xr = _flush(_flush(q.astype(x.dtype)) * step)
        ok &= (_flush(np.abs(_flush(xf - xr))) <= T(qz.check)) if qz.check > 0 else (xf == xr)
    return q, ~ok


def test_encoder_decisions_do_not_depend_on_flush_to_zero() -> None:
    # GPU float32 code may flush subnormals (seen on the H200 through CuPy/NVRTC even
    # with --ftz=false); the format's rules keep every operand normal, so q and the
    # outlier set are the same either way.
    rng = np.random.default_rng(99)
    seen = 0
    while seen < 3000:
        x, mode, bound, _ = random_case(rng)
        if x.dtype != np.float32:
            continue
        seen += 1
        qz = F.resolve_quantizer(x.dtype, mode, bound, F.finite_range(x) if mode == "rel" else None)
        q, bad = F.quantize(x, qz)
        q_ftz, bad_ftz = _quantize_ftz(x, qz)
        assert np.array_equal(q, q_ftz) and np.array_equal(bad, bad_ftz), (mode, bound, qz)


@pytest.mark.gpu
@pytest.mark.slow
def test_seeded_fuzz_gpu_byte_identical() -> None:
    import cupy as cp

    from perfscout.codecs.szp import gpu as G

    rng = np.random.default_rng(GPU_SEED)
    mismatches = []
    for i in range(GPU_N):
        x, mode, bound, bnd = random_case(rng)
        gpu_stream = G.to_host(G.compress_device(cp.asarray(x), mode, bound, bnd))
        ref_stream = F.encode(x, mode, bound, bnd, version=G.WRITE_VERSION)
        if gpu_stream != ref_stream:
            mismatches.append((i, x.dtype, x.shape, mode, bound, bnd))
            continue
        y = G.decompress_device(gpu_stream).get()
        check_within(x, y, gpu_stream)
        if i % 10 == 0:  # and the CPU decodes the GPU's stream identically
            assert np.array_equal(F.decode(gpu_stream).view(np.uint8), y.view(np.uint8))
    assert not mismatches, f"{len(mismatches)} GPU streams differ from the reference: {mismatches[:5]}"


# -- issue #12: overflowing value ranges (bound * (max - min) must never be loosened) ---------
OVERFLOW_N = int(os.environ.get("SZP_OVERFLOW_FUZZ_N", "1500"))


def overflow_case(rng: np.random.Generator) -> tuple[np.ndarray, str, float, int]:
    """Values near the dtype's largest (float64: max - min overflows), or huge ranges."""
    dtype = np.float64 if rng.random() < 0.6 else np.float32
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(rng.integers(1, 12 if ndim > 1 else 300)) for _ in range(ndim))
    n = int(np.prod(shape))
    fmax = float(np.finfo(dtype).max)
    kind = int(rng.integers(0, 3))
    with np.errstate(all="ignore"):
        if kind == 0:  # both signs at the top
            x = rng.choice([-1.0, 1.0], n) * fmax * rng.uniform(0.3, 1.0, n)
        elif kind == 1:  # a smooth field scaled to the top
            x = np.cumsum(rng.standard_normal(n))
            x = x / max(float(np.abs(x).max()), 1e-300) * fmax * rng.uniform(0.5, 1.0)
        else:  # every decade at once
            top = 300 if dtype is np.float64 else 37
            x = rng.standard_normal(n) * 10.0 ** rng.integers(-top, top, n).astype(np.float64)
        x = np.clip(x, -fmax, fmax).astype(dtype)
    mode = "rel" if rng.random() < 0.7 else "abs"
    bound = float(rng.choice([1e-6, 1e-3, 1e-1, 0.5])) if mode == "rel" else float(10.0 ** rng.uniform(-3, 300))
    return x.reshape(shape), mode, bound, int(rng.integers(1, min(ndim, 3) + 1))


def check_rel_bound_exact(x: np.ndarray, stream: bytes) -> None:
    """The enforced bound is bound * (max - min) computed exactly (Fraction), to within the
    rounding of that product to a double (a few ulps), never the old cap at the dtype's max."""
    from fractions import Fraction

    h = F.parse_header(stream)
    assert np.isfinite(h.abs_bound) and h.abs_bound >= 0
    if h.mode != "rel":
        return
    finite = x[np.isfinite(x)].astype(np.float64)
    if finite.size == 0:
        return
    exact = Fraction(h.bound) * (Fraction(float(finite.max())) - Fraction(float(finite.min())))
    limit = exact * (1 + Fraction(4) * Fraction(float(np.finfo(np.float64).eps)))
    assert Fraction(h.abs_bound) <= limit, f"enforced {h.abs_bound!r} is looser than bound x R = {float(exact)!r}"


def test_overflow_family_reference() -> None:
    rng = np.random.default_rng(1212)
    for _ in range(OVERFLOW_N):
        x, mode, bound, bnd = overflow_case(rng)
        s = F.encode(x, mode, bound, bnd)
        check_rel_bound_exact(x, s)
        check_within(x, F.decode(s), s)


def test_the_issue_case_enforces_bound_times_range() -> None:
    # +-1.7e308: R = 3.4e308 overflows float64; the bound is 1e-3 * R = 3.4e305, not float64 max.
    x = np.array([1.7e308, -1.7e308, 3.0, 1e307], dtype=np.float64)
    s = F.encode(x, "rel", 1e-3, 1)
    assert F.parse_header(s).abs_bound == pytest.approx(3.4e305, rel=1e-15)
    check_within(x, F.decode(s), s)


@pytest.mark.gpu
def test_overflow_family_gpu_byte_identical() -> None:
    import cupy as cp

    from perfscout.codecs.szp import gpu as G

    rng = np.random.default_rng(1213)
    for _ in range(OVERFLOW_N):
        x, mode, bound, bnd = overflow_case(rng)
        gpu_stream = G.to_host(G.compress_device(cp.asarray(x), mode, bound, bnd))
        assert gpu_stream == F.encode(x, mode, bound, bnd, version=G.WRITE_VERSION), (x.dtype, x.shape, mode, bound, bnd)
        check_rel_bound_exact(x, gpu_stream)
        check_within(x, G.decompress_device(gpu_stream).get(), gpu_stream)
