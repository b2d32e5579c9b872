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
