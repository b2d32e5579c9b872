"""The cuSZp outlier-mode size model used by benchmarks/gpu_codec.py for CR comparisons,
checked on blocks whose sizes are worked out by hand from the format."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "cuszp_model.py"
_spec = importlib.util.spec_from_file_location("cuszp_model", _PATH)
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)

EB = 0.5  # quantisation step 2 * eb = 1: q = floor(x + 0.5)


def _bytes(block: list[float]) -> int:
    return int(M.block_bytes(np.array(block, np.float32), EB)[0])


def test_all_zero_block_costs_nothing() -> None:
    assert _bytes([0.0] * 32) == 0


def test_constant_block_takes_the_outlier_encoding() -> None:
    # residuals 100, 0, 0, ...: plain = 4 + 4 * 7 = 32; outlier = 4 (sign map) + 1 byte
    assert _bytes([100.0] * 32) == 5


def test_ramp_takes_the_plain_encoding() -> None:
    # q = 0, 1, ..., 31: residuals 0, 1, 1, ...: plain 4 + 4 * 1 = 8, outlier 8 + 0
    assert _bytes([float(i) for i in range(32)]) == 8


def test_outlier_bytes_grow_with_the_first_value() -> None:
    base = [float(i % 2) for i in range(32)]  # residuals alternate +-1 after the first
    big = [70000.0 + v for v in base]  # first residual needs 17 bits: 3 bytes
    assert _bytes(big) == 4 + 4 * 1 + 3
    plain = 4 + 4 * 17
    assert _bytes(big) < plain


def test_elements_past_the_end_count_as_zero() -> None:
    x = np.full(33, 5.0, np.float32)
    # block 2 holds one 5 and then zeros, not a -5 residual: outlier encoding, 4 + 1 bytes
    # (plain would be 4 + 4 * 3); with a -5 at its second slot it would cost 4 + 4 * 3 + 1
    assert M.block_bytes(x, EB).tolist() == [5, 5]


def test_stream_adds_rate_bytes_padded_to_1024_blocks() -> None:
    x = np.zeros(32 * 1025, np.float32)
    assert M.stream_bytes(x, EB) == 2048
    x[0] = 3.0  # residuals 3, -3, 0, ...: plain 4 + 4 * 2 = 12 beats outlier 4 + 8 + 1
    assert M.stream_bytes(x, EB) == 2048 + 12


@pytest.mark.parametrize("seed", [0, 1])
def test_model_matches_a_loop_over_blocks(seed) -> None:
    """The vectorised model against a plain per-block reading of the same rules."""
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.standard_normal(32 * 50 + 7)).astype(np.float32)
    eb = 0.05
    sizes = M.block_bytes(x, eb)
    q = M.quantize(x, eb)
    for b in range(sizes.size):
        blk = q[32 * b : 32 * b + 32]
        res = np.diff(blk, prepend=0)
        a = np.abs(res)
        fr1, fr2 = int(a.max()).bit_length(), int(a[1:].max(initial=0)).bit_length()
        plain = 4 + 4 * fr1 if fr1 else 0
        outl = (4 + 4 * fr2 if fr2 else 4) + (int(a[0]).bit_length() + 7) // 8
        assert sizes[b] == min(plain, outl), b


def test_quantize_follows_cuszp_rounding_at_half_integers() -> None:
    """floor(d + 0.5) everywhere except a negative exact half-integer d, which cuSZp's
    trunc-then-subtract rounds down once more (d = -1.5 -> -2, not -1)."""
    eb = 0.5  # recip = 1: d = x exactly
    x = np.array([0.4, 0.5, 1.5, -0.4, -0.5, -0.6, -1.5, -2.5, -1.4], dtype=np.float32)
    assert M.quantize(x, eb).tolist() == [0, 1, 2, 0, 0, -1, -2, -3, -1]
    assert M.quantize(x.astype(np.float64), eb).tolist() == [0, 1, 2, 0, 0, -1, -2, -3, -1]


def test_reconstruct_is_q_times_two_eb_in_the_data_precision() -> None:
    x = np.array([0.26, -0.74, 10.0], dtype=np.float32)
    eb = 0.1  # passed to cuSZp as float32(0.1)
    eb32 = np.float32(eb)
    want = (M.quantize(x, eb).astype(np.float32) * eb32) * np.float32(2)
    y = M.reconstruct(x, eb)
    assert y.dtype == np.float32 and np.array_equal(y, want)
    assert np.abs(y - x).max() <= eb * (1 + 1e-6)
