"""SZ3 through pysz (the SZ3 project's own Python binding).

Native modes: ``abs`` and ``rel`` (value-range relative, SZ3 computes the range
itself). SZ3 has no point-wise relative mode in this binding, so ``pw_rel`` is not
offered. Options: ``algorithm`` (``interp_lorenzo`` default, ``interp``,
``lorenzo_reg``, ``nopred``, ``lossless``); ``threads`` (N > 1: N independent chunks
compressed in parallel, :mod:`perfscout.codecs.chunked`; this pysz has no OpenMP).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfscout.codecs._checks import check_options, checked_input, checked_stream
from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.chunked import check_threads, compress_chunked, decompress_chunked, is_chunked
from perfscout.errors import CodecError

_ALGORITHMS = ("lorenzo_reg", "interp_lorenzo", "interp", "nopred", "lossless")


class SZ3Codec(Codec):
    codec_id = "sz3"
    family = "sz"
    device = "cpu"
    native_modes = ("abs", "rel")
    distribution = "pysz"
    requires = ("pysz",)
    install_hint = "pip install 'pysz>=1.1'"

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        super().__init__(mode, bound, **options)
        check_options(self, ("algorithm", "threads"))
        self.threads = check_threads(self.codec_id, self.options.get("threads"))
        algorithm = self.options.get("algorithm", "interp_lorenzo")
        if algorithm not in _ALGORITHMS:
            raise CodecError(f"sz3: unknown algorithm {algorithm!r}; choose one of {', '.join(_ALGORITHMS)}")
        self._algorithm = _ALGORITHMS.index(algorithm)  # szAlgorithm values are the tuple order

    def compress(self, array: np.ndarray) -> Compressed:
        from pysz import sz, szConfig, szErrorBoundMode

        data = checked_input(self, array)
        if self.threads > 1 and data.shape[0] > 1:
            return compress_chunked(self, data, self.threads)
        conf = szConfig()
        conf.cmprAlgo = self._algorithm
        if self.mode == "abs":
            conf.errorBoundMode = szErrorBoundMode.ABS
            conf.absErrorBound = self.bound
        else:
            conf.errorBoundMode = szErrorBoundMode.REL
            conf.relErrorBound = self.bound
        try:
            stream, _ = sz.compress(data, conf)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise CodecError(f"sz3 compression failed: {exc}") from exc
        raw = stream.tobytes()
        return self.sealed(data, raw)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        from pysz import sz

        if is_chunked(compressed):
            return decompress_chunked(self, compressed)
        shape, dtype = checked_stream(self, compressed)
        try:
            out, _ = sz.decompress(np.frombuffer(compressed.data, dtype=np.uint8), dtype, shape)
        except (RuntimeError, ValueError, TypeError) as exc:
            raise CodecError(f"sz3 stream could not be decoded: {exc}") from exc
        return out
