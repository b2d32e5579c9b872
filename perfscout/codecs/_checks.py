"""Checks every CPU backend runs before handing memory to a native library."""

from __future__ import annotations

import numpy as np

from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.framing import check_seal
from perfscout.codecs.streams import check_stream_header
from perfscout.errors import CodecError


def check_options(codec: Codec, known: tuple[str, ...] = ()) -> None:
    """CodecError naming any option the backend does not take (and those it does)."""
    unknown = sorted(set(codec.options) - set(known))
    if not unknown:
        return
    if not known:
        raise CodecError(f"{codec.codec_id}: takes no options, got {', '.join(unknown)}")
    raise CodecError(f"{codec.codec_id}: unknown option(s) {', '.join(unknown)}; known: {', '.join(known)}")


def checked_input(codec: Codec, array: np.ndarray, max_ndim: int | None = None) -> np.ndarray:
    """The array as the C-contiguous float array the library expects, or CodecError."""
    if not isinstance(array, np.ndarray):
        raise CodecError(f"{codec.codec_id} compresses NumPy arrays, got {type(array).__name__}")
    if array.dtype.name not in codec.dtypes:
        raise CodecError(
            f"{codec.codec_id} does not support dtype {array.dtype}; it supports {', '.join(codec.dtypes)}"
        )
    if array.ndim == 0 or array.size == 0:
        raise CodecError(f"{codec.codec_id} needs a non-empty array with at least one axis, got shape {array.shape}")
    if max_ndim is not None and array.ndim > max_ndim:
        raise CodecError(f"{codec.codec_id} handles at most {max_ndim} dimensions, got {array.ndim}")
    # Native byte order: the libraries read raw memory.
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))


def checked_stream(codec: Codec, compressed: Compressed) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of a stream this codec may decode (seal verified), or CodecError."""
    shape, dtype = checked_metadata(codec, compressed)
    check_stream_header(compressed)  # the stream's own header must say the same
    return shape, dtype


def checked_metadata(codec: Codec, compressed: Compressed) -> tuple[tuple[int, ...], np.dtype]:
    """What :func:`checked_stream` checks before the library header: the writer, the seal and
    the recorded dtype and shape. A chunk container (:mod:`perfscout.codecs.chunked`) has no
    header of its own, so it stops here."""
    if compressed.codec_id != codec.codec_id:
        raise CodecError(f"stream was written by {compressed.codec_id!r}, not {codec.codec_id!r}")
    check_seal(compressed)
    try:
        dtype = np.dtype(compressed.dtype)
        shape = tuple(int(s) for s in compressed.shape)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"stream metadata is malformed: {exc}") from exc
    if dtype.name not in codec.dtypes or not shape or min(shape) <= 0:
        raise CodecError(f"stream metadata is malformed: dtype {dtype}, shape {shape}")
    return shape, dtype
