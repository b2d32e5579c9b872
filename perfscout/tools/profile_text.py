"""Reading a saved profiler output file as text, or saying clearly why it is not text.

ncu CSVs exported on Windows (the Nsight Compute GUI) may start with a byte-order mark, in
UTF-8 or UTF-16; a compressed or binary file (a ``.ncu-rep`` passed as a CSV, a gzipped
log) must be refused with what it is, not reported as "no header found".
"""

from __future__ import annotations

from pathlib import Path

from perfscout.errors import InputError
from perfscout.io import check_input_file

#: Leading bytes of formats a user may pass by mistake, and what to do instead.
_MAGIC = (
    (b"\x1f\x8b", "gzip-compressed: decompress it first (gunzip)"),
    (b"PK\x03\x04", "a zip archive: extract the CSV first"),
    (b"\xfd7zXZ\x00", "xz-compressed: decompress it first (unxz)"),
    (b"(\xb5/\xfd", "zstd-compressed: decompress it first (unzstd)"),
    (b"BZh", "bzip2-compressed: decompress it first (bunzip2)"),
)
_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))


def read_profile_text(path: str | Path, what: str) -> str:
    """The file's text (BOM-aware; undecodable bytes replaced), or InputError saying why not."""
    p = Path(path)
    check_input_file(p, what)  # a regular file that fits in memory to parse, else refused
    try:
        with open(p, "rb") as fh:
            head = fh.read(_SNIFF_BYTES)  # a 200 MB binary file is refused from its first bytes
            _refuse_binary(p, head, what)
            data = head + fh.read()
    except OSError as exc:
        raise InputError(f"cannot read {what} {p}: {exc.strerror or exc}") from exc
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return data.decode(codec, errors="replace")
    return data.decode("utf-8", errors="replace")


#: How much of a file is looked at before the rest is read.
_SNIFF_BYTES = 65536


def _refuse_binary(p: Path, head: bytes, what: str) -> None:
    for magic, hint in _MAGIC:
        if head.startswith(magic):
            raise InputError(f"{p} is {hint}; {what} is read as text")
    if any(head.startswith(bom) for bom, _ in _BOMS):
        return  # UTF-16 text holds NUL bytes
    if b"\x00" in head:
        raise InputError(f"{p}: binary data, not a {what} (a text file was expected)")
