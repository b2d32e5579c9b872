"""The slab-built smooth field: bit-identical to the one-expression build, a fraction of its memory."""

from __future__ import annotations

import importlib
import tracemalloc

import numpy as np
import pytest

from perfscout.datasets.synthetic import (
    SMOOTH_MAX_CYCLES,
    SMOOTH_MODES,
    SMOOTH_NOISE,
    synthetic,
)

S = importlib.import_module("perfscout.datasets.synthetic")  # the package's `synthetic` is the function


def reference_smooth(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """The former whole-array build, verbatim (the oracle)."""
    coords = np.meshgrid(*[np.arange(n) / n for n in shape], indexing="ij", sparse=True)
    field = np.zeros(shape)
    for m in range(SMOOTH_MODES):
        cycles = rng.integers(0, SMOOTH_MAX_CYCLES + 1, size=len(shape))
        if not cycles.any():
            cycles[rng.integers(len(shape))] = 1
        phase = rng.uniform(0, 2 * np.pi)
        amp = rng.uniform(0.5, 1.0) / (m + 1)
        arg = sum(2 * np.pi * int(c) * x for c, x in zip(cycles, coords))
        field = field + amp * np.cos(arg + phase)
    field = field + SMOOTH_NOISE * field.std() * rng.standard_normal(shape)
    return field


@pytest.mark.parametrize("shape", [(1,), (7,), (300,), (1, 40), (40, 1), (64, 64), (7, 9, 11), (33, 70, 50)])
@pytest.mark.parametrize("slab", [1, 100, S.SMOOTH_SLAB_ELEMENTS])
@pytest.mark.parametrize("seed", [0, 3])
def test_slab_built_smooth_is_bit_identical(monkeypatch, shape, slab, seed) -> None:
    monkeypatch.setattr(S, "SMOOTH_SLAB_ELEMENTS", slab)
    got = S._smooth(shape, np.random.default_rng(seed))
    np.testing.assert_array_equal(got, reference_smooth(shape, np.random.default_rng(seed)))


def test_smooth_public_field_matches_the_reference_in_both_dtypes() -> None:
    for dtype, np_dtype in (("f32", np.float32), ("f64", np.float64)):
        f = synthetic("smooth", (16, 20, 24), dtype, seed=2).array
        np.testing.assert_array_equal(f, reference_smooth((16, 20, 24), np.random.default_rng(2)).astype(np_dtype))


def test_smooth_generation_needs_a_few_times_its_output() -> None:
    """Peak allocation (tracemalloc sees NumPy's buffers) of a 16 MiB float32 smooth field:
    the float64 field and numpy's std temporary, ~4x the output (then the field and the cast); the
    one-expression build needs ~8x."""
    shape = (64, 256, 256)
    out_nbytes = int(np.prod(shape)) * 4
    tracemalloc.start()
    try:
        synthetic("smooth", shape, "f32")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        reference_smooth(shape, np.random.default_rng(0)).astype(np.float32)
        _, ref_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 4.3 * out_nbytes, (peak / out_nbytes, ref_peak / out_nbytes)
    assert peak < 0.6 * ref_peak, (peak / out_nbytes, ref_peak / out_nbytes)


# -- grf and grayscott: built in place, in the output's dtype ------------------------------

def reference_grf(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """The former whole-array float64 GRF, verbatim (the oracle)."""
    noise = rng.standard_normal(shape)
    spectrum = np.fft.rfftn(noise)
    k = S._grid_frequencies(shape)
    amplitude = np.zeros_like(k)
    nz = k > 0
    amplitude[nz] = k[nz] ** (-(S.GRF_SHELL_SLOPE + len(shape) - 1) / 2)
    field = np.fft.irfftn(spectrum * amplitude, s=shape, axes=tuple(range(len(shape))))
    std = field.std()
    return (field - field.mean()) / std if std > 0 else field


def _reference_laplacian(a: np.ndarray) -> np.ndarray:
    out = -2.0 * a.ndim * a
    for axis in range(a.ndim):
        out += np.roll(a, 1, axis=axis) + np.roll(a, -1, axis=axis)
    return out


def reference_grayscott(shape: tuple[int, ...], rng: np.random.Generator, steps: int) -> np.ndarray:
    """The former whole-array float64 Gray-Scott, verbatim (the oracle)."""
    u = np.ones(shape)
    v = np.zeros(shape)
    for _ in range(int(rng.integers(3, 7))):
        sl = []
        for n in shape:
            half = max(1, n // 16)
            c = int(rng.integers(0, n))
            sl.append(slice(max(0, c - half), min(n, c + half + 1)))
        u[tuple(sl)] = 0.50
        v[tuple(sl)] = 0.25
    v += 0.01 * rng.random(shape)
    for _ in range(steps):
        uvv = u * v * v
        u_next = u + S.GS_DU * _reference_laplacian(u) - uvv + S.GS_FEED * (1.0 - u)
        v = v + S.GS_DV * _reference_laplacian(v) + uvv - (S.GS_FEED + S.GS_KILL) * v
        u = u_next
    return v


SHAPES = [(1,), (2,), (300,), (1, 40), (40, 1), (33, 20), (7, 9, 11), (12, 1, 5)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("slab", [1, 37, S.SLAB_ELEMENTS])
def test_slab_grayscott_float64_is_bit_identical(monkeypatch, shape, slab) -> None:
    monkeypatch.setattr(S, "SLAB_ELEMENTS", slab)
    got = S._grayscott(shape, np.random.default_rng(4), steps=25)
    np.testing.assert_array_equal(got, reference_grayscott(shape, np.random.default_rng(4), 25))


@pytest.mark.parametrize("shape", [(1,), (2,), (300,), (40, 1), (1, 40), (33, 20), (7, 9, 11), (16, 1, 12), (5, 4, 1)])
@pytest.mark.parametrize("slab", [1, 50, S.SLAB_ELEMENTS])
def test_lean_grf_matches_the_whole_array_build(monkeypatch, shape, slab) -> None:
    monkeypatch.setattr(S, "SLAB_ELEMENTS", slab)
    want = reference_grf(shape, np.random.default_rng(7))
    got64 = S._grf(shape, np.random.default_rng(7), dtype=np.float64)
    np.testing.assert_allclose(got64, want, rtol=0, atol=1e-12)
    got32 = S._grf(shape, np.random.default_rng(7), dtype=np.float32)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, want, rtol=0, atol=2e-5)  # float32 transforms


def test_float32_grayscott_follows_the_float64_one() -> None:
    f64 = synthetic("grayscott", (48, 40), "f64", seed=3).array
    f32 = synthetic("grayscott", (48, 40), "f32", seed=3).array
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, f64, rtol=0, atol=1e-4)


_PEAK_SCRIPT = """
import sys, numpy as np
from perfscout.datasets.synthetic import synthetic
import scipy.fft
def hwm():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) * 1024
import importlib
S = importlib.import_module("perfscout.datasets.synthetic")
shape = (64, 256, 256)
base = rss()
if sys.argv[1] == "grf":
    out = synthetic("grf", shape, "f32").array
else:  # a few steps: the memory of every step is the same
    out = S._grayscott(shape, np.random.default_rng(0), steps=3, dtype=np.float32)
print(hwm() - base, out.nbytes)
"""


@pytest.mark.parametrize(("kind", "limit"), [("grf", 2.1), ("grayscott", 2.1)])
def test_lean_generators_peak_memory(kind: str, limit: float) -> None:
    """Peak RSS of a fresh process generating a 16 MiB float32 field (VmHWM sees every
    allocation, FFT workspaces included): about twice the output plus fixed slab
    temporaries (the whole-array builds needed ~8x and ~15x)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, kind, "f32"], capture_output=True, text=True,
                         timeout=300, check=True)
    peak, nbytes = map(int, out.stdout.strip().splitlines()[-1].split())
    # two fields' worth plus slab temporaries of a fixed size (~10 MiB, whatever the shape)
    assert peak <= limit * nbytes + 16 * 2**20, f"{kind}: peak {peak / nbytes:.2f}x the output"
