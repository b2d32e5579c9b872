"""Size model of cuSZp's 1-D "outlier" mode, for comparing compression ratios on the same field.

cuSZp (szcompressor/cuSZp) is not installed on the device machine and nothing can be fetched
there, so its stream size is computed here from the format its 1-D outlier-mode kernels write
(read from the public source, re-expressed in NumPy/CuPy; no cuSZp code is used):

- quantise q = floor(x * (0.5 / eb) + 0.5) in float32 (cuSZp rounds half up; NumPy's rint
  differs only on exact half-integers);
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

It is a model: the stream cuSZp writes for the same input and bound should have this size,
but no cuSZp run checked that here. ``xp`` is numpy or cupy.
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


def block_bytes(x: Any, eb: float, xp: Any = np) -> Any:
    """Payload bytes of each 32-element block of ``x`` (flattened) under cuSZp's outlier mode."""
    flat = xp.asarray(x, dtype=xp.float32).reshape(-1)
    n = int(flat.size)
    nb = -(-n // BLOCK)
    recip = xp.float32(0.5 / eb)
    q = xp.zeros(nb * BLOCK, dtype=xp.int64)
    q[:n] = xp.floor(flat * recip + xp.float32(0.5)).astype(xp.int64)
    q = q.reshape(nb, BLOCK)
    d = q.copy()
    d[:, 1:] -= q[:, :-1]
    a = xp.abs(d)
    a.reshape(-1)[n:] = 0  # elements past the end are zeros, not residuals
    fr1 = _bits(a.max(axis=1), xp)
    fr2 = _bits(a[:, 1:].max(axis=1), xp)
    out_bytes = (_bits(a[:, 0], xp) + 7) // 8
    plain = xp.where(fr1 > 0, 4 + 4 * fr1, 0)
    outlier = xp.where(fr2 > 0, 4 + 4 * fr2, 4) + out_bytes
    return xp.where(plain <= outlier, plain, outlier)


def stream_bytes(x: Any, eb: float, xp: Any = np) -> int:
    """Modelled size in bytes of cuSZp's 1-D outlier-mode stream of ``x`` at absolute bound ``eb``."""
    n = int(math.prod(x.shape))
    nb = -(-n // BLOCK)
    rate_bytes = -(-nb // CHUNK_BLOCKS) * CHUNK_BLOCKS
    return int(block_bytes(x, eb, xp).sum()) + rate_bytes
