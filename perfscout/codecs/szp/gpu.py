"""CuPy driver for the szp CUDA kernels (szp_kernels.cu).

Everything here produces exactly the bytes :mod:`perfscout.codecs.szp.format` specifies:
the host-side decisions (bound resolution, geometry, header) are the reference's own
functions, and the kernels round every operation as NumPy does.

Entry points: :func:`compress_device` / :func:`decompress_device` (device-resident, the
input and output stay on the GPU), :func:`compress_host` / :func:`decompress_host` (NumPy
in and out, streamed in chunks through pinned buffers on two CUDA streams when the array
is larger than the chunk size), and :func:`timed_roundtrip` (CUDA-event medians with H2D
and D2H timed apart).
"""

from __future__ import annotations

import functools
import importlib.resources
import math
import os
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from perfscout.codecs.szp import format as F
from perfscout.errors import CodecError, InputError

WARPS, STEPS = 8, 4  # must match szp_kernels.cu
TILE_BLOCKS = WARPS * STEPS * 4  # blocks per tile of the decode kernel
SCAN_CTA_TILES = 32  # tiles per CTA of szp_width_scan
#: Resident warps per SM of szp_compress (its __launch_bounds__), 32- / 64-bit indices:
#: the compress grid is persistent, one CTA per resident slot.
COMPRESS_RESIDENT_WARPS = {False: 48, True: 40}


def compress_resident_warps(wide: bool, dtype: Any, fmt: int) -> int:
    """Warps per SM of the persistent compress grid: its __launch_bounds__ (szp_kernels.cu,
    COMPRESS_MIN_CTAS): 40 for 64-bit indices and for format 4 (its chain step), else 48."""
    return COMPRESS_RESIDENT_WARPS[wide or fmt >= 4]


THREADS = WARPS * 32
VAL_MASK = (1 << 62) - 1
#: Stage arrays larger than this through the chunked, pinned, two-stream path.
DEFAULT_CHUNK_BYTES = 1 << 30
#: The stream format version the GPU writes (the kernels' SZP_FORMAT build); it reads 1-3.
WRITE_VERSION = F.VERSION


def gpu_available() -> tuple[bool, str]:
    """(usable, reason): reason is '' or why no GPU path is possible here."""
    try:
        import cupy as cp
    except Exception as exc:  # no CuPy wheel, or a broken CUDA install
        return False, f"gpu_unavailable: CuPy cannot be imported ({type(exc).__name__}: {exc})"
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            return False, "gpu_unavailable: no CUDA device"
    except Exception as exc:
        return False, f"gpu_unavailable: {type(exc).__name__}: {exc}"
    return True, ""


def _cp() -> Any:
    import cupy as cp

    return cp


#: Views with fewer elements than this use the kernels built with 32-bit indices.
NARROW_LIMIT = 2**31


def _kernel_format(version: int) -> int:
    """The SZP_FORMAT build that reads or writes ``version`` (version 1 is read by 2's)."""
    if version not in F.READABLE_VERSIONS:
        raise CodecError(f"unsupported szp format version {version}")
    return version if version >= 3 else 2


#: The build the format-independent kernels (range pass, corner scan/pack, finishing,
#: gather, scatter) come from: the one the writer's kernels live in, compiled anyway.
_AUX_FMT = _kernel_format(WRITE_VERSION)


@functools.lru_cache(maxsize=None)
def _module(dtype: str, block_ndim: int, wide: bool = False, fmt: int = 3) -> Any:
    cp = _cp()
    src = importlib.resources.files(__package__).joinpath("szp_kernels.cu").read_text()
    opts = ["--std=c++17", "--fmad=false", "--ftz=false", "--prec-div=true",
            f"-DSZP_T={'double' if dtype == 'float64' else 'float'}", f"-DSZP_BDIM={block_ndim}",
            f"-DSZP_FORMAT={fmt}"]
    if dtype == "float64":
        opts.append("-DSZP_F64")
    if wide:
        opts.append("-DSZP_WIDE")
    # A/B knob for benchmarks/szp_try.sh (e.g. "-DSZP_DEC_MIN_CTAS=6"); unset in normal use.
    opts += os.environ.get("SZP_NVRTC_DEFINES", "").split()
    return cp.RawModule(code=src, options=tuple(opts))


@functools.lru_cache(maxsize=None)
def _sm_count(device_id: int) -> int:
    return int(_cp().cuda.runtime.deviceGetAttribute(16, device_id))  # cudaDevAttrMultiProcessorCount


def _device_id() -> int:
    return int(_cp().cuda.runtime.getDevice())


@functools.lru_cache(maxsize=None)
def _kernel(dtype: str, block_ndim: int, wide: bool, fmt: int, name: str, device_id: int) -> Any:
    """One kernel of :func:`_module`, looked up once per device (a get_function per launch
    is host time inside every e2e call)."""
    return _module(dtype, block_ndim, wide, fmt).get_function(name)


@functools.lru_cache(maxsize=None)
def _compress_kernel(dtype: str, block_ndim: int, wide: bool, fmt: int, device_id: int) -> tuple[Any, int]:
    """szp_compress and its CTA size (its __launch_bounds__), queried once."""
    fn = _kernel(dtype, block_ndim, wide, fmt, "szp_compress", device_id)
    return fn, int(fn.max_threads_per_block)


# -- small asynchronous transfers ---------------------------------------------------------
# The e2e call is a few launches around one wait; what used to follow the wait (a CuPy fill
# per pad, a pageable header upload, a CuPy argsort) kept the GPU idle while the host
# worked. These helpers are single runtime calls on the current stream.


def _stream_ptr() -> int:
    return int(_cp().cuda.get_current_stream().ptr)


def _zero(ptr: int, nbytes: int) -> None:
    """cudaMemsetAsync of ``nbytes`` at device address ``ptr`` (a CuPy fill is a kernel)."""
    if nbytes > 0:
        _cp().cuda.runtime.memsetAsync(ptr, 0, nbytes, _stream_ptr())


def _copy(dst: int, src: int, nbytes: int) -> None:
    """cudaMemcpyAsync between any two addresses CUDA knows (device or pinned host)."""
    if nbytes > 0:
        rt = _cp().cuda.runtime
        rt.memcpyAsync(dst, src, nbytes, getattr(rt, "memcpyDefault", 4), _stream_ptr())


#: Outliers up to this many are sorted on the device inside the call's one stream of
#: launches (szp_sort_outliers: one CTA, 12 bytes of shared memory per outlier, so the
#: largest power of two the device's opt-in shared memory holds, at most this); more are
#: sorted after the wait (CuPy's argsort and gathers: ~0.3 ms of launches on the H200).
SORT_MAX = 16384
#: Shared memory every device gives a kernel without opting in (bytes).
_DEFAULT_DYNAMIC_SMEM = 48 * 1024
#: Byte offsets in the pinned staging buffer: the counts read back (the compress reads 4
#: u64, the decode 3), the header going up.
_ST_COUNTS = 0
_ST_HEAD = 64
_ST_BYTES = _ST_HEAD + 256


class _Staging:
    """Pinned host bytes for one thread's small transfers on one device. The uploads are
    asynchronous (the call returns before they run), so ``done`` is recorded after a call's
    last transfer and the next call waits on it before it touches the bytes."""

    def __init__(self) -> None:
        import cupyx

        self.buf = cupyx.empty_pinned(_ST_BYTES, dtype=np.uint8)
        self.ptr = int(self.buf.ctypes.data)
        self.done = _cp().cuda.Event(block=False, disable_timing=True)
        self.pending = False

    def acquire(self) -> _Staging:
        if self.pending:
            self.done.synchronize()
            self.pending = False
        return self

    def mark(self) -> None:
        """Record ``done`` after the transfers queued so far (on the current stream)."""
        self.done.record()
        self.pending = True

    def wait(self) -> None:
        self.done.synchronize()
        self.pending = False


_local = threading.local()


def _staging() -> _Staging:
    """This thread's staging buffer for the current device, free to use."""
    cache = getattr(_local, "staging", None)
    if cache is None:
        cache = _local.staging = {}
    dev = _device_id()
    if dev not in cache:
        cache[dev] = _Staging()
    return cache[dev].acquire()


def device_name() -> str:
    cp = _cp()
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def as_device_array(obj: Any) -> Any:
    """A CuPy view of a CuPy array, a torch CUDA tensor (DLPack, zero-copy) or anything
    with ``__cuda_array_interface__``; None for host arrays."""
    cp = _cp()
    if isinstance(obj, cp.ndarray):
        return obj
    if hasattr(obj, "__dlpack__") and getattr(obj, "is_cuda", False):
        return cp.from_dlpack(obj)
    if hasattr(obj, "__cuda_array_interface__"):
        return cp.asarray(obj)
    return None


# -- geometry of a launch ---------------------------------------------------------------


@dataclass(frozen=True)
class Geometry:
    view: tuple[int, int, int]
    grid: tuple[int, int, int]
    block_ndim: int

    @property
    def nblocks(self) -> int:
        return math.prod(self.grid)

    @property
    def ntiles(self) -> int:
        return -(-self.nblocks // TILE_BLOCKS)

    @property
    def wide(self) -> bool:
        """Whether element offsets need 64 bits (the SZP_WIDE kernels)."""
        return math.prod(self.view) >= NARROW_LIMIT

    def module(self, dtype: Any, version: int = WRITE_VERSION) -> Any:
        return _module(str(np.dtype(dtype)), self.block_ndim, self.wide, _kernel_format(version))

    def kernel(self, dtype: Any, name: str, version: int = WRITE_VERSION) -> Any:
        return _kernel(str(np.dtype(dtype)), self.block_ndim, self.wide, _kernel_format(version), name,
                       _device_id())

    def args(self, data: Any) -> tuple[Any, ...]:
        """Geometry arguments of the kernels for the device array ``data``: the view in
        the index width of the build, the block grid, and whether 16-byte accesses are
        safe (rows of a multiple of 4 elements, a 16-byte aligned base)."""
        Z, Y, X = self.view
        it = np.uint64 if self.wide else np.uint32
        vec = X % 4 == 0 and data.data.ptr % 16 == 0
        return (it(Z), it(Y), it(X), np.uint32(self.grid[1]), np.uint32(self.grid[2]),
                np.uint32(self.nblocks), np.int32(vec))


def scratch_words(geo: Geometry) -> int:
    """u64 words of scratch one compress or decompress launch of ``geo`` needs: look-back
    status words, counters, and the decoder's tile offsets (compress tiles of 4 or more
    warps have at most twice the decoder's tiles), then the corner scan's region
    (format 3, at _corner_region)."""
    ctas, _first = _scan_slots(geo)
    return _corner_region(geo) + ctas + 1 + geo.ntiles + 1 + 8


def _corner_region(geo: Geometry) -> int:
    """Scratch offset of the corner scan: [status (one per CTA), counter, tile prefix
    (ntiles + 1)], after everything the compress or the width scan uses."""
    return 2 * geo.ntiles + 8


def scratch_zero_words(geo: Geometry) -> int:
    """Leading scratch words a launch zeroes with one memset: everything the compress (its
    look-back status words and counts) or the width scan (its status words, counter, error
    and corner-count slots) and the corner scan (its status words and counter) need zeroed."""
    ctas, _first = _scan_slots(geo)
    return _corner_region(geo) + ctas + 1


def new_scratch(geo: Geometry) -> Any:
    return _cp().empty(scratch_words(geo), dtype=np.uint64)


def geometry(shape: tuple[int, ...], block_ndim: int) -> Geometry:
    view = F.view_shape(shape, block_ndim)
    grid = F.block_grid(view, block_ndim)
    if math.prod(grid) >= 2**32 - TILE_BLOCKS:
        raise InputError("array too large for one szp stream (2**32 blocks); split it")
    return Geometry(view, grid, block_ndim)


# -- compress -------------------------------------------------------------------------


@dataclass
class DeviceStream:
    """A complete stream body on the device (everything but the 4-byte CRC trailer,
    which is computed when the bytes reach the host)."""

    body: Any  # cupy uint8 array
    header: F.Header
    #: the autoshape.ShapeChoice when compress_device was handed a chooser
    shape_choice: Any = None


@dataclass
class _Pieces:
    body: Any  # uint8 buffer laid out as a stream: header room, widths, payload, ...
    widths: Any
    payload: Any  # u32 view of the worst-case payload area
    out_idx: Any
    out_val: Any
    cap: int
    ntiles: int = 0  # compress tiles (their look-back status words lead the scratch)
    payload_words: int = -1
    n_out: int = -1
    corner_ext: Any = None  # u32 per block: a corner block's ext0 (format 3)
    corner_prefix: Any = None  # u64 per decode tile: its first corner byte (format 3)
    corner_bytes: int = 0
    version: int = WRITE_VERSION
    corner_tmp: Any = None  # u8, 4 per block: the corners packed before their offset is known


def device_range(xd: Any) -> tuple[float, float] | None:
    """Finite (min, max) of a device array, by one pass of the minmax kernel."""
    cp = _cp()
    f64 = xd.dtype == np.float64
    kt = np.uint64 if f64 else np.uint32
    isz = np.dtype(kt).itemsize
    keys = cp.empty(2, dtype=kt)
    cp.cuda.runtime.memsetAsync(keys.data.ptr, 0xFF, isz, _stream_ptr())  # min key: all ones
    _zero(keys.data.ptr + isz, isz)  # max key: 0
    if xd.size:
        dev = _device_id()
        blocks = int(min(_sm_count(dev) * 8, max(1, -(-xd.size // (4 * THREADS)))))
        _kernel(str(xd.dtype), 1, False, _AUX_FMT, "szp_minmax", dev)((blocks,), (THREADS,), (xd, np.uint64(xd.size), keys))
    st = _staging()  # the one wait before the compress kernel: its quantiser needs the range
    _copy(st.ptr + _ST_COUNTS, keys.data.ptr, 2 * isz)
    st.mark()
    st.wait()
    lo, hi = (int(k) for k in st.buf[_ST_COUNTS : _ST_COUNTS + 2 * isz].view(kt))
    if lo == np.iinfo(kt).max and hi == 0:
        return None
    sign = 1 << (63 if f64 else 31)
    ut, ft = (np.uint64, np.float64) if f64 else (np.uint32, np.float32)

    def unkey(k: int) -> float:
        u = (k ^ sign) if k & sign else (~k & ((sign << 1) - 1))
        return float(np.array(u, dtype=ut).view(ft))

    return unkey(lo), unkey(hi)


def _outlier_cap(n: int) -> int:
    """Room for outliers in the first launch; more than this triggers a second launch."""
    return max(1024, n // 64)


def _compress_shape(geo: Geometry, dtype: Any, version: int = WRITE_VERSION) -> tuple[Any, int, int, int]:
    """(kernel, threads per CTA, tiles, CTAs) of a compress launch. The CTA size comes back
    from the compiled kernel (its __launch_bounds__), so a build with another SZP_CWARPS
    (benchmarks/szp_try.sh A/B runs) launches correctly."""
    dev = _device_id()
    fn, threads = _compress_kernel(str(np.dtype(dtype)), geo.block_ndim, geo.wide, _kernel_format(version), dev)
    cwarps = threads // 32
    ntiles = -(-geo.nblocks // (cwarps * STEPS * 4))
    warps = compress_resident_warps(geo.wide, dtype, _kernel_format(version))
    ctas = _sm_count(dev) * (warps // cwarps)
    return fn, threads, ntiles, max(1, min(ntiles, ctas))


def _corner_scan_launch(geo: Geometry, widths: Any, scratch: Any, total_out: Any) -> tuple[Any, ...]:
    """(kernel, grid, block, arguments) of szp_corner_scan (format 3) over ``widths`` with
    the corner region of ``scratch``: the first corner byte of each decode tile goes to the
    region's prefix, the total also to ``total_out`` (a u64 scratch slot read back with the
    other counts); the region's status words and counter must be zero before it runs."""
    cp = _cp()
    ctas, _first = _scan_slots(geo)
    r = _corner_region(geo)
    prefix = scratch[r + ctas + 1 : r + ctas + 2 + geo.ntiles]
    return (_kernel("float32", 1, False, _AUX_FMT, "szp_corner_scan", _device_id()), (ctas,), (THREADS,),
            (widths, np.uint32(geo.nblocks), np.uint32(geo.ntiles), prefix, scratch[r : r + ctas],
             scratch[r + ctas : r + ctas + 1].view(cp.uint32), total_out))


def _corner_scan(geo: Geometry, widths: Any, scratch: Any, total_out: Any, zeroed: bool = False) -> Any:
    """Launch szp_corner_scan (:func:`_corner_scan_launch`); returns the tile prefix.
    ``zeroed``: the caller's memset of scratch_zero_words already cleared the region's
    status words and counter."""
    if not zeroed:
        ctas, _first = _scan_slots(geo)
        r = _corner_region(geo)
        scratch[r : r + ctas + 1] = 0
    fn, grid, block, args = _corner_scan_launch(geo, widths, scratch, total_out)
    fn(grid, block, args)
    return args[3]


def _corner_grid(geo: Geometry) -> tuple[tuple[int], tuple[int]]:
    """Grid of szp_corner_pack / szp_corner_unpack: one warp per decode tile."""
    return (geo.ntiles // WARPS + 1,), (THREADS,)


def _launch_compress(xd: Any, geo: Geometry, qz: F.Quantizer, cap: int, scratch: Any,
                     version: int = WRITE_VERSION) -> _Pieces:
    """Launch the fused kernel; it writes widths and payload straight into a buffer laid
    out like the final stream (so no copy of the payload follows). Format 3: a corner
    block's ext0 goes to a per-block side array, and a scan of the corner byte counts
    follows (its total lands in the scratch next to the payload size and outlier count,
    so that one read-back brings all three); _pack_corners then byte-packs them."""
    cp = _cp()
    nb = geo.nblocks
    T = xd.dtype.type
    hlen = F.HEADER_LEN if version >= 3 else F.HEADER_LEN_V2
    pay_off = hlen + F.pad16(nb)
    pay_max = F.pad16(4 * (F.MAX_WIDTH + 1) * nb)
    corner_max = F.pad16(4 * nb) if version >= 3 else 0
    size = pay_off + pay_max + corner_max + F.pad16(8 * cap) + F.pad16(xd.dtype.itemsize * cap) + 16
    body = cp.empty(size, dtype=cp.uint8)
    widths = body[hlen:pay_off]
    payload = body[pay_off : pay_off + pay_max].view(cp.uint32)
    out_idx = cp.empty(max(1, cap), dtype=cp.uint64)
    out_val = cp.empty(max(1, cap), dtype=xd.dtype)
    # per block: ext0 (u32), then 4 bytes of room for the packed corners (format 3)
    ext_room = cp.empty(max(1, 2 * nb), dtype=cp.uint32)
    corner_ext = ext_room[: max(1, nb)]
    ntiles = 0
    cprefix = None
    if nb:
        fn, threads, ntiles, ctas = _compress_shape(geo, xd.dtype, version)
        _zero(scratch.data.ptr, 8 * scratch_zero_words(geo))  # its status and counts, the corner scan's
        status = scratch[:ntiles]
        counter = scratch[ntiles : ntiles + 1].view(cp.uint32)
        count = scratch[ntiles + 1 : ntiles + 2]
        fn((ctas,), (threads,),
           (xd, *geo.args(xd), T(qz.recip), T(qz.step), T(qz.check), widths, corner_ext, payload,
            status, counter, out_idx, out_val, count, np.uint64(cap)))
        if version >= 3:
            cprefix = _corner_scan(geo, widths, scratch, scratch[ntiles + 2 : ntiles + 3], zeroed=True)
    return _Pieces(body, widths, payload, out_idx, out_val, cap, ntiles, corner_ext=corner_ext,
                   corner_prefix=cprefix, version=version,
                   corner_tmp=ext_room[nb:].view(cp.uint8) if nb else None)


def _finish_launch(p: _Pieces, geo: Geometry, scratch: Any) -> None:
    """Read the payload size (the last tile's inclusive prefix), the outlier count and the
    corners' byte count, in one read-back."""
    if geo.nblocks == 0:
        p.payload_words, p.n_out, p.corner_bytes = 0, 0, 0
        return
    tail = scratch[p.ntiles - 1 : p.ntiles + 3].get()
    p.payload_words = int(tail[0]) & VAL_MASK
    p.n_out = int(tail[2])
    p.corner_bytes = int(tail[3]) if p.version >= 3 else 0


def _pack_corners(p: _Pieces, geo: Geometry, out: Any) -> None:
    """Byte-pack the corner blocks' ext0 into ``out`` (p.corner_bytes bytes, format 3)."""
    if p.corner_bytes:
        _launch_pack(p, geo, out)


def _launch_pack(p: _Pieces, geo: Geometry, out: Any) -> None:
    """szp_corner_pack into ``out`` (room for every corner byte), whatever p.corner_bytes is."""
    _kernel("float32", 1, False, _AUX_FMT, "szp_corner_pack", _device_id())(
        *_corner_grid(geo),
        (p.widths, np.uint32(geo.nblocks), np.uint32(geo.ntiles), p.corner_ext, p.corner_prefix, out))


def _compress_pieces(xd: Any, geo: Geometry, qz: F.Quantizer, version: int = WRITE_VERSION) -> _Pieces:
    scratch = new_scratch(geo)
    p = _launch_compress(xd, geo, qz, _outlier_cap(xd.size), scratch, version)
    _finish_launch(p, geo, scratch)
    if p.n_out > p.cap:  # rare: very many outliers; run again with room for all of them
        p = _launch_compress(xd, geo, qz, p.n_out, scratch, version)
        _finish_launch(p, geo, scratch)
    return p


# -- stream sizes of samples (the automatic block shape) ------------------------------------
# The shape choice compresses the same sample with every candidate and compares sizes; it
# needs three counts per candidate, not a stream. Each launch of compress_device's path
# costs ~0.25 ms of host time on the H200 host (allocations, scratch views, argument
# tuples), which the sample's few microseconds of GPU work cannot hide; here everything
# but the sample's pointer is built once per (sample shape, block shape, dtype) and
# thread, and all candidates share one wait.


@dataclass
class _SamplePlan:
    geo: Geometry
    tail_word: int  # index in the set's scratch of the last compress tile's status word
    grid: tuple[int]
    block: tuple[int]
    fn: Any
    tail_args: tuple[Any, ...]  # the compress kernel's arguments after the quantiser
    scan: Any  # (kernel, grid, block, args) of the corner scan, format 3


@dataclass
class _SampleSet:
    """Prepared launches for one set of candidates: one scratch for all of them (one
    memset, one read-back of every count), pinned memory for the read-back, its event."""

    plans: list[_SamplePlan]
    scratch: Any
    pinned: Any
    done: Any


def _sample_plan(shape: tuple[int, ...], block_ndim: int, dtype: Any, version: int, scratch: Any) -> _SamplePlan:
    cp = _cp()
    geo = geometry(shape, block_ndim)
    fn, threads, ntiles, ctas = _compress_shape(geo, np.dtype(dtype), version)
    cap = _outlier_cap(math.prod(shape))
    nb = geo.nblocks
    pay_off = F.HEADER_LEN + F.pad16(nb)
    body = cp.empty(pay_off + F.pad16(4 * (F.MAX_WIDTH + 1) * nb), dtype=cp.uint8)
    widths = body[F.HEADER_LEN:pay_off]
    payload = body[pay_off:].view(cp.uint32)
    out_idx = cp.empty(cap, dtype=cp.uint64)
    out_val = cp.empty(cap, dtype=dtype)
    corner_ext = cp.empty(max(1, nb), dtype=cp.uint32)
    tail_args = (widths, corner_ext, payload, scratch[:ntiles], scratch[ntiles : ntiles + 1].view(cp.uint32),
                 out_idx, out_val, scratch[ntiles + 1 : ntiles + 2], np.uint64(cap))
    scan = _corner_scan_launch(geo, widths, scratch, scratch[ntiles + 2 : ntiles + 3]) if version >= 3 else None
    return _SamplePlan(geo, ntiles - 1, (ctas,), (threads,), fn, tail_args, scan)


def _sample_set(candidates: tuple[tuple[tuple[int, ...], int], ...], dtype: Any, version: int) -> _SampleSet:
    """The prepared launches for these (sample shape, block shape) candidates, cached per
    thread (the buffers are reused: a call waits for its launches before it returns)."""
    cache = getattr(_local, "sample_sets", None)
    if cache is None:
        cache = _local.sample_sets = {}
    dev = _device_id()
    key = (candidates, np.dtype(dtype).str, version, dev)
    sset = cache.get(key)
    if sset is None:
        import cupyx

        cp = _cp()
        while len(cache) >= 8:
            cache.pop(next(iter(cache)))
        sizes = [scratch_words(geometry(shape, b)) for shape, b in candidates]
        scratch = cp.empty(sum(sizes), dtype=cp.uint64)
        plans, at = [], 0
        for (shape, b), n in zip(candidates, sizes):
            plan = _sample_plan(shape, b, dtype, version, scratch[at : at + n])
            plan.tail_word += at
            plans.append(plan)
            at += n
        sset = cache[key] = _SampleSet(plans, scratch, cupyx.empty_pinned(sum(sizes), dtype=np.uint64),
                                       cp.cuda.Event(block=False, disable_timing=True))
    return sset


def gather_samples(x: Any, idx_a: Any, idx_b: Any, out_a: Any, out_b: Any) -> None:
    """out_a = x.flat[idx_a], out_b = x.flat[idx_b] in one launch (x C-contiguous; the
    indices int32 when x has fewer than 2^31 elements, else int64)."""
    wide = x.size >= NARROW_LIMIT
    dev = _device_id()
    fn = _kernel(str(x.dtype), 1, wide, _AUX_FMT, "szp_gather2", dev)
    n = int(idx_a.size) + int(idx_b.size)
    fn((max(1, min(4 * _sm_count(dev), -(-n // THREADS))),), (THREADS,),
       (x, idx_a, out_a, np.uint64(idx_a.size), idx_b, out_b, np.uint64(idx_b.size)))


def sample_stream_counts(samples: dict[int, Any], qz: F.Quantizer,
                         version: int = WRITE_VERSION) -> dict[int, tuple[int, int, int]]:
    """(payload words, outliers, corner bytes) of the stream each candidate block shape
    (the key) makes of its device sample (the value, C-contiguous), at quantiser ``qz``:
    one memset, the compress kernel and the corner scan per candidate, every count back in
    one pinned read, one wait. These are the counts compress_device's header would carry
    (the outlier count too when it passes the launch's room: the kernel counts past it)."""
    items = [(b, x) for b, x in samples.items()]
    out = {b: (0, 0, 0) for b, x in items if x.size == 0}
    items = [(b, x) for b, x in items if x.size]
    if not items:
        return out
    dtype = items[0][1].dtype
    sset = _sample_set(tuple((tuple(x.shape), b) for b, x in items), dtype, version)
    _zero(sset.scratch.data.ptr, sset.scratch.nbytes)
    T = dtype.type
    head = (T(qz.recip), T(qz.step), T(qz.check))
    for plan, (_b, x) in zip(sset.plans, items):
        plan.fn(plan.grid, plan.block, (x, *plan.geo.args(x), *head, *plan.tail_args))
        if plan.scan is not None:
            fn, grid, block, args = plan.scan
            fn(grid, block, args)
    _copy(int(sset.pinned.ctypes.data), sset.scratch.data.ptr, sset.scratch.nbytes)
    sset.done.record()
    sset.done.synchronize()
    for plan, (b, _x) in zip(sset.plans, items):
        c = sset.pinned[plan.tail_word : plan.tail_word + 4]
        out[b] = (int(c[0]) & VAL_MASK, int(c[2]), int(c[3]) if version >= 3 else 0)
    return out


def _sorted_outliers(p: _Pieces) -> tuple[Any, Any]:
    """Outliers arrive in atomic order; the format wants increasing indices."""
    cp = _cp()
    idx, val = p.out_idx[: p.n_out], p.out_val[: p.n_out]
    if p.n_out > 1:
        order = cp.argsort(idx)
        idx, val = idx[order], val[order]
    return idx, val


def compress_device(x: Any, mode: str, bound: float, block_ndim: int | None = None, *,
                    auto_block: bool = False, version: int = WRITE_VERSION,
                    choose: Callable[..., Any] | None = None) -> DeviceStream:
    """Compress a device array; the stream body stays on the device.
    ``choose(x, abs_bound, value_range=frange)``
    (autoshape's chooser, handed in by the codec: this low-level module does not import the
    layer above it) picks the block shape after this call's own range pass, so rel mode
    reads the array once; its ShapeChoice comes back in ``shape_choice`` and the header says
    the shape was chosen automatically. ``auto_block`` sets that header flag for a shape the
    caller chose (format 3); ``version`` 2 writes the previous format."""
    if choose is not None:
        auto_block = True
    cp = _cp()
    _check_write_version(version, auto_block)
    xd = x if x.flags.c_contiguous else cp.ascontiguousarray(x)  # keeps 0-d arrays 0-d
    if xd.dtype not in F.DTYPE_CODES:
        raise InputError(f"szp compresses float32 and float64, not {xd.dtype}")
    if xd.ndim > F.MAX_NDIM:
        raise InputError(f"szp handles at most {F.MAX_NDIM} dimensions, got {xd.ndim}")
    bnd = F.default_block_ndim(xd.ndim) if block_ndim is None else int(block_ndim)
    if bnd not in F.BLOCK_SHAPES:
        raise InputError(f"block_ndim must be 1, 2 or 3, got {block_ndim!r}")
    frange = device_range(xd) if mode == "rel" else None
    qz = F.resolve_quantizer(xd.dtype, mode, bound, frange, version=version)
    choice = None
    if choose is not None:
        choice = choose(xd, qz.abs_bound, value_range=frange)  # the samples get the stream's step
        bnd = choice.block_ndim
    geo = geometry(tuple(xd.shape), bnd)

    def header(p: _Pieces) -> F.Header:
        return F.Header(xd.dtype, tuple(xd.shape), mode, float(bound), qz.abs_bound, float(qz.step),
                        bnd, geo.nblocks, p.payload_words, p.n_out, version, p.corner_bytes,
                        F.FLAG_AUTO_BLOCK if auto_block else 0)

    ds = _compress_stream(xd, geo, qz, version, header)
    ds.shape_choice = choice
    return ds


def _compress_stream(xd: Any, geo: Geometry, qz: F.Quantizer, version: int,
                     header: Any) -> DeviceStream:
    """One stream of launches, then one wait, then nothing for the GPU: the header (its
    counts still zero) goes up from pinned memory first; the compress kernel, the corner
    scan and the corner packing follow; szp_finish writes the three counts into the header
    and moves the corners next to the payload, pads zeroed, and szp_sort_outliers writes the
    outlier sections in index order; the counts come back in the same pinned buffer, and
    the host waits once. Only past SORT_MAX outliers (sorted on the device after the wait)
    or past the first launch's room for them (a second launch) is there work after it.
    ``header(pieces)`` makes the header."""
    nb = geo.nblocks
    scratch = new_scratch(geo)
    p = _launch_compress(xd, geo, qz, _outlier_cap(xd.size), scratch, version)
    if nb == 0:
        _finish_launch(p, geo, scratch)
        return _assemble_on_device(p, geo, header(p))
    st = _staging()
    body = p.body
    base = int(body.data.ptr)
    hlen = F.HEADER_LEN if version >= 3 else F.HEADER_LEN_V2
    pay_off = hlen + F.pad16(nb)
    p.payload_words = p.n_out = p.corner_bytes = 0  # szp_finish writes the real ones
    st.buf[_ST_HEAD : _ST_HEAD + hlen] = np.frombuffer(header(p).pack(), np.uint8)
    _copy(base, st.ptr + _ST_HEAD, hlen)
    _zero(base + hlen + nb, F.pad16(nb) - nb)  # the widths' pad
    v3 = np.int32(version >= 3)
    if p.corner_prefix is not None:
        _launch_pack(p, geo, p.corner_tmp)
    tail = scratch[p.ntiles - 1 : p.ntiles + 3]
    dt = str(xd.dtype)
    dev = _device_id()
    _kernel(dt, 1, False, _AUX_FMT, "szp_finish", dev)(
        (_finish_ctas(dev),), (THREADS,), (body, np.uint64(pay_off), tail, p.corner_tmp, np.uint64(p.cap), v3))
    sort_fn, sort_max = _sort_kernel(dt, dev)
    sort_fn((1,), (SORT_THREADS,), (body, np.uint64(pay_off), tail, p.out_idx, p.out_val, np.uint64(p.cap),
                                    np.uint32(sort_max), v3), shared_mem=12 * sort_max)
    _copy(st.ptr + _ST_COUNTS, tail.data.ptr, 32)
    st.mark()
    st.wait()
    counts = st.buf[_ST_COUNTS : _ST_COUNTS + 32].view(np.uint64)
    p.payload_words = int(counts[0]) & VAL_MASK
    p.n_out = int(counts[2])
    p.corner_bytes = int(counts[3]) if version >= 3 else 0
    if p.n_out > p.cap:  # rare: very many outliers; again with room for all of them
        p = _launch_compress(xd, geo, qz, p.n_out, scratch, version)
        _finish_launch(p, geo, scratch)
        return _assemble_on_device(p, geo, header(p))
    h = header(p)
    lay = F.layout(h)
    if p.n_out > sort_max:  # szp_sort_outliers left them: sorted on the device now
        _place_outliers(p, lay)
    return DeviceStream(body[: lay.crc], h)


#: Threads of szp_sort_outliers' one CTA (its __launch_bounds__).
SORT_THREADS = 1024


@functools.lru_cache(maxsize=None)
def _finish_ctas(device_id: int) -> int:
    """CTAs of szp_finish: enough to copy a corners section of megabytes at once."""
    return 4 * _sm_count(device_id)


@functools.lru_cache(maxsize=None)
def _sort_kernel(dtype: str, device_id: int) -> tuple[Any, int]:
    """szp_sort_outliers and how many outliers it sorts on this device: SORT_MAX, or the
    largest power of two whose 12 bytes each fit the shared memory the device lets one
    CTA opt into (cudaDevAttrMaxSharedMemoryPerBlockOptin = 97), or what fits the 48 KiB
    every device gives when the opt-in cannot be set."""
    fn = _kernel(dtype, 1, False, _AUX_FMT, "szp_sort_outliers", device_id)
    limit = _DEFAULT_DYNAMIC_SMEM
    try:
        limit = max(limit, int(_cp().cuda.runtime.deviceGetAttribute(97, device_id)))
    except Exception:  # noqa: BLE001 - an old runtime without the attribute: the default
        pass
    n = SORT_MAX
    while n > 1 and 12 * n > limit:
        n //= 2
    if 12 * n > _DEFAULT_DYNAMIC_SMEM:
        try:
            fn.max_dynamic_shared_size_bytes = 12 * n
        except Exception:  # noqa: BLE001 - cannot opt in: what the default holds
            n = SORT_MAX
            while 12 * n > _DEFAULT_DYNAMIC_SMEM:
                n //= 2
    return fn, n


def _place_outliers(p: _Pieces, lay: F.Layout) -> None:
    """More outliers than the host sorts: sorted on the device into the stream (pads zero)."""
    cp = _cp()
    body = p.body
    idx, val = _sorted_outliers(p)
    _zero(int(body.data.ptr) + lay.out_index, lay.crc - lay.out_index)
    body[lay.out_index : lay.out_index + 8 * p.n_out] = idx.view(cp.uint8)
    body[lay.out_value : lay.out_value + val.dtype.itemsize * p.n_out] = val.view(cp.uint8)


def _assemble_on_device(p: _Pieces, geo: Geometry, h: F.Header) -> DeviceStream:
    """The stream's remaining sections from finished pieces by CuPy steps: the general path,
    for the rare relaunch with room for every outlier and for empty arrays."""
    cp = _cp()
    lay = F.layout(h)
    body = p.body
    body[: h.header_len] = cp.asarray(np.frombuffer(h.pack(), np.uint8))
    body[lay.widths + geo.nblocks : lay.payload] = 0  # pads are zero
    body[lay.payload + 4 * p.payload_words : lay.crc] = 0  # payload pad, corners, outlier area
    _pack_corners(p, geo, body[lay.corners : lay.corners + p.corner_bytes])
    if p.n_out:
        _place_outliers(p, lay)
    return DeviceStream(body[: lay.crc], h)


def _check_write_version(version: int, auto_block: bool) -> None:
    if version not in (2, 3, 4):
        raise InputError(f"szp writes format version 2, 3 or 4, not {version!r}")
    if auto_block and version < 3:
        raise InputError("the auto_block flag needs format version 3")


def to_host(ds: DeviceStream) -> bytes:
    """Copy a device stream to the host and append its checksum."""
    import cupyx

    pinned = cupyx.empty_pinned(ds.body.shape, dtype=np.uint8)
    ds.body.get(out=pinned)
    return F.finish(pinned)


# -- decompress -----------------------------------------------------------------------


def _scan_slots(geo: Geometry) -> tuple[int, int]:
    """Scratch layout of a decompress launch: [status (one per CTA of the width scan),
    counter, tile offsets (ntiles + 1, the last one the total), error flags, the corners'
    byte count (format 3)]; returns (CTAs of the scan, index of the first tile offset)."""
    ctas = geo.ntiles // SCAN_CTA_TILES + 1  # the last CTA also writes the total at [ntiles]
    return ctas, ctas + 1


def _launch_decompress(out: Any, geo: Geometry, step: float, widths: Any, payload: Any,
                       scratch: Any, corners: Any = None, version: int = WRITE_VERSION,
                       corner_ext: Any = None) -> None:
    """Width scan (one word offset per tile), then the decode kernel. ``payload`` is the
    u32 view of the payload section; the decoder never reads past its end. Format 3: a
    pre-pass expands ``corners`` (the corners section, u8; None reads as empty) into one
    u32 per block, which the decode kernel reads for corner blocks (into ``corner_ext``,
    nblocks u32, when the caller has the room)."""
    cp = _cp()
    if geo.nblocks == 0:
        return
    if widths.data.ptr % 16:  # the kernels read widths 4 and 16 at a time
        widths = widths.copy()
    T = out.dtype.type
    ctas, first = _scan_slots(geo)
    end = first + geo.ntiles + 1
    # one memset: the width scan's status words, counter, error and corner-count slots, and
    # the corner scan's status words and counter (the tile offsets between are all written)
    _zero(scratch.data.ptr, 8 * scratch_zero_words(geo))
    prefix = scratch[first:end]
    error = scratch[end : end + 1].view(cp.uint32)
    geo.kernel(out.dtype, "szp_width_scan", version)(
        (ctas,), (THREADS,),
        (widths, np.uint32(geo.nblocks), np.uint32(geo.ntiles), prefix, scratch[:ctas],
         scratch[ctas:first].view(cp.uint32), error),
    )
    if corner_ext is None:
        corner_ext = cp.empty(geo.nblocks if version >= 3 else 1, dtype=cp.uint32)
    if version >= 3:
        cprefix = _corner_scan(geo, widths, scratch, scratch[end + 1 : end + 2], zeroed=True)
        clen = 0 if corners is None else int(corners.size)
        if not clen:  # any valid address: nothing is read from an empty section
            corners = widths
        geo.kernel(out.dtype, "szp_corner_unpack", version)(
            *_corner_grid(geo),
            (widths, np.uint32(geo.nblocks), np.uint32(geo.ntiles), corners, np.uint64(clen), cprefix,
             corner_ext, error))
    geo.kernel(out.dtype, "szp_decompress", version)(
        (geo.ntiles,), (THREADS,),
        (out, *geo.args(out), T(step), widths, payload, prefix, np.uint64(payload.size), corner_ext),
    )


def launch_decompress_stream(out: Any, ds: DeviceStream, scratch: Any) -> None:
    """The decode kernels of a device stream of any version into ``out`` (no outliers, no
    validation read-back), exactly as decompress_device launches them: what a benchmark
    should time as "the decompress kernels" (a format 3 stream needs its corners section,
    which a bare _launch_decompress call without ``corners`` does not get). ``scratch`` is
    new_scratch(geometry(ds.header.shape, ds.header.block_ndim))."""
    h, body = ds.header, ds.body
    lay = F.layout(h)
    geo = geometry(h.shape, h.block_ndim)
    widths = body[lay.widths : lay.widths + max(1, geo.nblocks)]
    payload = body[lay.payload : lay.payload + 4 * max(1, h.payload_words)].view(_cp().uint32)
    corners = body[lay.corners : lay.corners + h.corner_bytes]
    _launch_decompress(out, geo, h.step, widths, payload, scratch, corners, h.version)


def _check_decompress(geo: Geometry, scratch: Any, payload_words: int, corner_bytes: int = 0,
                      version: int = WRITE_VERSION, counts: Any = None) -> None:
    """Raise CodecError when the decode's scratch (or ``counts``, its three words already
    read back: payload total, error flags, corner bytes) says the stream is corrupt."""
    if geo.nblocks == 0:
        return
    _ctas, first = _scan_slots(geo)
    if counts is None:
        counts = scratch[first + geo.ntiles : first + geo.ntiles + 3].get()
    total, error, corners = (int(v) for v in counts)
    if error & 1:
        raise CodecError(f"corrupt szp stream: a block width exceeds {F.MAX_WIDTH} or has "
                         "unknown flag bits")
    if total != payload_words:
        raise CodecError("corrupt szp stream: block widths do not add up to the payload size")
    if version >= 3 and (error & 2 or corners != corner_bytes):
        raise CodecError(f"corrupt szp stream: the corner blocks need {corners} corner bytes, "
                         f"the header says {corner_bytes} (or a corner is not in its fewest bytes)")


def _scatter(out: Any, idx: Any, val: Any) -> None:
    n = int(idx.size)
    if n:
        _kernel(str(out.dtype), 1, False, _AUX_FMT, "szp_scatter", _device_id())(
            (-(-n // 256),), (256,), (out, idx, val, np.uint64(n), np.uint64(out.size)))


def decompress_device(src: DeviceStream | bytes) -> Any:
    """Decode to a device array. Host bytes are validated (checksum, header, widths,
    outlier order) on the host first and then copied over."""
    cp = _cp()
    if isinstance(src, DeviceStream):
        h, body = src.header, src.body
    else:
        h = F.parse(src).header  # full validation, CRC included
        body = cp.asarray(np.frombuffer(src, np.uint8)[: F.layout(h).crc])
    lay = F.layout(h)
    geo = geometry(h.shape, h.block_ndim)
    out = cp.empty(h.shape, dtype=h.dtype)
    sw = scratch_words(geo)
    work = cp.empty(sw + geo.nblocks // 2 + 1, dtype=cp.uint64)  # the scratch, then a u32 per block
    scratch = work[:sw]
    widths = body[lay.widths : lay.widths + max(1, geo.nblocks)]
    payload = body[lay.payload : lay.payload + 4 * max(1, h.payload_words)].view(cp.uint32)
    corners = body[lay.corners : lay.corners + h.corner_bytes]
    _launch_decompress(out, geo, h.step, widths, payload, scratch, corners, h.version,
                       corner_ext=work[sw:].view(cp.uint32))
    if h.n_outliers:
        idx = body[lay.out_index : lay.out_index + 8 * h.n_outliers].view(cp.uint64)
        val = body[lay.out_value : lay.out_value + h.dtype.itemsize * h.n_outliers].view(h.dtype)
        _scatter(out, idx, val)
    counts = None
    if geo.nblocks:  # the one wait: the validation words, pinned
        _ctas, first = _scan_slots(geo)
        st = _staging()
        _copy(st.ptr + _ST_COUNTS, scratch.data.ptr + 8 * (first + geo.ntiles), 24)
        st.mark()
        st.wait()
        counts = st.buf[_ST_COUNTS : _ST_COUNTS + 24].view(np.uint64).copy()
    _check_decompress(geo, scratch, h.payload_words, h.corner_bytes, h.version, counts)
    return out


# -- host arrays: chunked streaming -------------------------------------------------------


def _fit_chunk(chunk_bytes: int) -> int:
    """A slab needs about 5x its size on the device at once (two slabs in flight, each
    with its worst-case stream buffer), so cap the slab at a sixth of free memory."""
    free, _total = _cp().cuda.runtime.memGetInfo()
    return max(1 << 20, min(int(chunk_bytes), free // 6))


def _chunk_plan(geo: Geometry, itemsize: int, chunk_bytes: int) -> tuple[int, list[tuple[int, int]]]:
    """Split along the slowest view axis that has more than one block: (axis, [(b0, b1)])
    in block units. Blocks of consecutive ranges are consecutive in the stream, and each
    range starts at a multiple of F.CHAIN_SPAN blocks of the stream."""
    axis = next((a for a in range(3) if geo.grid[a] > 1), 2)
    per_block_row = itemsize * math.prod(geo.view) / max(1, geo.grid[axis])
    step = max(1, int(chunk_bytes // max(1.0, per_block_row)))
    # every slab starts at a multiple of F.CHAIN_SPAN blocks, where no block is chained
    # (format 4): a chain never crosses slabs, in the encoder or in the decoder
    per_row = math.prod(geo.grid) // max(1, geo.grid[axis])
    unit = F.CHAIN_SPAN // math.gcd(max(1, per_row), F.CHAIN_SPAN)
    step = max(unit, step // unit * unit)
    n = geo.grid[axis]
    return axis, [(b, min(n, b + step)) for b in range(0, n, step)] or [(0, 0)]


def _sub_geometry(geo: Geometry, axis: int, b0: int, b1: int) -> tuple[Geometry, tuple[slice, ...]]:
    bshape = F.BLOCK_SHAPES[geo.block_ndim]
    e0, e1 = b0 * bshape[axis], min(b1 * bshape[axis], geo.view[axis])
    view = list(geo.view)
    view[axis] = e1 - e0
    grid = list(geo.grid)
    grid[axis] = b1 - b0
    sl = [slice(None)] * 3
    sl[axis] = slice(e0, e1)
    return Geometry(tuple(view), tuple(grid), geo.block_ndim), tuple(sl)


def compress_host(x: np.ndarray, mode: str, bound: float, block_ndim: int | None = None,
                  chunk_bytes: int = DEFAULT_CHUNK_BYTES, *, auto_block: bool = False,
                  version: int = WRITE_VERSION) -> bytes:
    """Compress a NumPy array on the GPU. Arrays larger than ``chunk_bytes`` stream
    through the GPU in block-aligned slabs (pinned staging, two CUDA streams: slab k+1's
    copy and kernel run while slab k's results come back). The bytes equal the
    single-shot stream's, since blocks never straddle slabs."""
    cp = _cp()
    import cupyx

    _check_write_version(version, auto_block)
    x = np.asarray(x, order="C")
    if x.dtype not in F.DTYPE_CODES:
        raise InputError(f"szp compresses float32 and float64, not {x.dtype}")
    chunk_bytes = min(chunk_bytes, _fit_chunk(DEFAULT_CHUNK_BYTES))
    if x.nbytes <= chunk_bytes:
        return to_host(compress_device(cp.asarray(x), mode, bound, block_ndim,
                                       auto_block=auto_block, version=version))
    bnd = F.default_block_ndim(x.ndim) if block_ndim is None else int(block_ndim)
    qz = F.resolve_quantizer(x.dtype, mode, bound, _host_range(x, chunk_bytes) if mode == "rel" else None,
                             version=version)
    geo = geometry(x.shape, bnd)
    xv = x.reshape(geo.view)
    axis, ranges = _chunk_plan(geo, x.itemsize, chunk_bytes)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    subs = [_sub_geometry(geo, axis, b0, b1) for b0, b1 in ranges]
    biggest = max(math.prod(g.view) for g, _ in subs)
    pinned = [cupyx.empty_pinned(biggest, dtype=x.dtype) for _ in range(2)]
    devbuf = [cp.empty(biggest, dtype=x.dtype) for _ in range(2)]
    widths, payloads, corners, idxs, vals = [], [], [], [], []

    def collect(k: int, dev: Any, p: _Pieces, scratch: Any) -> None:
        g, sl = subs[k]
        with streams[k % 2]:
            _finish_launch(p, g, scratch)
            if p.n_out > _outlier_cap(math.prod(g.view)):
                p = _compress_pieces(dev, g, qz, version)  # the slab is still on the device
            widths.append(p.widths[: g.nblocks].get())
            payloads.append(p.payload[: p.payload_words].get())
            if p.corner_bytes:  # slabs are consecutive block ranges: their corners concatenate
                cb = cp.empty(p.corner_bytes, dtype=cp.uint8)
                _pack_corners(p, g, cb)
                corners.append(cb.get())
            if p.n_out:
                li, lv = (a.get() for a in _sorted_outliers(p))
                local = np.unravel_index(li.astype(np.int64), g.view)
                glob = [c + (s.start or 0) for c, s in zip(local, sl)]
                idxs.append(np.ravel_multi_index(glob, geo.view).astype("<u8"))
                vals.append(lv)

    pending: tuple[int, Any, _Pieces, Any] | None = None
    for k, (g, sl) in enumerate(subs):
        s = streams[k % 2]
        s.synchronize()  # slab k-2 was collected before slab k-1 launched: buffers free
        n = math.prod(g.view)
        host = pinned[k % 2][:n].reshape(g.view)
        np.copyto(host, xv[sl])
        with s:
            dev = devbuf[k % 2][:n].reshape(g.view)
            dev.set(host, stream=s)
            scratch = new_scratch(g)
            p = _launch_compress(dev, g, qz, _outlier_cap(n), scratch, version)
        if pending is not None:
            collect(*pending)
        pending = (k, dev, p, scratch)
    if pending is not None:
        collect(*pending)
    w = np.concatenate(widths) if widths else np.zeros(0, np.uint8)
    pl = np.concatenate(payloads) if payloads else np.zeros(0, "<u4")
    cn = np.concatenate(corners) if corners else np.zeros(0, np.uint8)
    oi = np.concatenate(idxs) if idxs else np.zeros(0, "<u8")
    ov = np.concatenate(vals) if vals else np.zeros(0, x.dtype)
    if axis > 0 and len(oi) > 1:  # slabs along y or x interleave in flat order
        order = np.argsort(oi, kind="stable")
        oi, ov = oi[order], ov[order]
    h = F.Header(x.dtype, tuple(x.shape), mode, float(bound), qz.abs_bound, float(qz.step), bnd,
                 geo.nblocks, len(pl), len(oi), version, len(cn),
                 F.FLAG_AUTO_BLOCK if auto_block else 0)
    return F.assemble(h, w, pl, oi, ov, cn)


def _host_range(x: np.ndarray, chunk_bytes: int) -> tuple[float, float] | None:
    return F.finite_range(x, chunk_elems=chunk_bytes // x.itemsize)


def decompress_host(data: bytes, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> np.ndarray:
    """Decode host bytes on the GPU into a NumPy array (chunked like compress_host)."""
    cp = _cp()
    import cupyx

    parsed = F.parse(data)
    h = parsed.header
    chunk_bytes = min(chunk_bytes, _fit_chunk(DEFAULT_CHUNK_BYTES))
    if h.nelem * h.dtype.itemsize <= chunk_bytes:
        return decompress_device(data).get()
    geo = geometry(h.shape, h.block_ndim)
    axis, ranges = _chunk_plan(geo, h.dtype.itemsize, chunk_bytes)
    sizes = F.block_words(parsed.widths, h.version)
    offs = np.concatenate([[0], np.cumsum(sizes)])
    coffs = np.concatenate([[0], np.cumsum(F.corner_nbytes(parsed.widths))]) if h.version >= 3 else None
    out = np.empty(geo.view, dtype=h.dtype)
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(2)]
    subs = [_sub_geometry(geo, axis, b0, b1) for b0, b1 in ranges]
    bstarts = [0]
    for g, _ in subs:
        bstarts.append(bstarts[-1] + g.nblocks)
    biggest = max(math.prod(g.view) for g, _ in subs)
    pinned_out = [cupyx.empty_pinned(biggest, dtype=h.dtype) for _ in range(2)]
    pending: list[tuple[int, Any, Any]] = []

    def drain(item: tuple[int, Any, Any]) -> None:
        k, dev, scratch = item
        g, sl = subs[k]
        s = streams[k % 2]
        n = math.prod(g.view)
        host = pinned_out[k % 2][:n].reshape(g.view)
        dev.get(stream=s, out=host)
        s.synchronize()
        b0, b1 = bstarts[k], bstarts[k + 1]
        ncb = int(coffs[b1] - coffs[b0]) if coffs is not None else 0
        _check_decompress(g, scratch, int(offs[b1] - offs[b0]), ncb, h.version)
        out[sl] = host

    for k, (g, sl) in enumerate(subs):
        s = streams[k % 2]
        if len(pending) == 2:
            drain(pending.pop(0))
        b0, b1 = bstarts[k], bstarts[k + 1]
        w0, w1 = int(offs[b0]), int(offs[b1])
        with s:
            wd = cp.asarray(parsed.widths[b0:b1]) if b1 > b0 else cp.zeros(1, cp.uint8)
            pd = cp.asarray(parsed.payload[w0:w1]) if w1 > w0 else cp.zeros(1, cp.uint32)
            cd = None
            if coffs is not None and coffs[b1] > coffs[b0]:
                cd = cp.asarray(parsed.corners[int(coffs[b0]) : int(coffs[b1])])
            dev = cp.empty(g.view, dtype=h.dtype)
            scratch = new_scratch(g)
            _launch_decompress(dev, g, h.step, wd, pd, scratch, cd, h.version)
        pending.append((k, dev, scratch))
    for item in pending:
        drain(item)
    flat = out.reshape(-1)
    if h.n_outliers:
        flat[parsed.out_index.astype(np.int64)] = parsed.out_value
    return out.reshape(h.shape)


# -- timing -----------------------------------------------------------------------------


@dataclass
class GpuTiming:
    data: bytes
    reconstructed: np.ndarray
    compress_s: float
    decompress_s: float
    h2d_s: float
    d2h_s: float
    samples: dict[str, list[float]]
    device_name: str


def _event_time(fn: Any, repeats: int) -> tuple[list[float], Any]:
    cp = _cp()
    times, result = [], None
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        result = fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
    return times, result


def timed_roundtrip(x: Any, mode: str, bound: float, block_ndim: int | None, repeats: int, *,
                    auto_block: bool = False) -> GpuTiming:
    """Device-resident compress and decompress timed with CUDA events (medians after one
    warm-up); H2D of the input and D2H of the stream and of the result timed apart.
    ``auto_block``: the caller chose ``block_ndim`` automatically (the header says so)."""
    cp = _cp()
    import cupyx

    repeats = max(1, int(repeats))
    xd = as_device_array(x)
    samples: dict[str, list[float]] = {}
    if xd is None:
        host = np.asarray(x, order="C")
        pinned = cupyx.empty_pinned(host.shape, dtype=host.dtype)
        pinned[...] = host
        xd = cp.empty(host.shape, dtype=host.dtype)
        samples["h2d_s"], _ = _event_time(lambda: xd.set(pinned), repeats)
    flag = {"auto_block": auto_block}
    compress_device(xd, mode, bound, block_ndim, **flag)  # warm-up: module load and compile
    samples["compress_s"], ds = _event_time(lambda: compress_device(xd, mode, bound, block_ndim, **flag),
                                            repeats)
    pinned_s = cupyx.empty_pinned(ds.body.shape, dtype=np.uint8)
    samples["d2h_stream_s"], _ = _event_time(lambda: ds.body.get(out=pinned_s), repeats)
    data = F.finish(pinned_s)
    decompress_device(ds)
    samples["decompress_s"], yd = _event_time(lambda: decompress_device(ds), repeats)
    pinned_y = cupyx.empty_pinned(yd.shape, dtype=yd.dtype)
    samples["d2h_s"], _ = _event_time(lambda: yd.get(out=pinned_y), repeats)
    med = {k: statistics.median(v) for k, v in samples.items()}
    return GpuTiming(
        data=data, reconstructed=np.array(pinned_y), compress_s=med["compress_s"],
        decompress_s=med["decompress_s"], h2d_s=med.get("h2d_s", 0.0), d2h_s=med["d2h_s"],
        samples=samples, device_name=device_name(),
    )
