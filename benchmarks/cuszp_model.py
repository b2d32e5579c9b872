"""Size model of cuSZp's 1-D "outlier" mode, for comparing compression ratios on the same field.

cuSZp (szcompressor/cuSZp) is not installed on the device machine and nothing can be fetched
there, so its stream size is computed here from the format its 1-D outlier-mode kernels write
(read from the public source, re-expressed in NumPy/CuPy; no cuSZp code is used):

- quantise as its kernels do (:func:`quantize`): d = x * (0.5f / eb) and t = d + 0.5 in the
  data's precision, q = trunc(t), minus 1 when d < -0.5 (so floor(t), except that a negative
  exact half-integer d rounds down once more);
- blocks of 32 consecutive elements; inside a block the residual is the 1-D Lorenzo
  difference, with 0 before the block's first element; elements past the end count as 0;
- per block, with a = |residual|:
  - plain encoding: 0 bytes if every a is 0, else a 4-byte sign map plus 4 bytes per bit of
    the largest a;
  - outlier encoding: the first residual stored apart in ceil(bits(a0) / 8) bytes, then a
    4-byte sign map plus 4 bytes per bit of the largest of the other 31 (4 bytes if those
    are all 0);
  - the smaller of the two (plain on a tie);
- one rate byte per block, counted for the block count rounded up to 1024 (cuSZp's
  ``rate_ofs``: one warp's chunk is 32 x 1024 elements).

:func:`reconstruct` is what cuSZp's decoders write for each element (q * eb * 2 in the data's
precision; the encodings and the 1-D/2-D/3-D processing are lossless on q, so it is the same
for all of them). tests/gpu/test_cuszp.py checks the size model and the reconstruction against
cuSZp itself on a GPU (a cuSZp built from source with scripts/build_cuszp.sh). ``xp`` is numpy
or cupy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

BLOCK = 32
CHUNK_BLOCKS = 1024  # the rate bytes are padded to a multiple of this many blocks


def _bits(a: Any, xp: Any) -> Any:
    """Bit length of each non-negative integer (0 for 0), exactly, for values below 2**53."""
    _, e = xp.frexp(a.astype(xp.float64))
    return e.astype(xp.int64)


def _precision(x: Any, xp: Any) -> tuple[Any, Any]:
    """(flat array, scalar type) in the precision cuSZp computes in: float32 for float32 data
    (and for anything not float64), float64 for float64 data."""
    a = xp.asarray(x)
    t = xp.float64 if a.dtype == xp.float64 else xp.float32
    return a.astype(t).reshape(-1), t


def quantize(x: Any, eb: float, xp: Any = np) -> Any:
    """cuSZp's quantisation codes of ``x`` (flattened) at absolute bound ``eb``, as int64.

    ``eb`` is what cuSZp's C API receives, a float: for float64 data it is widened back to
    double. float32: ``recip = 0.5f / eb``, ``d = x * recip``, ``t = d + 0.5f`` (two rounded
    float32 operations, no fused multiply-add), ``q = trunc(t) - (d < -0.5)``; float64 the same
    in double."""
    flat, t = _precision(x, xp)
    eb_t = t(np.float32(eb)) if t is xp.float32 else t(float(np.float32(eb)))
    recip = t(0.5) / eb_t
    d = flat * recip
    q = xp.trunc(d + t(0.5)).astype(xp.int64)
    return q - (d < t(-0.5)).astype(xp.int64)


def reconstruct(x: Any, eb: float, xp: Any = np) -> Any:
    """What cuSZp's decoders write for ``x`` (same shape and dtype): ``q * eb * 2`` computed in
    the data's precision (int to float, then two rounded multiplications)."""
    flat, t = _precision(x, xp)
    eb_t = t(np.float32(eb)) if t is xp.float32 else t(float(np.float32(eb)))
    y = (quantize(x, eb, xp).astype(t) * eb_t) * t(2)
    return y.reshape(xp.asarray(x).shape)


def _block_widths(x: Any, eb: float, xp: Any) -> tuple[Any, Any, Any]:
    """Per 32-element block: (bits of the largest |residual|, bits of the largest of the
    other 31, bytes of the first residual)."""
    n = int(math.prod(xp.asarray(x).shape))
    nb = -(-n // BLOCK)
    q = xp.zeros(nb * BLOCK, dtype=xp.int64)
    q[:n] = quantize(x, eb, xp)
    q = q.reshape(nb, BLOCK)
    d = q.copy()
    d[:, 1:] -= q[:, :-1]
    a = xp.abs(d)
    a.reshape(-1)[n:] = 0  # elements past the end are zeros, not residuals
    fr1 = _bits(a.max(axis=1), xp)
    fr2 = _bits(a[:, 1:].max(axis=1), xp)
    out_bytes = (_bits(a[:, 0], xp) + 7) // 8
    return fr1, fr2, out_bytes


def block_bytes(x: Any, eb: float, xp: Any = np) -> Any:
    """Payload bytes of each 32-element block of ``x`` (flattened) under cuSZp's outlier mode."""
    fr1, fr2, out_bytes = _block_widths(x, eb, xp)
    plain = xp.where(fr1 > 0, 4 + 4 * fr1, 0)
    outlier = xp.where(fr2 > 0, 4 + 4 * fr2, 4) + out_bytes
    return xp.where(plain <= outlier, plain, outlier)


def rate_bytes(x: Any, eb: float, xp: Any = np) -> Any:
    """The rate byte cuSZp's 1-D outlier mode writes for each block (uint8; the unused blocks
    of the last 1024-block chunk are 0): the bit planes, plus for a block that stores its
    first residual apart bit 7 and (bytes - 1) in bits 5-6."""
    fr1, fr2, out_bytes = _block_widths(x, eb, xp)
    plain = xp.where(fr1 > 0, 4 + 4 * fr1, 0)
    outlier = xp.where(fr2 > 0, 4 + 4 * fr2, 4) + out_bytes
    rate = xp.where(plain <= outlier, fr1, fr2 | 0x80 | ((out_bytes - 1) << 5)).astype(xp.uint8)
    nb = int(rate.size)
    out = xp.zeros(-(-nb // CHUNK_BLOCKS) * CHUNK_BLOCKS, dtype=xp.uint8)
    out[:nb] = rate
    return out


def stream_bytes(x: Any, eb: float, xp: Any = np) -> int:
    """Modelled size in bytes of cuSZp's 1-D outlier-mode stream of ``x`` at absolute bound ``eb``."""
    n = int(math.prod(x.shape))
    nb = -(-n // BLOCK)
    rate_bytes = -(-nb // CHUNK_BLOCKS) * CHUNK_BLOCKS
    return int(block_bytes(x, eb, xp).sum()) + rate_bytes
