"""Integrity of codec streams, and a portable file container for them.

The native libraries trust their input: SZ2 calls ``exit()`` on a stream whose version
bytes are wrong, and zfpy happily decodes a truncated stream into garbage. So every
CPU codec seals the stream it produced (CRC-32 and length in ``Compressed.meta``) and
checks the seal before a single byte reaches the library. ``Compressed.data`` stays
the library's own stream, byte for byte, so compression ratios are comparable with
the published ones.

The container (``to_bytes`` / ``from_bytes``) is what ``perfscout eval
--save-compressed`` writes and ``perfscout decompress`` reads::

    b"PSCZ"  u16 version  u32 header_len  header (UTF-8 JSON)  sections...  u32 crc32

The JSON header names the codec, mode, bounds, shape, dtype, the JSON-able ``meta`` and
the sections (name, byte length) that follow it in order; the trailing CRC-32 covers
everything before it. Sections: ``stream`` (the codec's bytes) and, for non-finite
pass-through, ``nonfinite_mask`` (zlib of the packed C-order bitmap of non-finite
positions) and ``nonfinite_values`` (zlib of their raw values in the array's dtype).
"""

from __future__ import annotations

import json
import struct
from typing import Any

# crc32/seal are defined beside Codec.sealed; importers of framing.seal keep working
from perfscout.codecs.base import Compressed, crc32, seal  # noqa: F401
from perfscout.errors import CodecError

MAGIC = b"PSCZ"
CONTAINER_VERSION = 1
_PREFIX = struct.Struct("<4sHI")


def check_seal(compressed: Compressed) -> None:
    """Raise :class:`CodecError` unless ``compressed.data`` is the stream that was sealed."""
    meta = compressed.meta or {}
    if "crc32" not in meta or "stream_nbytes" not in meta:
        raise CodecError(
            f"{compressed.codec_id} stream carries no checksum; refusing to hand unverified "
            "bytes to the native library (a corrupt stream can abort the process)"
        )
    if not all(isinstance(meta[k], int) for k in ("crc32", "stream_nbytes")):
        raise CodecError(f"{compressed.codec_id} stream checksum entries are malformed (not integers)")
    n = len(compressed.data)
    if n != meta["stream_nbytes"]:
        kind = "truncated" if n < meta["stream_nbytes"] else "has trailing bytes"
        raise CodecError(
            f"{compressed.codec_id} stream is {kind}: {n} bytes, expected {meta['stream_nbytes']}"
        )
    if crc32(compressed.data) != meta["crc32"]:
        raise CodecError(f"{compressed.codec_id} stream is corrupt: CRC-32 mismatch")


def to_bytes(compressed: Compressed, sections: dict[str, bytes] | None = None) -> bytes:
    """Serialise a :class:`Compressed` (plus optional extra sections) into one buffer."""
    parts = {"stream": compressed.data, **(sections or {})}
    header: dict[str, Any] = {
        "codec_id": compressed.codec_id,
        "mode": compressed.mode,
        "bound": compressed.bound,
        "abs_bound": compressed.abs_bound,
        "shape": list(compressed.shape),
        "dtype": compressed.dtype,
        "meta": compressed.meta,
        "sections": [[name, len(blob)] for name, blob in parts.items()],
    }
    try:
        head = json.dumps(header, allow_nan=True).encode()
    except TypeError as exc:
        raise CodecError(f"codec meta is not JSON-serialisable: {exc}") from exc
    body = _PREFIX.pack(MAGIC, CONTAINER_VERSION, len(head)) + head + b"".join(parts.values())
    return body + struct.pack("<I", crc32(body))


def from_bytes(buf: bytes) -> tuple[Compressed, dict[str, bytes]]:
    """Parse a container; raise :class:`CodecError` on anything malformed."""
    if len(buf) < _PREFIX.size + 4:
        raise CodecError(f"compressed file is truncated: {len(buf)} bytes is smaller than the header")
    magic, version, head_len = _PREFIX.unpack_from(buf)
    if magic != MAGIC:
        raise CodecError("not a perfscout compressed file (bad magic bytes)")
    if version != CONTAINER_VERSION:
        raise CodecError(f"unsupported container version {version} (this perfscout reads {CONTAINER_VERSION})")
    (stored_crc,) = struct.unpack_from("<I", buf, len(buf) - 4)
    if crc32(memoryview(buf)[:-4]) != stored_crc:  # no copy of the whole container
        raise CodecError("compressed file is corrupt or truncated: CRC-32 mismatch")
    start = _PREFIX.size
    try:
        header = json.loads(buf[start : start + head_len])
        pos = start + head_len
        sections: dict[str, bytes] = {}
        for name, size in header["sections"]:
            sections[name] = buf[pos : pos + size]
            pos += size
        if pos != len(buf) - 4:
            raise ValueError("section sizes do not add up to the file size")
        compressed = Compressed(
            data=sections.pop("stream"),
            shape=tuple(int(s) for s in header["shape"]),
            dtype=str(header["dtype"]),
            codec_id=str(header["codec_id"]),
            mode=str(header["mode"]),
            bound=float(header["bound"]),
            abs_bound=None if header["abs_bound"] is None else float(header["abs_bound"]),
            meta=dict(header["meta"]),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CodecError(f"compressed file header is malformed: {exc}") from exc
    return compressed, sections
