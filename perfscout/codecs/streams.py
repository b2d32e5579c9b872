"""What a codec stream says about itself, checked against what its container claims.

A perfscout container (:mod:`perfscout.codecs.framing`) carries the shape, dtype and
codec id beside the codec's own bytes, under one CRC. A forged container (shape or codec
id changed, CRC recomputed) passes the CRC; handed to a native decoder, it crashes it or
decodes into a different layout. So before any decoder runs, :func:`check_stream_header`
reads each backend's **own** header and refuses (:class:`CodecError`) a stream whose
element count, dimensions or element type disagree with the container, or whose sizes
its header cannot justify:

``sz3`` (pysz, SZ3 >= 3.2)
    ``u32 magic 0xF342F310, u32 version, u64 payload size, payload, config``; the config
    (last, its first byte its own size) holds N, the dimensions (bit-packed, LSB first)
    and the element count. The sizes must add up to the stream's length exactly.
``sz2`` (hdf5plugin SZ 2.1) and ``sz3-h5`` (hdf5plugin SZ3)
    The filter's bytes are zstd-framed (only the first bytes are inflated to read the
    header, so a forged frame cannot make us allocate). SZ 2.1: version 2.1.x, the data
    type (low nibble of params byte 5) and the big-endian element count (SZ 2.1 records
    no dimensions: a forged shape with the same element count cannot be told from an SZ2
    stream); the SZ3 filter:
    the dimensions, u64 each (axes of length 1 dropped, as the libraries do). Exception:
    the SZ3 filter's interpolation streams (3-D smooth data) record no dimensions at all,
    so a forged shape of one cannot be told from the stream (its decoder still runs in a
    child process). Tiny arrays the filters store raw must be exactly ``n * itemsize``
    bytes. The element type in the HDF5 ``cd_values`` in ``meta`` must agree too.
``zfp`` (zfpy's full header)
    ``'zfp'``, codec version, then 52 bits of field metadata (type, dimensionality, each
    extent - 1); at least one bit per 4^d block must be present (zfp spends >= 1).
``szp-gpu``
    :func:`perfscout.codecs.szp.format.parse_header` (which already checks the layout
    and the CRC) plus shape and dtype.

A ``threads`` stream (:mod:`perfscout.codecs.chunked`) is a container of one library
stream per slab: :func:`chunk_parts` checks its framing, and each chunk's own header is
checked against its slab as above.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import numpy as np

from perfscout.codecs.base import Compressed, crc32, seal
from perfscout.errors import CodecError

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SZ3_MAGIC = 0xF342F310
#: Bytes of a zstd-framed SZ stream inflated to read its header (never the whole frame).
HEADER_PREFIX_BYTES = 128
#: SZ 2.1: where the element count starts (after version, flags and the parameter block,
#: whose length depends on the element type), and its data-type codes.
_SZ2_COUNT_OFFSET = {0: 32, 1: 40}
_SZ2_DTYPES = {0: np.dtype("float32"), 1: np.dtype("float64")}
_H5_DTYPE_CODES = {"float32": 0, "float64": 1}
#: How the SZ3 filter's interpolation streams begin (a u32 5, then the interpolation
#: settings) instead of with the dimensions.
_SZ3_INTERP_TAG = b"\x05\x00\x00\x00"
#: zfp's full header: magic and version (32 bits), field metadata (52), short mode (12).
_ZFP_HEADER_BITS = 96
_ZFP_TYPES = {2: np.dtype("float32"), 3: np.dtype("float64")}  # zfp_type - 1


def squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The SZ libraries drop axes of length 1 (the C-order layout is the same)."""
    return tuple(d for d in shape if d != 1) or (1,)


def _fail(codec_id: str, what: str) -> CodecError:
    return CodecError(f"{codec_id} stream does not match its container: {what}; refusing to decode it")


def _shape_dtype(compressed: Compressed) -> tuple[tuple[int, ...], np.dtype]:
    try:
        shape = tuple(int(s) for s in compressed.shape)
        dtype = np.dtype(compressed.dtype)
    except (TypeError, ValueError) as exc:
        raise CodecError(f"stream metadata is malformed: {exc}") from exc
    if not shape or min(shape) <= 0 or dtype.name not in ("float32", "float64"):
        raise CodecError(f"stream metadata is malformed: dtype {dtype}, shape {shape}")
    return shape, dtype


def _inflate_prefix(codec_id: str, data: bytes, n: int = HEADER_PREFIX_BYTES) -> bytes:
    import zstandard

    try:
        return zstandard.ZstdDecompressor().stream_reader(data).read(n)
    except zstandard.ZstdError as exc:
        raise _fail(codec_id, f"its zstd frame is corrupt ({exc})") from exc


# -- per backend ---------------------------------------------------------------------------
def check_sz3(compressed: Compressed) -> None:
    shape, _ = _shape_dtype(compressed)
    data = compressed.data
    if len(data) < 16:
        raise _fail("sz3", f"{len(data)} bytes is shorter than SZ3's 16-byte header")
    magic, _version, payload = struct.unpack_from("<IIQ", data, 0)
    if magic != SZ3_MAGIC:
        raise _fail("sz3", f"no SZ3 magic number (0x{magic:08x})")
    conf_at = 16 + payload
    if payload > len(data) or conf_at >= len(data):
        raise _fail("sz3", f"payload size {payload} leaves no configuration in {len(data)} bytes")
    conf = data[conf_at:]
    size = conf[0]
    if size != len(conf) or size < 3:
        raise _fail("sz3", f"configuration is {len(conf)} bytes, its header says {size}")
    ndim, width = conf[1], conf[2]
    if not 1 <= ndim <= 16 or not 1 <= width <= 64:
        raise _fail("sz3", f"configuration holds {ndim} dimensions of {width} bits")
    nbytes = -(-ndim * width // 8)
    if 3 + nbytes + 8 > size:
        raise _fail("sz3", "configuration too short for its dimensions")
    packed = int.from_bytes(conf[3 : 3 + nbytes], "little")
    dims = tuple((packed >> (i * width)) & ((1 << width) - 1) for i in range(ndim))
    (num,) = struct.unpack_from("<Q", conf, 3 + nbytes)
    if squeezed(dims) != squeezed(shape):
        raise _fail("sz3", f"the stream holds shape {dims}, the container says {shape}")
    if num != math.prod(dims):
        raise _fail("sz3", f"the stream's element count {num} is not the product of its shape {dims}")


def _h5_stream_shape(compressed: Compressed, shape: tuple[int, ...]) -> tuple[int, ...]:
    meta = compressed.meta or {}
    if "stream_shape" not in meta:
        return shape
    try:
        stream_shape = tuple(int(s) for s in meta["stream_shape"])
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{compressed.codec_id} stream metadata is malformed: {exc}") from exc
    if not stream_shape or min(stream_shape) <= 0 or math.prod(stream_shape) != math.prod(shape):
        raise CodecError(f"{compressed.codec_id} stream shape {stream_shape} does not hold {shape}")
    return stream_shape


def _check_cd_values(codec_id: str, meta: dict[str, Any], stream_shape: tuple[int, ...], dtype: np.dtype) -> None:
    cd = meta.get("cd_values")
    if not cd:
        return
    try:
        cd = [int(v) for v in cd]
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{codec_id} stream metadata is malformed: cd_values: {exc}") from exc
    # Only the element type is checked here: the filters' own dimension parameters are
    # not a faithful copy of the shape (hdf5plugin 7.1 writes [1, t, 0, 1] for (1, 5)).
    if len(cd) < 2 or cd[1] != _H5_DTYPE_CODES[dtype.name]:
        raise _fail(codec_id, f"its HDF5 filter parameters {cd[:2]} name another element type than {dtype.name}")


def check_h5_filter(compressed: Compressed) -> None:
    codec_id = compressed.codec_id
    shape, dtype = _shape_dtype(compressed)
    meta = compressed.meta or {}
    stream_shape = _h5_stream_shape(compressed, shape)
    _check_cd_values(codec_id, meta, stream_shape, dtype)
    n = math.prod(stream_shape)
    data = compressed.data
    try:
        mask = int(meta.get("filter_mask", 0))
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{codec_id} stream metadata is malformed: filter_mask: {exc}") from exc
    if mask:  # HDF5 stored the chunk unfiltered: the raw values
        if len(data) != n * dtype.itemsize:
            raise _fail(codec_id, f"an unfiltered chunk of {len(data)} bytes for {n} {dtype.name} values")
        return
    if codec_id == "sz2":
        _check_sz2(data, n, dtype)
    else:
        _check_sz3_filter(data, stream_shape, dtype)


def _raw_ok(data: bytes, n: int, dtype: np.dtype) -> bool:
    """The filters store very small arrays as their raw values."""
    return len(data) == n * dtype.itemsize


def _check_sz2(data: bytes, n: int, dtype: np.dtype) -> None:
    head = _inflate_prefix("sz2", data) if data[:4] == ZSTD_MAGIC else data[:HEADER_PREFIX_BYTES]
    if head[:2] != b"\x02\x01":
        if _raw_ok(data, n, dtype):
            return
        raise _fail("sz2", "it is not an SZ 2.1 stream (version bytes), nor the raw values")
    if len(head) < 10:
        raise _fail("sz2", "its header is truncated")
    code = head[9] & 0x0F
    if code not in _SZ2_DTYPES:
        raise _fail("sz2", f"unknown SZ data type code {code}")
    if _SZ2_DTYPES[code] != dtype:
        raise _fail("sz2", f"the stream holds {_SZ2_DTYPES[code].name} values, the container says {dtype.name}")
    size_type = 8 if head[3] & 0x40 else 4
    at = _SZ2_COUNT_OFFSET[code]
    if len(head) < at + size_type:
        raise _fail("sz2", "its header is truncated")
    count = int.from_bytes(head[at : at + size_type], "big")
    if count != n:
        raise _fail("sz2", f"the stream holds {count} values, the container's shape {n}")


def _check_sz3_filter(data: bytes, stream_shape: tuple[int, ...], dtype: np.dtype) -> None:
    n = math.prod(stream_shape)
    want = squeezed(stream_shape)
    if len(data) >= 12 and data[8:12] == ZSTD_MAGIC:
        head = _inflate_prefix("sz3-h5", data[8:], 8 * len(want))
        if len(head) < 8 * len(want):
            raise _fail("sz3-h5", "its header is truncated")
        dims = struct.unpack_from(f"<{len(want)}Q", head)
        if tuple(dims) == want:
            return
        if head[:4] == _SZ3_INTERP_TAG and struct.unpack_from("<I", head, 4)[0] <= 3:
            # The filter's interpolation streams (3-D, smooth data) record no dimensions:
            # the filter decodes them with the dataset's. Nothing here can contradict the
            # container; the decoder runs in a child process (perfscout.tools.isolate).
            return
        raise _fail("sz3-h5", f"the stream holds shape {tuple(dims)}, the container says {stream_shape}")
    if not _raw_ok(data, n, dtype):
        raise _fail("sz3-h5", "it is not an SZ3 filter stream (no zstd frame), nor the raw values")


def check_zfp(compressed: Compressed) -> None:
    shape, dtype = _shape_dtype(compressed)
    data = compressed.data
    if len(data) < 16 or data[:3] != b"zfp":
        raise _fail("zfp", "no zfp header ('zfp' magic)")
    word0, word1 = struct.unpack_from("<QQ", data, 0)
    meta = (word0 >> 32) | ((word1 & ((1 << 20) - 1)) << 32)
    ztype, ndim = meta & 3, ((meta >> 2) & 3) + 1
    if ztype not in _ZFP_TYPES:
        raise _fail("zfp", "the stream holds integers, not floating-point values")
    if _ZFP_TYPES[ztype] != dtype:
        raise _fail("zfp", f"the stream holds {_ZFP_TYPES[ztype].name} values, the container says {dtype.name}")
    bits = {1: 48, 2: 24, 3: 16, 4: 12}[ndim]
    rest = meta >> 4
    extents = [((rest >> (i * bits)) & ((1 << bits) - 1)) + 1 for i in range(ndim)]  # x first
    dims = tuple(reversed(extents))
    if dims != shape:
        raise _fail("zfp", f"the stream holds shape {dims}, the container says {shape}")
    blocks = math.prod(-(-d // 4) for d in dims)
    if blocks > 8 * len(data) - _ZFP_HEADER_BITS:
        raise _fail("zfp", f"{blocks} blocks cannot fit in {len(data)} bytes (zfp spends >= 1 bit per block "
                           f"after its {_ZFP_HEADER_BITS}-bit header)")


def check_szp(compressed: Compressed) -> None:
    from perfscout.codecs.szp import format as F

    shape, dtype = _shape_dtype(compressed)
    h = F.parse_header(compressed.data)
    if h.shape != shape or h.dtype != dtype:
        raise _fail("szp-gpu", f"the stream holds {h.dtype.name}{h.shape}, the container says {dtype.name}{shape}")


# -- chunk containers (perfscout.codecs.chunked: the ``threads`` option) -------------------
CHUNKS_MAGIC = b"PSCK"
CHUNKS_VERSION = 1
_CHUNKS_PREFIX = struct.Struct("<4sHI")


def is_chunk_container(compressed: Compressed) -> bool:
    """Whether ``compressed`` holds several chunk streams (``meta["chunks"]``), not one library stream."""
    chunks = (compressed.meta or {}).get("chunks", 1)
    return not isinstance(chunks, int) or chunks != 1


def chunk_parts(compressed: Compressed, shape: tuple[int, ...],
                dtype: np.dtype) -> tuple[dict[str, Any], list[Compressed]]:
    """The container's header and one sealed :class:`Compressed` per chunk (its rows of
    axis 0, the codec's own meta for it), every size, CRC and row count checked against
    ``shape``; CodecError on anything else. Nothing is decoded."""
    buf = compressed.data
    cid = compressed.codec_id
    if len(buf) < _CHUNKS_PREFIX.size:
        raise CodecError(f"{cid} chunked stream is truncated ({len(buf)} bytes)")
    magic, version, head_len = _CHUNKS_PREFIX.unpack_from(buf)
    if magic != CHUNKS_MAGIC or version != CHUNKS_VERSION:
        raise CodecError(f"{cid} chunked stream has a bad magic or version ({magic!r}, {version})")
    try:
        header = json.loads(buf[_CHUNKS_PREFIX.size:_CHUNKS_PREFIX.size + head_len])
        entries = header["chunks"]
        rows = [int(e["rows"]) for e in entries]
        sizes = [int(e["nbytes"]) for e in entries]
        metas = [{k: v for k, v in dict(e.get("meta") or {}).items() if k not in ("crc32", "stream_nbytes")}
                 for e in entries]
        mode, bound = str(header["mode"]), float(header["bound"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CodecError(f"{cid} chunked stream header is malformed: {exc}") from None
    if header.get("axis") != 0 or not entries or min(rows) <= 0 or sum(rows) != shape[0] or min(sizes) < 0:
        raise CodecError(f"{cid} chunked stream's chunks ({rows} rows) do not tile shape {shape}")
    if len(entries) != compressed.meta.get("chunks"):
        raise CodecError(f"{cid} chunked stream holds {len(entries)} chunks, its metadata says "
                         f"{compressed.meta.get('chunks')}")
    pos = _CHUNKS_PREFIX.size + head_len
    if pos + sum(sizes) != len(buf):
        raise CodecError(f"{cid} chunked stream's chunk sizes do not add up to its length")
    parts = []
    for e, r, size, meta in zip(entries, rows, sizes, metas):
        stream = buf[pos:pos + size]
        pos += size
        if crc32(stream) != e.get("crc32"):
            raise CodecError(f"{cid} chunked stream is corrupt: a chunk's CRC-32 does not match")
        parts.append(Compressed(data=stream, shape=(r, *shape[1:]), dtype=dtype.name, codec_id=cid,
                                mode=mode, bound=bound, meta={**meta, **seal(stream)}))
    return header, parts


_CHECKS = {"sz3": check_sz3, "sz2": check_h5_filter, "sz3-h5": check_h5_filter, "zfp": check_zfp,
           "szp-gpu": check_szp}


def check_stream_header(compressed: Compressed) -> None:
    """CodecError unless the stream's own header agrees with ``compressed``'s shape,
    dtype and codec (a backend perfscout cannot read the header of is let through to its
    own decoder's checks)."""
    check = _CHECKS.get(compressed.codec_id)
    if check is None:
        return
    if is_chunk_container(compressed):  # a ``threads`` stream: every chunk's own header, before any decoder
        shape, dtype = _shape_dtype(compressed)
        for part in chunk_parts(compressed, shape, dtype)[1]:
            check(part)
        return
    check(compressed)
