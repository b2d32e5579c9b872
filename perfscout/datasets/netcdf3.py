"""How long a netCDF-3 file must be, from its header: truncation is caught before any read.

netCDF-C reads a truncated classic file without complaint and returns zeros (or stale
bytes) for the part that is gone, so a cut-off download would be evaluated as data. The
classic header (CDF-1 classic, CDF-2 64-bit offset, CDF-5 64-bit data; the format is the
NetCDF Classic Format Specification) records each variable's start offset, its shape and
type, and the number of records; from them, the end of the last byte of data follows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import BinaryIO

from perfscout.errors import InputError

_TAG_DIMENSION, _TAG_VARIABLE, _TAG_ATTRIBUTE = 0x0A, 0x0B, 0x0C
#: Bytes per value of each netCDF external type (1-6 classic, 7-11 CDF-5).
_TYPE_SIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 4, 6: 8, 7: 1, 8: 2, 9: 4, 10: 8, 11: 8}
_STREAMING = 0xFFFFFFFF
#: A header naming more objects than this is forged (netCDF-C's own limits are far lower
#: in practice); it stops a crafted count from making the parser loop for ever.
_MAX_ITEMS = 1 << 20


class _Header:
    def __init__(self, f: BinaryIO, path: Path, version: int) -> None:
        self.f, self.path, self.version = f, path, version
        self.count_size = 8 if version == 5 else 4  # nelems, dim lengths, vsize
        self.offset_size = 4 if version == 1 else 8  # begin

    def _read(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise InputError(f"{self.path}: not a readable netCDF file (its header ends early)")
        return data

    def uint(self, size: int) -> int:
        return int.from_bytes(self._read(size), "big")

    def count(self) -> int:
        n = self.uint(self.count_size)
        if n > _MAX_ITEMS:
            raise InputError(f"{self.path}: not a readable netCDF file (header lists {n} items)")
        return n

    def name(self) -> str:
        n = self.uint(self.count_size)
        if n > 1 << 16:
            raise InputError(f"{self.path}: not a readable netCDF file (a {n}-byte name in the header)")
        raw = self._read(n + (-n % 4))
        return raw[:n].decode("utf-8", "replace")

    def list_header(self, tag: int) -> int:
        found, n = self.uint(4), self.count()
        if found == 0 and n == 0:
            return 0
        if found != tag:
            raise InputError(f"{self.path}: not a readable netCDF file (unexpected header tag {found:#x})")
        return n

    def skip_attributes(self) -> None:
        for _ in range(self.list_header(_TAG_ATTRIBUTE)):
            self.name()
            nc_type, n = self.uint(4), self.uint(self.count_size)
            size = _TYPE_SIZE.get(nc_type)
            if size is None:
                raise InputError(f"{self.path}: not a readable netCDF file (attribute type {nc_type})")
            nbytes = n * size
            if nbytes > 1 << 31:
                raise InputError(f"{self.path}: not a readable netCDF file (a {nbytes}-byte attribute)")
            self._read(nbytes + (-nbytes % 4))


def expected_size(path: str | Path) -> int | None:
    """The smallest size the netCDF-3 file at ``path`` can have, or None when the header says
    the record count is not known (streaming mode). InputError for a malformed header."""
    p = Path(path)
    with p.open("rb") as f:
        magic = f.read(4)
        if len(magic) != 4 or magic[:3] != b"CDF" or magic[3] not in (1, 2, 5):
            raise InputError(f"{p}: not a netCDF-3 file")
        h = _Header(f, p, magic[3])
        numrecs = h.uint(h.count_size)
        dims = []
        for _ in range(h.list_header(_TAG_DIMENSION)):
            h.name()
            dims.append(h.uint(h.count_size))
        h.skip_attributes()
        variables = []  # (begin, bytes per record or whole, is record variable)
        for _ in range(h.list_header(_TAG_VARIABLE)):
            h.name()
            ndims = h.count()
            dimids = [h.uint(h.count_size) for _ in range(ndims)]
            if any(d >= len(dims) for d in dimids):
                raise InputError(f"{p}: not a readable netCDF file (a variable names an unknown dimension)")
            h.skip_attributes()
            nc_type = h.uint(4)
            if nc_type not in _TYPE_SIZE:
                raise InputError(f"{p}: not a readable netCDF file (variable type {nc_type})")
            h.uint(h.count_size)  # vsize: capped for huge variables, so computed below instead
            begin = h.uint(h.offset_size)
            record = bool(dimids) and dims[dimids[0]] == 0
            shape = [dims[d] for d in (dimids[1:] if record else dimids)]
            variables.append((begin, math.prod(shape) * _TYPE_SIZE[nc_type], record))
        end = f.tell()
    records = [v for v in variables if v[2]]
    if records and numrecs == _STREAMING:
        return None
    # One record variable is stored unpadded; several are each padded to 4 bytes per record.
    recsize = records[0][1] if len(records) == 1 else sum(s + (-s % 4) for _, s, _ in records)
    for begin, size, record in variables:
        last = begin + ((numrecs - 1) * recsize + size if numrecs else 0) if record else begin + size
        end = max(end, last)
    return end


def check_not_truncated(path: str | Path) -> None:
    """InputError when a netCDF-3 file is shorter than its header says it is."""
    p = Path(path)
    need = expected_size(p)
    have = p.stat().st_size
    if need is not None and have < need:
        raise InputError(f"{p}: truncated netCDF file: its header needs at least {need} bytes, "
                         f"the file has {have} ({100 * have / need:.0f}%)")


__all__ = ["check_not_truncated", "expected_size"]
