"""What every GPU peer backend shares: CuPy on a usable device, one CUDA stream, device-resident
compressed buffers, and the host-side ``compress``/``decompress`` built on the device calls.

A backend implements :meth:`DeviceCodec.device_compress` (device array in, a
:class:`DeviceBlob` out: the library's buffer and the size the library *reported*) and
:meth:`DeviceCodec.device_decompress`. Everything that reaches the host is the library's own
bytes, sealed with a CRC-32 (:mod:`perfscout.codecs.framing`), so a truncated or corrupt
stream is refused before a byte of it reaches the library, and ratios compare with the
published ones.
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.framing import check_seal, seal
from perfscout.errors import CodecError, InputError

CUDA_HINT = "install CuPy with pip install 'perfscout[cuda]' on a machine with an NVIDIA GPU"


def gpu_reason() -> str:
    """'' when CuPy imports and a CUDA device is visible, else why not (a full sentence)."""
    try:
        import cupy as cp
    except Exception as exc:  # noqa: BLE001 - no wheel, or a CUDA install it cannot load
        return f"CuPy cannot be imported ({type(exc).__name__}: {exc}); {CUDA_HINT}"
    try:
        n = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - no driver, or no device behind it
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return "" if n > 0 else "no CUDA device is visible"


def cupy() -> Any:
    import cupy as cp

    return cp


def compute_capability() -> tuple[int, int]:
    """(major, minor) of the current device, e.g. (9, 0) on an H200."""
    cc = str(cupy().cuda.Device().compute_capability)  # "90"
    return int(cc[:-1]), int(cc[-1])


def device_name() -> str:
    cp = cupy()
    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


@functools.cache
def _stream(device_id: int) -> Any:
    # A *blocking* stream: cuSZp reads its compressed size with a plain cudaMemcpy on the
    # legacy default stream, which waits only for blocking streams. A non-blocking one would
    # let that copy overtake the kernel and read a size that is not written yet.
    return cupy().cuda.Stream(non_blocking=False)


def work_stream() -> Any:
    """The stream every peer backend runs on (one per device), so CUDA events recorded on it
    bracket the library's work."""
    return _stream(cupy().cuda.Device().id)


@dataclass
class DeviceBlob:
    """A compressed stream on the device: the library's buffer, the stream's size, and the
    size the library reported (the same, unless :meth:`DeviceCodec.settle` found the report
    wrong: then ``nbytes`` is the stream's real extent and ``reported_nbytes`` the report)."""

    buffer: Any  # cupy uint8 array, at least ``nbytes`` long
    nbytes: int
    owner: Any = None  # keeps a library-owned allocation alive (nvCOMP's Array)
    reported_nbytes: int | None = None  # None: the library's report is ``nbytes``

    def __post_init__(self) -> None:
        if self.reported_nbytes is None:
            self.reported_nbytes = self.nbytes

    def view(self) -> Any:
        return self.buffer[: self.nbytes]

    def to_host(self) -> bytes:
        return self.view().get().tobytes()


def device_array(array: Any) -> Any:
    """A C-contiguous CuPy array of ``array`` (zero-copy for CuPy and DLPack CUDA tensors)."""
    cp = cupy()
    if isinstance(array, cp.ndarray):
        return cp.ascontiguousarray(array)
    if hasattr(array, "__dlpack__") and getattr(array, "is_cuda", False):
        return cp.ascontiguousarray(cp.from_dlpack(array))
    if hasattr(array, "__cuda_array_interface__"):
        return cp.ascontiguousarray(cp.asarray(array))
    return cp.asarray(np.ascontiguousarray(array))


class DeviceCodec(Codec):
    """A backend whose compress/decompress run on device-resident arrays."""

    device = "cuda"
    #: perfscout.tools.gpu_eval evaluates these on the GPU (timing, verification, metrics).
    device_resident: ClassVar[bool] = True
    #: option names the constructor accepts (anything else is a clear CodecError)
    option_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        super().__init__(mode, bound, **options)
        unknown = sorted(set(self.options) - set(self.option_names))
        if unknown:
            raise CodecError(f"{self.codec_id}: unknown option(s) {', '.join(unknown)}; it takes "
                             f"{', '.join(self.option_names) or 'none'}")

    # -- what a backend implements ------------------------------------------------------
    @abstractmethod
    def device_compress(self, xd: Any) -> DeviceBlob:
        """Compress a C-contiguous device array on :func:`work_stream`."""

    @abstractmethod
    def device_decompress(self, blob: DeviceBlob, shape: tuple[int, ...], dtype: np.dtype,
                          meta: dict[str, Any]) -> Any:
        """Decode ``blob`` into a new device array of ``shape``/``dtype``; ``meta`` is what
        :meth:`stream_meta` recorded at compression."""

    def stream_meta(self, xd: Any) -> dict[str, Any]:
        """What decoding needs besides shape and dtype (JSON-able; stored with the stream)."""
        return {}

    def decode_target(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """None, or the output buffer a library needs prepared (zeroed: cuSZp) before it
        decodes; a timed caller makes it outside the timing and passes it to every timed
        :meth:`device_decompress` of one stream as ``out``. Default: None (the backend
        allocates its own output, and a backend that takes ``out`` needs no preparation)."""
        return None

    def settle(self, blob: DeviceBlob, shape: tuple[int, ...], dtype: np.dtype) -> DeviceBlob:
        """The blob with the stream's real extent, checked against the size the library
        reported (outside the timed compress call). Default: the report is the extent."""
        return blob

    def check_stream(self, blob: DeviceBlob, shape: tuple[int, ...], dtype: np.dtype,
                     meta: dict[str, Any]) -> None:
        """Raise CodecError when a stream from the host is not whole for ``shape`` (before the
        library reads it; the CRC seal has passed already). Default: nothing to check."""

    def check_input(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Raise InputError for arrays the library cannot take (before any GPU work)."""
        if np.dtype(dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise InputError(f"{self.codec_id} compresses float32 and float64, not {np.dtype(dtype)}")
        if int(np.prod(shape)) == 0:
            raise InputError(f"{self.codec_id}: nothing to compress (empty array)")

    # -- host wrappers (the Codec interface) ----------------------------------------------
    def abs_bound_used(self) -> float | None:
        return self.bound if self.mode == "abs" else None

    def compressed_from(self, data: bytes, shape: tuple[int, ...], dtype: np.dtype,
                        meta: dict[str, Any]) -> Compressed:
        full = {**meta, **seal(data), "device": "cuda", "device_name": device_name()}
        return Compressed(data=data, shape=tuple(int(s) for s in shape), dtype=np.dtype(dtype).name,
                          codec_id=self.codec_id, mode=self.mode, bound=self.bound,
                          abs_bound=self.abs_bound_used(), meta=full)

    def compress(self, array: Any) -> Compressed:
        xd = device_array(array)
        self.check_input(tuple(xd.shape), xd.dtype)
        with work_stream():
            blob = self.settle(self.device_compress(xd), tuple(xd.shape), xd.dtype)
            data = blob.to_host()
        if len(data) != blob.nbytes:
            raise CodecError(f"{self.codec_id}: copied {len(data)} bytes back for a stream of {blob.nbytes}")
        meta = self.stream_meta(xd)
        if blob.reported_nbytes != blob.nbytes:
            meta["library_nbytes"] = blob.reported_nbytes  # what the library said; the stream is longer/shorter
        return self.compressed_from(data, tuple(xd.shape), xd.dtype, meta)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        return self.decompress_device(compressed).get()

    def decompress_device(self, compressed: Compressed) -> Any:
        """Decode host bytes (checked first: codec, seal, shape) into a device array."""
        if compressed.codec_id != self.codec_id:
            raise CodecError(f"stream was written by {compressed.codec_id!r}, not {self.codec_id!r}")
        check_seal(compressed)
        dtype = np.dtype(compressed.dtype)
        self.check_input(tuple(compressed.shape), dtype)
        cp = cupy()
        with work_stream():
            buf = cp.asarray(np.frombuffer(compressed.data, dtype=np.uint8))
            blob = DeviceBlob(buf, int(buf.size))
            self.check_stream(blob, tuple(compressed.shape), dtype, dict(compressed.meta))
            out = self.device_decompress(blob, tuple(compressed.shape), dtype, dict(compressed.meta))
            work_stream().synchronize()
        return out
