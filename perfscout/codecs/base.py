"""The one codec interface (in the spirit of numcodecs' ``Codec``).

A codec instance is configured with an error ``mode`` and a ``bound``; it turns an
array into a :class:`Compressed` (bytes plus what is needed to decode them) and back.
Derived modes that are searched rather than native (``psnr`` target dB, ``ratio``
target compression ratio) live in the evaluation layer, which drives a codec's native
``abs`` mode; a codec lists only the modes it implements itself in ``native_modes``.

Implementations are short modules in this package; the registry
(:mod:`perfscout.codecs.registry`) knows them by ``codec_id``.
"""

from __future__ import annotations

import functools
import importlib
import zlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, ClassVar

import numpy as np

from perfscout.errors import CodecError, PerfscoutError
from perfscout.state.modes import ALL_MODES, Mode

# ALL_MODES and Mode live in perfscout.state.modes (one list for every layer); they are
# re-exported here because codecs check modes against them.
__all__ = ["ALL_MODES", "Codec", "Compressed", "Mode", "TimedRun", "crc32", "seal"]


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def seal(data: bytes) -> dict[str, int]:
    """The meta entries that let :func:`perfscout.codecs.framing.check_seal` recognise this
    exact stream (CRC-32 and length; why: see :mod:`perfscout.codecs.framing`)."""
    return {"crc32": crc32(data), "stream_nbytes": len(data)}



@dataclass
class Compressed:
    """A compressed buffer and what is needed to decode it."""

    data: bytes
    shape: tuple[int, ...]
    dtype: str  # numpy dtype str, e.g. "float32"
    codec_id: str
    mode: str
    bound: float
    abs_bound: float | None = None  # the absolute bound actually enforced, when defined
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return len(self.data)


@dataclass
class TimedRun:
    """Timings a codec measured itself (e.g. with CUDA events), in seconds (medians)."""

    compressed: Compressed
    reconstructed: np.ndarray
    compress_s: float
    decompress_s: float
    h2d_s: float | None = None
    d2h_s: float | None = None
    device_name: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)


def _decode_errors_as_codec_error(decompress: Any) -> Any:
    """``decompress`` whose failures are :class:`CodecError`: the contract of every decoder.

    A stream can be forged consistently (its seal and header recomputed to agree), and then
    a library's own parser is the last check: pysz raises ``IndexError`` from inside its
    Python wrapper, others ``struct.error`` or ``OverflowError``. Whatever a decoder raises
    on bytes it cannot decode is the same finding, a stream that cannot be decoded, not a
    crash of the caller; so every backend (built-in or plug-in) gets this wrapper from
    :meth:`Codec.__init_subclass__`. Running out of memory (host ``MemoryError``, a GPU
    library's ``OutOfMemoryError``) keeps its type: callers report it as such."""

    @functools.wraps(decompress)
    def wrapper(self: Codec, compressed: Compressed) -> np.ndarray:
        try:
            return decompress(self, compressed)
        except (PerfscoutError, MemoryError):
            raise
        except Exception as exc:
            if "OutOfMemory" in type(exc).__name__:
                raise
            raise CodecError(f"{self.codec_id} stream could not be decoded: {type(exc).__name__}: {exc}") from exc

    wrapper._decode_errors_wrapped = True  # type: ignore[attr-defined]
    return wrapper


class Codec(ABC):
    """Base class for every compressor backend."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("decompress")
        # a plain method of this class (not a staticmethod or other descriptor, not abstract)
        if callable(own) and getattr(own, "__get__", None) is not None and not isinstance(own, (staticmethod, classmethod)) \
                and not getattr(own, "__isabstractmethod__", False) and not getattr(own, "_decode_errors_wrapped", False):
            cls.decompress = _decode_errors_as_codec_error(own)  # type: ignore[method-assign]

    codec_id: ClassVar[str]  # registry key, e.g. "sz3"
    family: ClassVar[str]  # "sz" | "zfp" | ...
    device: ClassVar[str] = "cpu"  # "cpu" or "cuda"
    native_modes: ClassVar[tuple[str, ...]]  # subset of ALL_MODES implemented natively
    dtypes: ClassVar[tuple[str, ...]] = ("float32", "float64")
    #: Where the ``abs`` bound acts: 0 for any value; b > 1 when only powers of b give
    #: distinct streams (zfp: 2), so psnr/ratio searches try only those (tools.bounds.AbsControl).
    abs_control_step: ClassVar[float] = 0.0
    #: The library a backend wraps: the distribution whose version names it, the modules
    #: it must import, and what to tell a user who lacks them.
    distribution: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()
    install_hint: ClassVar[str] = ""

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        if mode not in self.native_modes:
            raise CodecError(
                f"codec {self.codec_id!r} does not support mode {mode!r}; "
                f"it supports {', '.join(self.native_modes)}"
            )
        self.mode = mode
        self.bound = float(bound)
        self.options = dict(options)

    # -- identity ---------------------------------------------------------------
    @classmethod
    def version(cls) -> str:
        """Version of the backend library (or of our own format)."""
        if not cls.distribution:
            return ""
        try:
            return f"{cls.distribution} {metadata.version(cls.distribution)}"
        except metadata.PackageNotFoundError:
            return ""

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        """(usable, reason). The reason says why a backend is missing."""
        for module in cls.requires:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                return False, f"{module} is not installed ({exc}); {cls.install_hint}".rstrip("; ")
        return True, ""

    # -- numcodecs-style config -------------------------------------------------
    def get_config(self) -> dict[str, Any]:
        return {"id": self.codec_id, "mode": self.mode, "bound": self.bound, **self.options}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Codec:
        cfg = dict(config)
        codec_id = cfg.pop("id", cls.codec_id)
        if codec_id != cls.codec_id:
            raise CodecError(f"config is for codec {codec_id!r}, not {cls.codec_id!r}")
        return cls(**cfg)

    # -- the work ---------------------------------------------------------------
    @abstractmethod
    def compress(self, array: np.ndarray) -> Compressed:
        """Compress a validated, C-contiguous float array."""

    @abstractmethod
    def decompress(self, compressed: Compressed) -> np.ndarray:
        """Decode; raise :class:`CodecError` on a corrupt or truncated buffer."""

    def sealed(self, data: np.ndarray, raw: bytes, *, abs_bound: float | None = None,
               **meta: Any) -> Compressed:
        """The :class:`Compressed` for ``raw``, the library's stream of ``data`` in this
        codec's mode and bound, sealed (CRC-32 and length in ``meta``) so that a corrupt
        stream is refused before it reaches the library. ``abs_bound`` is the absolute
        bound enforced: the bound itself in ``abs`` mode unless given; ``meta``: what
        else decoding needs.
        """
        if abs_bound is None and self.mode == Mode.ABS:
            abs_bound = self.bound
        return Compressed(data=raw, shape=tuple(data.shape), dtype=data.dtype.name, codec_id=self.codec_id,
                          mode=self.mode, bound=self.bound, abs_bound=abs_bound, meta={**meta, **seal(raw)})

    def known_behaviour(self) -> list[str]:
        """Sentences every record of this codec, mode and bound carries: what the library is
        known to do that a reader of the figures should know (a stream that is not the same
        from one process to the next, say). Found and tested facts only; none by default."""
        return []

    def timed_run(self, array: Any, repeats: int) -> TimedRun | None:
        """Optional: a codec that must time itself (GPU: CUDA events, H2D/D2H apart)
        returns its own measurements; ``None`` lets the caller time compress/decompress
        with ``perf_counter_ns``."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mode={self.mode!r}, bound={self.bound!r})"
