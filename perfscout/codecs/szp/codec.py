"""szp-gpu: perfscout's own SZ-family, strictly error-bounded codec on CuPy.

The stream format and its NumPy reference live in :mod:`perfscout.codecs.szp.format`;
the CUDA kernels in :mod:`perfscout.codecs.szp.gpu` write byte-identical streams, so a
stream from either side decodes on the other. Without a usable GPU the codec runs the
reference and says so: ``Compressed.meta["device"] == "cpu"`` and
``Compressed.meta["reason"]`` starts with ``"gpu_unavailable"`` (the evaluation layer
turns that into the ``gpu_unavailable`` finding).

Options: ``block_ndim`` ("auto", the default, or 1, 2 or 3), ``chunk_bytes`` (arrays larger
than this stream through the GPU in slabs; default 1 GiB), ``device`` ("auto" or "cpu").

``block_ndim="auto"`` chooses the block shape per array from a small sample of it
(:mod:`perfscout.codecs.szp.autoshape`), where the array is: on the GPU for device arrays
and for host arrays the GPU takes in one piece, with NumPy for the reference and for host
arrays streamed in slabs. The header records the shape (and, with format v3, the flag
"chosen automatically"); ``Compressed.meta`` records the choice: ``block_ndim_auto``,
``block_sample_bytes`` (candidate -> the sample's stream bytes), ``block_estimated_bytes``,
``block_sample_elems`` and ``block_choice_us``.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from perfscout.codecs.base import Codec, Compressed, TimedRun
from perfscout.codecs.streams import check_stream_header
from perfscout.codecs.szp import autoshape as A
from perfscout.codecs.szp import format as F
from perfscout.codecs.szp import gpu as G
from perfscout.errors import CodecError

AUTO = "auto"


def parse_block_ndim(value: Any) -> str | int:
    """``"auto"`` (also for None: the default) or the int 1, 2 or 3; else CodecError."""
    if value is None or (isinstance(value, str) and value.strip().lower() == AUTO):
        return AUTO
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) not in F.BLOCK_SHAPES:
        raise CodecError(f"szp-gpu: block_ndim must be 1, 2 or 3, got {value!r} (or leave it out: "
                         "'auto', the default, chooses it from a sample of the field)")
    return int(value)


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
        self.block_ndim = parse_block_ndim(self.options.get("block_ndim"))
        #: the last automatic choice, for the meta of the stream it made
        self.last_choice: A.ShapeChoice | None = None
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

    def _meta(self, h: F.Header, on_gpu: bool, reason: str) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "device": "cuda" if on_gpu else "cpu",
            "reason": reason,
            "device_name": G.device_name() if on_gpu else "",
            "format_version": h.version,
            "block_ndim": h.block_ndim,
            "block_ndim_auto": self.block_ndim == AUTO,
            "n_outliers": h.n_outliers,
        }
        choice = self.last_choice
        if self.block_ndim == AUTO and choice is not None and choice.block_ndim == h.block_ndim:
            meta.update(choice.meta())
        return meta

    def _wrap(self, data: bytes, on_gpu: bool, reason: str) -> Compressed:
        h = F.parse_header(data)
        return Compressed(
            data=data, shape=h.shape, dtype=h.dtype.name, codec_id=self.codec_id, mode=self.mode,
            bound=self.bound, abs_bound=h.abs_bound, meta=self._meta(h, on_gpu, reason),
        )

    def _shape(self, x: Any, version: int | None = None) -> tuple[int, dict[str, bool]]:
        """(block_ndim, encoder flag kwargs) for ``x``, choosing on x's own device when auto;
        ``version``: the format the stream will be written in (for a host array the GPU
        compresses: the kernels' format, if it is not the reference's own)."""
        if self.block_ndim != AUTO:
            self.last_choice = None
            return int(self.block_ndim), {}
        self.last_choice = A.choose_for(x, self.mode, self.bound, version=version)
        return self.last_choice.block_ndim, {"auto_block": True}

    def compress_on_device(self, x: Any) -> G.DeviceStream:
        """Compress a CuPy array into a device-resident stream (the block shape chosen on the
        device when auto); GPU evaluation times this call. compress_device is handed the
        chooser and calls it after its own range pass, so rel mode reads the array once."""
        if self.block_ndim == AUTO:
            choose = functools.partial(A.choose_block_ndim, version=G.WRITE_VERSION)
            ds = G.compress_device(x, self.mode, self.bound, choose=choose)
            self.last_choice = ds.shape_choice
            return ds
        self.last_choice = None
        return G.compress_device(x, self.mode, self.bound, int(self.block_ndim))

    def _compress_host_on_gpu(self, host: np.ndarray) -> bytes:
        """A host array on the GPU path. One that fits a single slab goes up whole anyway
        (compress_host does the same, byte for byte): it is uploaded here first, so that the
        choice is made on the device, with the device's range pass, not NumPy's. A larger one
        streams in slabs through compress_host, the choice made with NumPy."""
        fit = getattr(G, "_fit_chunk", None)
        limit = min(self.chunk_bytes, fit(G.DEFAULT_CHUNK_BYTES)) if fit else self.chunk_bytes
        if self.block_ndim == AUTO and host.nbytes <= limit:
            import cupy as cp

            return G.to_host(self.compress_on_device(cp.asarray(host)))
        bnd, flag = self._shape(host, G.WRITE_VERSION)
        return G.compress_host(host, self.mode, self.bound, bnd, self.chunk_bytes, **flag)

    def compress(self, array: Any) -> Compressed:
        """Compress a NumPy array, a CuPy array or a torch CUDA tensor (zero-copy)."""
        on_gpu, reason = self._gpu()
        if on_gpu:
            try:
                dev = G.as_device_array(array)
                if dev is not None:
                    data = G.to_host(self.compress_on_device(dev))
                else:
                    data = self._compress_host_on_gpu(np.asarray(array))
            except _oom_errors() as exc:
                raise CodecError(f"gpu_out_of_memory: {exc}") from exc
        else:
            host = _host_array(array)
            bnd, flag = self._shape(host)
            data = F.encode(host, self.mode, self.bound, bnd, **flag)
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
            # The choice is made once, where the array is, and its cost is in the meta: the
            # timed calls compress with the shape it chose.
            dev = G.as_device_array(array)
            bnd, flag = self._shape(dev) if dev is not None else self._shape(np.asarray(array), G.WRITE_VERSION)
            t = G.timed_roundtrip(array, self.mode, self.bound, bnd, repeats, **flag)
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
