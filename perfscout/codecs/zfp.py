"""ZFP through zfpy.

Modes: ``abs`` (zfp's fixed-accuracy mode; ``bound`` is the tolerance) and
``fixed_rate`` (``bound`` is bits per value; not an error bound, so results carry
``bound_ok=None``). zfp's accuracy mode aims at the tolerance but does not promise it
for every input: perfscout verifies each result and reports any excess as
``bound_overshoot``/``bound_violated``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perfscout.codecs._checks import check_options, checked_input, checked_stream
from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.chunked import check_threads, compress_chunked, decompress_chunked, is_chunked
from perfscout.errors import CodecError


class ZFPCodec(Codec):
    codec_id = "zfp"
    family = "zfp"
    device = "cpu"
    native_modes = ("abs", "fixed_rate")
    #: zfp's accuracy mode runs a tolerance t as 2^floor(log2 t): a staircase of powers of two
    abs_control_step = 2.0
    distribution = "zfpy"
    requires = ("zfpy",)
    install_hint = "pip install zfpy"
    #: zfp codes blocks of 4 values per axis: chunk boundaries on multiples of 4 rows pad nothing
    chunk_align = 4

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        super().__init__(mode, bound, **options)
        check_options(self, ("threads",))  # threads: N chunks in parallel (perfscout.codecs.chunked)
        self.threads = check_threads(self.codec_id, self.options.get("threads"))
        if mode == "fixed_rate" and not 0 < self.bound <= 64:
            raise CodecError(f"zfp fixed_rate needs 0 < bits per value <= 64, got {self.bound}")

    def _check_rate(self, data: np.ndarray) -> None:
        """Refuse a rate below what zfp can honour for this dtype and dimensionality.

        zfp spends ``floor(4^d * rate + 0.5)`` bits on a block of 4^d values and raises
        that to a floor of 1 + 8 (float32) or 1 + 11 (float64) bits; zfpy 1.0.1 crashes
        (segfault, abort, corrupt heap) on such rates for 2-D to 4-D arrays
        (``fixed_rate 0.001``; found in child processes), and where it does not, the rate
        would not be the one asked for."""
        if self.mode != "fixed_rate":
            return
        values_per_block = 4 ** data.ndim
        floor_bits = 9 if data.dtype == np.float32 else 12
        if math.floor(values_per_block * self.bound + 0.5) < floor_bits:
            minimum = (floor_bits - 0.5) / values_per_block
            raise CodecError(
                f"zfp: fixed_rate {self.bound:g} bits per value is below what zfp can honour for "
                f"{data.ndim}-D {data.dtype} ({floor_bits} bits per block of {values_per_block}: "
                f"rate >= {minimum:.4g}); zfpy crashes on such rates"
            )

    def compress(self, array: np.ndarray) -> Compressed:
        import zfpy

        data = checked_input(self, array, max_ndim=4)
        self._check_rate(data)
        if self.threads > 1 and data.shape[0] > 1:
            return compress_chunked(self, data, self.threads)
        kwargs = {"tolerance": self.bound} if self.mode == "abs" else {"rate": self.bound}
        try:
            raw = zfpy.compress_numpy(data, **kwargs)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise CodecError(f"zfp compression failed: {exc}") from exc
        return self.sealed(data, raw)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        import zfpy

        if is_chunked(compressed):
            return decompress_chunked(self, compressed)
        shape, dtype = checked_stream(self, compressed)
        try:
            out = zfpy.decompress_numpy(compressed.data)
        except (RuntimeError, ValueError, TypeError, IndexError) as exc:
            raise CodecError(f"zfp stream could not be decoded: {exc}") from exc
        if out.shape != shape or out.dtype != dtype:
            raise CodecError(f"zfp stream holds {out.dtype}{out.shape}, expected {dtype}{shape}")
        return out
