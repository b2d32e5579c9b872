"""Every core for the CPU codecs: independent chunks compressed in parallel processes.

The CPU libraries here use one core each: the pysz wheel is built without OpenMP (its
``sz.compress`` also holds the GIL, so threads do not overlap it), zfpy has no OpenMP
switch and holds the GIL, and hdf5plugin reports ``openmp=False`` (and h5py serialises
every HDF5 call behind one lock). ``threads=N`` therefore does what HDF5 chunking does:
the array is split along its slowest axis into N contiguous slabs (as even as the codec's
block edges allow: zfp's slabs are multiples of 4 rows), each slab is compressed as a stream of its own by the same codec in a forked
process (the slab is shared copy-on-write, the stream comes back through a pipe), and the
streams are framed in one container. Decompression decodes the slabs in parallel the same
way and stacks them.

What it changes, honestly:

- **the ratio**: each stream has its own header and its predictor restarts at each slab
  edge, so N streams are usually a little larger than one; the result records the chunk
  count (``CompressionResult.chunks``) and the sweep report sets the chunked ratio beside the
  single-stream one;
- **never the bound**: ``abs``, ``pw_rel`` and ``fixed_rate`` are element- or block-local and
  mean the same on a slab; ``rel`` (R = max - min) is resolved to ``abs`` with the *whole*
  array's range before splitting (a slab's own range is smaller: it would tighten the bound
  and change the contract); ``psnr``/``ratio`` are searched over ``abs`` by the evaluation;
- **not the bytes between runs**: the slab boundaries depend only on the shape and N, and
  each slab's stream only on its values, so the container is the same whatever order the
  processes finish in.

The container (``Compressed.data``)::

    b"PSCK"  u16 version  u32 header_len  header (UTF-8 JSON)  stream_0 ... stream_{N-1}

The header lists, per chunk, its rows (along axis 0), its byte length, its CRC-32 and the
codec's own ``meta`` for it (e.g. the HDF5 filter's ``cd_values``). ``Compressed.meta``
carries ``chunks`` (N), ``chunk_axis`` (0), ``chunk_mode``/``chunk_bound`` (what each stream
was made with) and the seal of the whole container. A chunk process that dies (a native
crash) or fails becomes a :class:`CodecError` naming the chunk and the signal.
"""

from __future__ import annotations

import json
import mmap
import os
import selectors
import signal
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from perfscout.codecs.base import Compressed
from perfscout.codecs._checks import checked_metadata
from perfscout.codecs.framing import crc32
from perfscout.codecs.streams import CHUNKS_MAGIC, CHUNKS_VERSION, chunk_parts, is_chunk_container
from perfscout.errors import CodecError

if TYPE_CHECKING:
    from perfscout.codecs.base import Codec

MAGIC = CHUNKS_MAGIC  # the container is parsed in streams.chunk_parts (its headers checked there too)
VERSION = CHUNKS_VERSION
_PREFIX = struct.Struct("<4sHI")
#: The most chunk processes one call runs (a sanity cap on the option, not a tuning knob).
MAX_THREADS = 256


def check_threads(codec_id: str, value: Any) -> int:
    """The ``threads`` option as an int >= 1, or a CodecError saying what is allowed."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 1 <= int(value) <= MAX_THREADS:
        raise CodecError(f"{codec_id}: option threads must be an integer from 1 to {MAX_THREADS} "
                         f"(independent chunks compressed in parallel), got {value!r}")
    return int(value)


def chunk_rows(n_rows: int, n_chunks: int, align: int = 1) -> list[int]:
    """Rows per chunk along axis 0: ``n_chunks`` slabs as even as ``align`` allows.

    Every boundary but the array's end falls on a multiple of ``align`` rows (a codec's
    block edge: zfp codes 4^d blocks, and a slab of 6 rows would pad to 8), so there are
    at most ``ceil(n_rows / align)`` chunks."""
    align = max(1, int(align))
    units = -(-n_rows // align)
    n = max(1, min(n_chunks, units))
    base, extra = divmod(units, n)
    rows = [(base + (1 if i < extra else 0)) * align for i in range(n)]
    rows[-1] -= sum(rows) - n_rows  # the last slab ends at the array's end
    return rows


# ----------------------------------------------------------------------------- parallel map


def _fork_map(fn: Callable[[int], bytes], n: int, what: str, *, shared_output: bool = False) -> list[bytes]:
    """``[fn(0), ..., fn(n-1)]``, each in a forked child; its bytes come back through a pipe.

    A child writes ``b"K" + payload`` when ``fn`` returned, ``b"E" + message`` when it raised;
    one that dies without a whole reply (a signal, ``exit()`` inside the library) is a
    CodecError naming the chunk and the signal. ``os.fork`` rather than multiprocessing: it
    works inside daemonic workers (Dask, a pool) and pickles nothing. ``shared_output``: ``fn``
    writes its result into memory shared with the caller and returns nothing.
    """
    if n == 1 and not shared_output:
        return [fn(0)]
    sel = selectors.DefaultSelector()
    pids: dict[int, int] = {}
    bufs: dict[int, bytearray] = {}
    try:
        for i in range(n):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the chunk process: compute, reply, leave without running any cleanup
                os.close(r)
                code = 0
                try:
                    out = b"K" + bytes(fn(i))
                except BaseException as exc:  # noqa: BLE001 - every failure goes back as text
                    out, code = b"E" + f"{type(exc).__name__}: {exc}".encode(errors="replace"), 0
                try:
                    view = memoryview(out)
                    while view:
                        view = view[os.write(w, view):]
                except OSError:
                    code = 1
                os._exit(code)
            os.close(w)
            pids[i] = pid
            bufs[i] = bytearray()
            os.set_blocking(r, False)
            sel.register(r, selectors.EVENT_READ, i)
        open_fds = n
        while open_fds:
            for key, _ in sel.select():
                try:
                    chunk = os.read(key.fd, 1 << 20)
                except BlockingIOError:
                    continue
                if chunk:
                    bufs[key.data] += chunk
                else:
                    sel.unregister(key.fd)
                    os.close(key.fd)
                    open_fds -= 1
    finally:
        for key in list(sel.get_map().values()):
            sel.unregister(key.fd)
            os.close(key.fd)
        sel.close()
        statuses = {i: os.waitpid(pid, 0)[1] for i, pid in pids.items()}
    out = []
    for i in range(n):
        rc = os.waitstatus_to_exitcode(statuses[i])
        buf = bufs[i]
        if rc < 0 or not buf:
            try:
                how = f"died from {signal.Signals(-rc).name}" if rc < 0 else f"exited with code {rc} without a reply"
            except ValueError:
                how = f"died from signal {-rc}"
            raise CodecError(f"{what}: the process of chunk {i} of {n} {how}")
        if buf[:1] == b"E":
            raise CodecError(f"{what}: chunk {i} of {n}: {buf[1:].decode(errors='replace')}")
        out.append(bytes(buf[1:]))
    return out


# ----------------------------------------------------------------------------- compress


def _chunk_codec(codec: Codec, mode: str, bound: float) -> Codec:
    options = {k: v for k, v in codec.options.items() if k != "threads"}
    return type(codec)(mode, bound, **options)


def _chunk_setting(codec: Codec, data: np.ndarray) -> tuple[str, float]:
    """The mode and bound each chunk's stream is made with (``rel`` resolved on the whole array)."""
    if codec.mode != "rel":
        return codec.mode, codec.bound
    if "abs" not in codec.native_modes:
        raise CodecError(f"{codec.codec_id}: threads > 1 with rel needs an abs mode to resolve rel to")
    value_range = float(np.max(data)) - float(np.min(data))  # float64: no overflow in the data's type
    if not np.isfinite(value_range) or value_range <= 0:
        raise CodecError(f"{codec.codec_id}: threads > 1 with rel needs a finite, non-zero value range "
                         f"(got {value_range!r}); use one thread")
    return "abs", codec.bound * value_range


def compress_chunked(codec: Codec, data: np.ndarray, threads: int) -> Compressed:
    """``data`` (validated, C-contiguous) as ``threads`` independent streams in one container."""
    rows = chunk_rows(data.shape[0], threads, getattr(codec, "chunk_align", 1))
    if len(rows) < 2:
        raise CodecError(f"{codec.codec_id}: {data.shape[0]} row(s) along the slowest axis cannot be split "
                         "into chunks")
    mode, bound = _chunk_setting(codec, data)
    single = _chunk_codec(codec, mode, bound)
    starts = np.cumsum([0, *rows])

    def one(i: int) -> bytes:
        part = single.compress(data[starts[i]:starts[i + 1]])
        return json.dumps({"meta": part.meta}).encode() + b"\n" + part.data

    replies = _fork_map(one, len(rows), f"{codec.codec_id} compression")
    entries, streams = [], []
    for r, reply in zip(rows, replies):
        head, _, stream = reply.partition(b"\n")
        meta = json.loads(head)["meta"]
        entries.append({"rows": r, "nbytes": len(stream), "crc32": crc32(stream), "meta": meta})
        streams.append(stream)
    header = json.dumps({"axis": 0, "mode": mode, "bound": bound, "chunks": entries}).encode()
    raw = _PREFIX.pack(MAGIC, VERSION, len(header)) + header + b"".join(streams)
    abs_bound = bound if mode == "abs" else None
    return codec.sealed(data, raw, abs_bound=abs_bound, chunks=len(rows), chunk_axis=0, chunk_mode=mode,
                        chunk_bound=bound)


# ----------------------------------------------------------------------------- decompress


#: Whether a stream is a container of several chunk streams (not the library's own stream).
is_chunked = is_chunk_container


def _checked_container(codec: Codec, compressed: Compressed) -> tuple[tuple[int, ...], np.dtype]:
    """What :func:`perfscout.codecs._checks.checked_stream` checks, less the library header
    (a container has none: each chunk's header is checked when that chunk is decoded), plus
    the chunk count."""
    shape, dtype = checked_metadata(codec, compressed)
    if not isinstance(compressed.meta.get("chunks"), int) or compressed.meta["chunks"] < 2:
        raise CodecError(f"{codec.codec_id} chunked stream metadata is malformed: chunks "
                         f"{compressed.meta.get('chunks')!r}")
    return shape, dtype


def _parse(compressed: Compressed, shape: tuple[int, ...]) -> tuple[dict[str, Any], list[bytes]]:
    """The container's header and its chunk streams (bytes), checked as :func:`chunk_parts` does."""
    header, parts = chunk_parts(compressed, shape, np.dtype(compressed.dtype))
    return header, [p.data for p in parts]


def decompress_chunked(codec: Codec, compressed: Compressed) -> np.ndarray:
    """Decode a container written by :func:`compress_chunked` (seal, shape and every chunk checked)."""
    shape, dtype = _checked_container(codec, compressed)
    header, parts = chunk_parts(compressed, shape, dtype)
    mode, bound = str(header["mode"]), float(header["bound"])
    single = _chunk_codec(codec, mode, bound)
    starts = np.cumsum([0, *(p.shape[0] for p in parts)])
    # The chunk processes write their slabs straight into one shared mapping: the decoded
    # array never goes through a pipe, and the caller gets it without another copy.
    nbytes = int(np.prod(shape)) * dtype.itemsize
    shared = mmap.mmap(-1, max(1, nbytes))
    out = np.frombuffer(shared, dtype=dtype, count=int(np.prod(shape))).reshape(shape)

    def one(i: int) -> bytes:
        part = parts[i]
        decoded = single.decompress(part)  # each chunk's own header is checked against its shape
        if decoded.shape != part.shape or decoded.dtype != dtype:
            raise CodecError(f"chunk decoded to {decoded.dtype}{decoded.shape}, expected {dtype}{part.shape}")
        out[starts[i]:starts[i + 1]] = decoded
        return b""

    _fork_map(one, len(parts), f"{compressed.codec_id} decompression", shared_output=True)
    return out
