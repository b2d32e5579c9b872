"""szp-gpu: perfscout's own SZ-family, strictly error-bounded codec on CuPy.

The stream format and its NumPy reference live in :mod:`perfscout.codecs.szp.format`;
the CUDA kernels in :mod:`perfscout.codecs.szp.gpu` write byte-identical streams, so a
stream from either side decodes on the other. Without a usable GPU the codec runs the
reference and says so: ``Compressed.meta["device"] == "cpu"`` and
``Compressed.meta["reason"]`` starts with ``"gpu_unavailable"`` (the evaluation layer
turns that into the ``gpu_unavailable`` finding).

Options: ``block_ndim`` (1, 2 or 3; default min(ndim, 3)), ``chunk_bytes`` (arrays larger
than this stream through the GPU in slabs; default 1 GiB), ``device`` ("auto" or "cpu").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perfscout.codecs.base import Codec, Compressed, TimedRun
from perfscout.codecs.streams import check_stream_header
from perfscout.codecs.szp import format as F
from perfscout.codecs.szp import gpu as G
from perfscout.errors import CodecError


class SZPGpuCodec(Codec):
    codec_id = "szp-gpu"
    family = "sz"
    device = "cuda"
    native_modes = ("abs", "rel")

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        super().__init__(mode, bound, **options)
        unknown = set(self.options) - {"block_ndim", "chunk_bytes", "device"}
        if unknown:
            raise CodecError(f"szp-gpu: unknown options {', '.join(sorted(unknown))}; "
                             "it takes block_ndim, chunk_bytes, device")
        self.block_ndim = self.options.get("block_ndim")
        if self.block_ndim is not None and (isinstance(self.block_ndim, bool)
                                            or self.block_ndim not in F.BLOCK_SHAPES):
            raise CodecError(f"szp-gpu: block_ndim must be 1, 2 or 3, got {self.block_ndim!r}")
        chunk = self.options.get("chunk_bytes", G.DEFAULT_CHUNK_BYTES)
        if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk <= 0:
            raise CodecError(f"szp-gpu: chunk_bytes must be a positive integer, got {chunk!r}")
        self.chunk_bytes = int(chunk)
        if self.options.get("device", "auto") not in ("auto", "cpu"):
            raise CodecError("szp-gpu: device must be 'auto' or 'cpu'")

    @classmethod
    def version(cls) -> str:
        return f"szp format {F.VERSION}"

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        # Always usable: without a GPU it runs the NumPy reference (and says so).
        return True, ""

    @classmethod
    def device_availability(cls) -> dict[str, str]:
        """cpu always (the reference); cuda only where CuPy imports and sees a device.
        Without CuPy installed nothing is imported: listing codecs stays cheap."""
        import importlib.util

        if importlib.util.find_spec("cupy") is None:
            return {"cpu": "", "cuda": "CuPy is not installed (pip install 'perfscout[cuda]')"}
        ok, reason = G.gpu_available()
        return {"cpu": "", "cuda": "" if ok else reason}

    def _gpu(self) -> tuple[bool, str]:
        if self.options.get("device") == "cpu":
            return False, "cpu_requested"
        return G.gpu_available()

    def _meta(self, data: bytes, on_gpu: bool, reason: str) -> dict[str, Any]:
        h = F.parse_header(data)
        return {
            "device": "cuda" if on_gpu else "cpu",
            "reason": reason,
            "device_name": G.device_name() if on_gpu else "",
            "format_version": F.VERSION,
            "block_ndim": h.block_ndim,
            "n_outliers": h.n_outliers,
        }

    def _wrap(self, data: bytes, on_gpu: bool, reason: str) -> Compressed:
        h = F.parse_header(data)
        return Compressed(
            data=data, shape=h.shape, dtype=h.dtype.name, codec_id=self.codec_id, mode=self.mode,
            bound=self.bound, abs_bound=h.abs_bound, meta=self._meta(data, on_gpu, reason),
        )

    def compress(self, array: Any) -> Compressed:
        """Compress a NumPy array, a CuPy array or a torch CUDA tensor (zero-copy)."""
        on_gpu, reason = self._gpu()
        if on_gpu:
            try:
                dev = G.as_device_array(array)
                if dev is not None:
                    data = G.to_host(G.compress_device(dev, self.mode, self.bound, self.block_ndim))
                else:
                    data = G.compress_host(np.asarray(array), self.mode, self.bound,
                                           self.block_ndim, self.chunk_bytes)
            except _oom_errors() as exc:
                raise CodecError(f"gpu_out_of_memory: {exc}") from exc
        else:
            data = F.encode(_host_array(array), self.mode, self.bound, self.block_ndim)
        return self._wrap(data, on_gpu, reason)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        if compressed.codec_id != self.codec_id:
            raise CodecError(f"stream was written by {compressed.codec_id!r}, not {self.codec_id!r}")
        check_stream_header(compressed)  # shape/dtype as the container says, or refused
        on_gpu, _ = self._gpu()
        if on_gpu:
            try:
                return G.decompress_host(compressed.data, self.chunk_bytes)
            except _oom_errors() as exc:
                raise CodecError(f"gpu_out_of_memory: {exc}") from exc
        return F.decode(compressed.data)

    def timed_run(self, array: Any, repeats: int) -> TimedRun | None:
        """CUDA-event medians (compress and decompress device-resident; H2D of the input,
        D2H of the result timed apart). Without a GPU: None, and the caller times the
        reference implementation (the Compressed it gets says device=cpu and why)."""
        on_gpu, reason = self._gpu()
        if not on_gpu:
            return None
        try:
            t = G.timed_roundtrip(array, self.mode, self.bound, self.block_ndim, repeats)
        except _oom_errors() as exc:
            raise CodecError(f"gpu_out_of_memory: {exc}") from exc
        return TimedRun(
            compressed=self._wrap(t.data, True, reason), reconstructed=t.reconstructed,
            compress_s=t.compress_s, decompress_s=t.decompress_s, h2d_s=t.h2d_s, d2h_s=t.d2h_s,
            device_name=t.device_name, samples=t.samples,
        )


def _host_array(array: Any) -> np.ndarray:
    if isinstance(array, np.ndarray):
        return array
    if hasattr(array, "get"):  # a CuPy array on a machine whose GPU path is off
        return array.get()
    if hasattr(array, "detach"):  # torch
        return array.detach().cpu().numpy()
    return np.asarray(array)


def _oom_errors() -> tuple[type[BaseException], ...]:
    try:
        import cupy

        return (cupy.cuda.memory.OutOfMemoryError,)
    except Exception:
        return ()
