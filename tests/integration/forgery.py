"""A forger's tools for perfscout containers (:mod:`perfscout.codecs.framing`): split one into
its header and sections, and pack a changed one with its CRC-32 recomputed."""

from __future__ import annotations

import json
import struct

from perfscout.codecs.base import crc32
from perfscout.codecs.framing import _PREFIX, MAGIC


def pack(header: dict, parts: list[bytes]) -> bytes:
    head = json.dumps(header).encode()
    body = _PREFIX.pack(MAGIC, 1, len(head)) + head + b"".join(parts)
    return body + struct.pack("<I", crc32(body))


def split(buf: bytes) -> tuple[dict, list[bytes]]:
    _, _, head_len = _PREFIX.unpack_from(buf)
    header = json.loads(buf[_PREFIX.size:_PREFIX.size + head_len])
    pos, parts = _PREFIX.size + head_len, []
    for _, size in header["sections"]:
        parts.append(buf[pos:pos + size])
        pos += size
    return header, parts


def sz3_claiming(stream: bytes, n: int) -> bytes:
    """An SZ3 (pysz) stream whose own configuration is rewritten to hold ``n`` values in one
    dimension: every header check agrees with a container of shape ``[n]``."""
    (payload,) = struct.unpack_from("<Q", stream, 8)
    conf = stream[16 + payload:]
    ndim, width = conf[1], conf[2]
    rest = conf[3 + -(-ndim * width // 8) + 8:]
    new_conf = bytes([3 + 8 + 8 + len(rest), 1, 64]) + n.to_bytes(8, "little") + struct.pack("<Q", n) + rest
    return stream[:16 + payload] + new_conf
