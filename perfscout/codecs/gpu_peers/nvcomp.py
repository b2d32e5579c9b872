"""nvcomp-*: NVIDIA nvCOMP's lossless GPU codecs (PyPI ``nvidia-nvcomp-cu13``, the ``[cuda]``
extra) as references beside the error-bounded compressors.

One backend per algorithm: ``nvcomp-lz4``, ``-zstd``, ``-deflate``, ``-gdeflate``,
``-cascaded``, ``-bitcomp``, ``-ans``. Their only mode is ``lossless``: the bound is not used,
and the check is bit-for-bit equality of the decoded array with the input. The stream is
nvCOMP's own native bitstream (it describes itself), sealed with a CRC-32 on the host.

Options: ``chunk_size`` (nvCOMP's uncompressed chunk size in bytes; default 65536),
``data_type`` ("auto": the element type the algorithm is given, see :func:`wire_dtype`; or an
array-protocol string such as "<f4", "<u4", "|u1"), ``algorithm_type`` (Deflate/GDeflate
levels 0-5, Bitcomp 0 default / 1 sparse).
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any, ClassVar

import numpy as np

from perfscout.codecs.gpu_peers import device as D
from perfscout.errors import CodecError

DISTRIBUTION = "nvidia-nvcomp-cu13"
INSTALL_HINT = "pip install 'perfscout[cuda]' (it brings nvidia-nvcomp-cu13) on a machine with an NVIDIA GPU"
#: Algorithms with a data_type option, and those with an algorithm_type option.
TYPED = ("LZ4", "Bitcomp", "ANS", "Cascaded")
LEVELLED = {"Deflate": range(6), "GDeflate": range(6), "Bitcomp": range(2)}
DATA_TYPES = ("|u1", "|i1", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4", "<f8")


def nvcomp_module() -> Any:
    return importlib.import_module("nvidia.nvcomp")


def wire_dtype(algorithm: str, dtype: np.dtype) -> str:
    """The element type an algorithm is handed for a float array of ``dtype``:
    Bitcomp takes floats as they are; ANS takes float32 (and bytes for float64); Cascaded
    works on integers, so the float bits go as unsigned integers of the same width; the
    byte-oriented LZ77/entropy codecs take bytes."""
    f64 = np.dtype(dtype) == np.float64
    if algorithm == "Bitcomp":
        return "<f8" if f64 else "<f4"
    if algorithm == "ANS":
        return "|u1" if f64 else "<f4"
    if algorithm == "Cascaded":
        return "<u8" if f64 else "<u4"
    return "|u1"


class NvcompCodec(D.DeviceCodec):
    """Base of the nvcomp-* backends; a subclass names its nvCOMP ``algorithm``."""

    family = "lossless"
    native_modes = ("lossless",)
    distribution = DISTRIBUTION
    requires = ("nvidia.nvcomp",)
    install_hint = INSTALL_HINT
    option_names = ("chunk_size", "data_type", "algorithm_type")
    algorithm: ClassVar[str]

    def __init__(self, mode: str = "lossless", bound: float = 0.0, **options: Any) -> None:
        super().__init__(mode, bound, **options)
        chunk = self.options.get("chunk_size")
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk <= 0
                                  or chunk % 8):
            raise CodecError(f"{self.codec_id}: chunk_size must be a positive multiple of 8 bytes, got {chunk!r}")
        data_type = self.options.get("data_type", "auto")
        if data_type != "auto":
            if self.algorithm not in TYPED:
                raise CodecError(f"{self.codec_id}: nvCOMP's {self.algorithm} has no data_type option")
            if data_type not in DATA_TYPES:
                raise CodecError(f"{self.codec_id}: data_type must be 'auto' or one of {', '.join(DATA_TYPES)}, "
                                 f"got {data_type!r}")
        level = self.options.get("algorithm_type")
        if level is not None:
            allowed = LEVELLED.get(self.algorithm)
            if allowed is None:
                raise CodecError(f"{self.codec_id}: nvCOMP's {self.algorithm} has no algorithm_type option")
            if isinstance(level, bool) or level not in allowed:
                raise CodecError(f"{self.codec_id}: algorithm_type must be in {allowed.start}..{allowed.stop - 1}, "
                                 f"got {level!r}")
        self._codecs: dict[tuple[int, str], Any] = {}

    @classmethod
    def version(cls) -> str:
        try:
            return f"nvCOMP {metadata.version(DISTRIBUTION)} ({cls.algorithm})"
        except metadata.PackageNotFoundError:
            return ""

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        ok, why = super().availability()
        if not ok:
            return ok, why
        gpu = D.gpu_reason()
        return (False, f"nvCOMP is installed, but {gpu}") if gpu else (True, "")

    def abs_bound_used(self) -> float | None:
        return 0.0  # lossless: every element must come back exactly

    # -- nvCOMP objects ----------------------------------------------------------------------
    def _wire(self, dtype: np.dtype) -> str:
        data_type = self.options.get("data_type", "auto")
        return wire_dtype(self.algorithm, dtype) if data_type == "auto" else str(data_type)

    def _codec(self, wire: str) -> Any:
        """One nvcomp.Codec per (stream, element type), bound to perfscout's work stream."""
        stream = D.work_stream()
        key = (int(stream.ptr), wire)
        if key not in self._codecs:
            kwargs: dict[str, Any] = {"algorithm": self.algorithm, "cuda_stream": int(stream.ptr)}
            if "chunk_size" in self.options:
                kwargs["uncomp_chunk_size"] = int(self.options["chunk_size"])
            if self.algorithm in TYPED:
                kwargs["data_type"] = wire
            if "algorithm_type" in self.options:
                kwargs["algorithm_type"] = int(self.options["algorithm_type"])
            try:
                self._codecs[key] = nvcomp_module().Codec(**kwargs)
            except Exception as exc:  # nvCOMP rejects an option combination
                raise CodecError(f"{self.codec_id}: nvCOMP refused {kwargs}: {type(exc).__name__}: {exc}") from exc
        return self._codecs[key]

    def stream_meta(self, xd: Any) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "wire_dtype": self._wire(xd.dtype),
                **{k: self.options[k] for k in ("chunk_size", "algorithm_type") if k in self.options}}

    # -- device calls --------------------------------------------------------------------------
    def device_compress(self, xd: Any) -> D.DeviceBlob:
        cp = D.cupy()
        nv = nvcomp_module()
        wire = self._wire(xd.dtype)
        flat = xd.reshape(-1).view(np.dtype(wire))
        enc = self._codec(wire).encode(nv.as_array(flat, int(D.work_stream().ptr)))
        buf = cp.asarray(enc).reshape(-1).view(cp.uint8)
        reported = int(enc.buffer_size)
        if reported <= 0 or reported > buf.nbytes:
            raise CodecError(f"{self.codec_id}: nvCOMP reported {reported} compressed bytes in a buffer of {buf.nbytes}")
        return D.DeviceBlob(buf, reported, owner=enc)

    def device_decompress(self, blob: D.DeviceBlob, shape: tuple[int, ...], dtype: np.dtype,
                          meta: dict[str, Any]) -> Any:
        cp = D.cupy()
        nv = nvcomp_module()
        algorithm = meta.get("algorithm", self.algorithm)
        if algorithm != self.algorithm:
            raise CodecError(f"{self.codec_id}: stream was written by nvCOMP {algorithm}, not {self.algorithm}")
        wire = str(meta.get("wire_dtype") or self._wire(dtype))
        src = blob.owner if blob.owner is not None else nv.as_array(blob.view(), int(D.work_stream().ptr))
        try:
            dec = self._codec(wire).decode(src, data_type=wire)
        except Exception as exc:  # nvCOMP raises on a stream it cannot parse
            raise CodecError(f"{self.codec_id}: nvCOMP could not decode the stream: {type(exc).__name__}: {exc}") from exc
        out = cp.asarray(dec).reshape(-1).view(cp.uint8)
        want = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if out.nbytes != want:
            raise CodecError(f"{self.codec_id}: decoded {out.nbytes} bytes, expected {want} for "
                             f"{np.dtype(dtype).name}{tuple(shape)} (truncated or foreign stream)")
        # a copy, so the result owns its memory (nvCOMP's output Array is freed with `dec`)
        return out.view(np.dtype(dtype)).reshape(shape).copy()


def _algorithm_codec(codec_id: str, algorithm: str) -> type[NvcompCodec]:
    return type(f"Nvcomp{algorithm}Codec", (NvcompCodec,),
                {"codec_id": codec_id, "algorithm": algorithm, "__module__": __name__,
                 "__doc__": f"nvCOMP {algorithm}, lossless (see the module docstring)."})


#: codec_id -> nvCOMP algorithm name
ALGORITHMS = {"nvcomp-lz4": "LZ4", "nvcomp-zstd": "Zstd", "nvcomp-deflate": "Deflate",
              "nvcomp-gdeflate": "GDeflate", "nvcomp-cascaded": "Cascaded", "nvcomp-bitcomp": "Bitcomp",
              "nvcomp-ans": "ANS"}
NvcompLZ4Codec = _algorithm_codec("nvcomp-lz4", "LZ4")
NvcompZstdCodec = _algorithm_codec("nvcomp-zstd", "Zstd")
NvcompDeflateCodec = _algorithm_codec("nvcomp-deflate", "Deflate")
NvcompGDeflateCodec = _algorithm_codec("nvcomp-gdeflate", "GDeflate")
NvcompCascadedCodec = _algorithm_codec("nvcomp-cascaded", "Cascaded")
NvcompBitcompCodec = _algorithm_codec("nvcomp-bitcomp", "Bitcomp")
NvcompANSCodec = _algorithm_codec("nvcomp-ans", "ANS")

