"""szp's automatic block shape: choose 1-D, 2-D or 3-D blocks from a small sample.

The block shape decides more of szp's ratio than anything else: on an atmospheric field of
stacked pressure levels 1-D blocks give CR 13.5 and 3-D blocks 4.6, on a smooth volume with
equal spacing 3-D wins, on a 2-D image 2-D wins. Which one wins follows from the field's
correlation along each axis, and the encoder itself is the cheapest exact judge of that:
:func:`choose_block_ndim` compresses the same sample of the field with every candidate and
keeps the smallest stream.

The sample is made of *superblocks*: boxes of the (Z, Y, X) view the blocks tile, at
positions aligned the way the real tiling aligns them (z a multiple of 2, y of 4, x of 32),
so every 2-D (1x4x8) and 3-D (2x4x4) block of the sample is a block of the field itself,
edge padding included where a superblock spans a whole short axis. The 1-D candidate sees
the same places through the field's own 1-D blocks: the 32-aligned runs of the flat array
that hold the superblock's rows (or its planes, when rows are short), the same number of
elements. Blocks are encoded independently (Lorenzo inside each block only), so the stream
size of a sample of whole blocks is the field's size per block, sampled.

The superblocks are spread over the whole field by a 3-D Kronecker sequence (the R3
low-discrepancy sequence): deterministic, float64 arithmetic only (so the host and the GPU
pick the same sample), no aliasing with periodic tiles, and every part of the field is
visited. The sample is ``SAMPLE_FRACTION`` of the elements within ``[MIN_SAMPLE_ELEMS,
MAX_SAMPLE_ELEMS]``; arrays of at most ``WHOLE_ELEMS`` elements (or too small for one
superblock) are compressed whole with every candidate, which makes the choice exact.

NumPy arrays are sampled and encoded with the reference (:func:`format.encode`), CuPy arrays
on their device (:func:`gpu.compress_device`); the streams are byte-identical, so both sides
choose the same shape. Ties go to the lower block dimensionality (its kernels are the
fastest: benchmarks/results/szp_gpu_README.md).
"""

from __future__ import annotations

import functools
import math
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfscout.codecs.szp import format as F
from perfscout.errors import InputError

#: Arrays with at most this many elements are compressed whole with every candidate.
WHOLE_ELEMS = 1 << 15
#: The sample's share of the elements, and its bounds in elements.
SAMPLE_FRACTION = 1 / 64
MIN_SAMPLE_ELEMS = 1 << 14
MAX_SAMPLE_ELEMS = 1 << 20
#: Superblock alignment along x: a multiple of every block's x extent (1-D 32, 2-D 8, 3-D 4).
_X_ALIGN = 32
#: The R3 sequence: alpha_k = 1 / g**k with g the unique positive root of x**4 = x + 1.
_G3 = 1.2207440846057594
_ALPHA = np.array([1 / _G3, 1 / _G3**2, 1 / _G3**3])
#: The golden ratio's fractional part: the 1-D Kronecker sequence for positions in a row.
_PHI = (math.sqrt(5) - 1) / 2


@dataclass(frozen=True)
class ShapeChoice:
    """What :func:`choose_block_ndim` decided, and what it cost."""

    block_ndim: int  # the chosen one
    sample_bytes: dict[int, int]  # candidate block_ndim -> stream bytes of the sample
    sample_elems: int  # elements of the sample (each candidate's); the whole array when exact
    seconds: float  # wall time the choice took (on the GPU: synchronized)
    #: candidate -> the whole array's stream bytes as the sample predicts them (what is
    #: compared; the exact sizes when the whole array was the sample)
    estimated_bytes: dict[int, int] = field(default_factory=dict)

    def meta(self) -> dict[str, Any]:
        """JSON-ready keys for ``Compressed.meta`` (string keys: the container is JSON)."""
        return {
            "block_ndim_auto": True,
            "block_sample_bytes": {str(k): int(v) for k, v in sorted(self.sample_bytes.items())},
            "block_sample_elems": int(self.sample_elems),
            "block_estimated_bytes": {str(k): int(v) for k, v in sorted(self.estimated_bytes.items())},
            "block_choice_us": round(self.seconds * 1e6, 1),
            "notes": [self.sentence()],
        }

    def sentence(self) -> str:
        """The choice as a person reads it (the evaluation's notes carry it)."""
        sizes = self.estimated_bytes or self.sample_bytes
        what = "estimated stream bytes" if self.estimated_bytes else "sample stream bytes"
        per = ", ".join(f"{k}-D {v:,}" for k, v in sorted(sizes.items()))
        return (f"szp block shape chosen automatically: {self.block_ndim}-D blocks, from a sample of "
                f"{self.sample_elems:,} elements ({what}: {per}); the choice took {self.seconds * 1e6:,.0f} µs")


def candidates(ndim: int) -> tuple[int, ...]:
    """The block dimensionalities valid for an array of ``ndim`` dims."""
    return tuple(b for b in F.BLOCK_SHAPES if b == 1 or ndim >= b)


@dataclass(frozen=True)
class SampleGeometry:
    """Where the sample comes from: superblocks of ``box`` (z, y, x) elements of the view at
    ``origins`` (flat indices), and how the two sample arrays are laid out."""

    view: tuple[int, int, int]
    box: tuple[int, int, int]
    origins: np.ndarray  # int64, flat index of each superblock's first element, increasing
    stack_axis: int  # axis of the box sample along which the superblocks are concatenated
    run_len: int  # 1-D sample: elements per run (a multiple of 32)
    run_offsets: np.ndarray  # 1-D sample: each run's offset from its superblock's origin

    @property
    def elems(self) -> int:
        return len(self.origins) * math.prod(self.box)


def _superblock(view: tuple[int, int, int], zb: int) -> tuple[tuple[int, int, int], int, np.ndarray] | None:
    """(box, run_len, run_offsets) of a superblock for this view, or None when the view is
    too small for one. ``zb`` is the z extent the deepest candidate's blocks need (2 for
    3-D blocks, else 1)."""
    Z, Y, X = view
    if X >= _X_ALIGN:  # 32-element row pieces: each row holds whole blocks of every kind
        box = (zb if Z >= zb else Z, 4 if Y >= 4 else Y, _X_ALIGN)
        run_len = _X_ALIGN  # the field's 1-D block that holds the row piece's first element
        offs = [z * Y * X + y * X for z in range(box[0]) for y in range(box[1])]
        return box, run_len, np.array(offs, np.int64)
    # Short rows (X < 32): whole rows, so the 2-D/3-D edge padding along x is the field's;
    # a plane's rows are contiguous in the flat array, and the 1-D runs are those planes,
    # so enough rows are taken that a plane is a multiple of 32 elements.
    need_y = math.lcm(4, _X_ALIGN // math.gcd(X, _X_ALIGN))
    if Y >= need_y:
        box = (zb if Z >= zb else Z, need_y, X)
        return box, need_y * X, np.arange(box[0], dtype=np.int64) * (Y * X)
    # Short planes too: whole planes, enough of them to make a multiple of 32 elements.
    need_z = math.lcm(zb, _X_ALIGN // math.gcd(Y * X, _X_ALIGN))
    if Z < need_z:
        return None
    return (need_z, Y, X), need_z * Y * X, np.zeros(1, np.int64)


def _spread(grid: tuple[int, int, int], count: int) -> np.ndarray:
    """``count`` distinct cells of ``grid`` (linear C-order indices, increasing): the first
    ``count`` distinct cells the R3 sequence visits; every cell when there are no more."""
    total = math.prod(grid)
    if total <= count:
        return np.arange(total, dtype=np.int64)
    dims = np.array(grid, np.float64)
    n = 2 * count
    while True:
        u = np.mod(0.5 + np.arange(1, n + 1, dtype=np.float64)[:, None] * _ALPHA[None, :], 1.0)
        cell = np.minimum((u * dims).astype(np.int64), np.array(grid) - 1)
        lin = (cell[:, 0] * grid[1] + cell[:, 1]) * grid[2] + cell[:, 2]
        _, first = np.unique(lin, return_index=True)
        if len(first) >= count or n >= 64 * count:
            break
        n *= 2
    chosen = lin[np.sort(first)[:count]]  # first visits, in the sequence's order
    if len(chosen) < count:  # a degenerate grid the sequence keeps missing: fill evenly
        rest = np.setdiff1d(np.arange(total), chosen)
        chosen = np.concatenate([chosen, rest[np.linspace(0, len(rest) - 1, count - len(chosen)).astype(np.int64)]])
    return np.sort(chosen)


@functools.lru_cache(maxsize=64)
def sample_geometry(shape: tuple[int, ...]) -> SampleGeometry | None:
    """The sample of an array of ``shape`` (ndim >= 2), or None when it is compressed whole
    (at most WHOLE_ELEMS elements, or too small for one superblock). Cached per shape: a
    field compressed again (a time series, repeated timings) pays only the gather."""
    n = math.prod(shape)
    if len(shape) < 2 or n <= WHOLE_ELEMS:
        return None
    view = F.view_shape(shape, 2)
    zb = 2 if 3 in candidates(len(shape)) else 1
    sb = _superblock(view, zb)
    if sb is None:
        return None
    box, run_len, run_offsets = sb
    grid = (view[0] // box[0], view[1] // box[1], view[2] // box[2])
    want = min(max(int(n * SAMPLE_FRACTION), MIN_SAMPLE_ELEMS), MAX_SAMPLE_ELEMS)
    cells = _spread(grid, -(-want // math.prod(box)))
    iz, rem = np.divmod(cells, grid[1] * grid[2])
    iy, ix = np.divmod(rem, grid[2])
    Y, X = view[1], view[2]
    origins = ((iz * box[0]) * Y + iy * box[1]) * X + ix * box[2]
    if box[2] % 8 == 0:  # 2-D blocks are 8 wide, 3-D blocks 4: none straddles two boxes
        axis = 2
    elif box[1] % 4 == 0:  # both are 4 tall
        axis = 1
    else:  # the box is whole planes, a multiple of the blocks' depth
        axis = 0
    return SampleGeometry(view, box, origins.astype(np.int64), axis, run_len, run_offsets)


def _xp(x: Any) -> Any:
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def _gather(x: Any, xp: Any, flat_idx: Any) -> Any:
    """x's elements at C-order flat indices, without copying a non-contiguous array whole."""
    if x.flags.c_contiguous:
        return x.reshape(-1)[flat_idx]
    return x[xp.unravel_index(flat_idx, x.shape)]


def sample_indices(geo: SampleGeometry, xp: Any = np) -> tuple[Any, Any]:
    """(box sample indices, 1-D sample indices): flat C-order indices into the field, the
    first shaped like the box sample (the superblocks concatenated along
    ``geo.stack_axis``), the second the 32-aligned flat runs that hold them (as many)."""
    sz, sy, sx = geo.box
    Z, Y, X = geo.view
    it = np.int32 if math.prod(geo.view) < 2**31 else np.int64  # half the index traffic
    org = geo.origins.astype(it)
    box_off = ((np.arange(sz)[:, None, None] * Y + np.arange(sy)[None, :, None]) * X
               + np.arange(sx)[None, None, :]).reshape(-1).astype(it)
    order = {2: (1, 2, 0, 3), 1: (1, 0, 2, 3), 0: (0, 1, 2, 3)}[geo.stack_axis]
    shape = [sz, sy, sx]
    shape[geo.stack_axis] *= len(org)
    box = (org[:, None] + box_off[None, :]).reshape(len(org), sz, sy, sx).transpose(order).reshape(shape)
    starts = (org[:, None] + geo.run_offsets.astype(it)[None, :]).reshape(-1)
    if sx == _X_ALIGN and X % _X_ALIGN:
        # Rows of 32 or more that 1-D blocks straddle: each run is the field's 1-D block at
        # a position of the superblock row spread over the whole row (a Kronecker
        # sequence), not at the row piece's start. Anchored there, a row of 63 gave runs
        # that nearly all straddle a row end, where about half of the field's 1-D blocks
        # do: a biased estimate. (Rows of a multiple of 32: the row pieces are 1-D blocks.)
        row_start = starts - (org % X).repeat(len(geo.run_offsets))
        spread = np.mod(0.5 + np.arange(1, len(starts) + 1) * _PHI, 1.0)
        starts = row_start + np.minimum((spread * X).astype(it), X - 1)
        starts = np.minimum(starts - starts % _X_ALIGN, (math.prod(geo.view) // _X_ALIGN - 1) * _X_ALIGN)
    else:  # row pieces that are 1-D blocks, or whole periods of the row/plane pattern
        starts -= starts % _X_ALIGN
    windows = _chain_windows(starts, len(org), math.prod(geo.view), it) if geo.run_len == _X_ALIGN else None
    if windows is not None:
        runs = windows
    else:
        runs = (starts[:, None] + np.arange(geo.run_len, dtype=it)[None, :]).reshape(-1)
    if xp is np:
        return np.ascontiguousarray(box), runs
    return xp.asarray(box), xp.asarray(runs)


def _chain_windows(starts: np.ndarray, nbox: int, n: int, it: type) -> np.ndarray | None:
    """The 1-D sample as whole chain steps of the field, for superblocks whose runs are
    single 1-D blocks (``starts``: 32-aligned, ``nbox`` superblocks of equally many runs):
    format 4 chains a 1-D block to the one before it inside aligned steps of F.CHAIN_SPAN
    blocks, which blocks sampled alone never show (they under-stated what 1-D blocks save
    by up to 8 %). Each superblock keeps the sample's length with the aligned windows of
    CHAIN_SPAN blocks around some of its runs, which ones following the golden-ratio
    sequence over the superblocks (no row of the superblocks is favoured); None when the
    runs do not fill whole windows."""
    span = getattr(F, "CHAIN_SPAN", 1) * _X_ALIGN
    per = starts.size // max(1, nbox)  # runs per superblock
    if span <= _X_ALIGN or per * nbox != starts.size or (per * _X_ALIGN) % span or n < span:
        return None
    if starts.size * _X_ALIGN == n:  # every superblock, tiling the field: the field itself
        return np.arange(n, dtype=it)
    w = per * _X_ALIGN // span  # windows per superblock
    k = np.arange(nbox * w, dtype=np.float64)
    pick = np.minimum((np.mod(0.5 + k * _PHI, 1.0) * per).astype(np.int64), per - 1)
    chosen = starts.astype(np.int64).reshape(nbox, per)[np.repeat(np.arange(nbox), w), pick]
    wins = np.minimum(chosen - chosen % span, (n // span - 1) * span)
    return (wins[:, None] + np.arange(span)[None, :]).reshape(-1).astype(it)


#: Device copies of the sample indices, per (shape, device): a field compressed again (a
#: time series, repeated timings) gathers its sample at once, with no index upload.
_DEVICE_INDICES: dict[tuple[tuple[int, ...], int], tuple[Any, Any]] = {}
_DEVICE_INDICES_MAX = 4


def _device_indices(geo: SampleGeometry, xp: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    key = (shape, int(xp.cuda.Device().id))  # the current device: choose_block_ndim made it x's
    if key not in _DEVICE_INDICES:
        while len(_DEVICE_INDICES) >= _DEVICE_INDICES_MAX:
            _DEVICE_INDICES.pop(next(iter(_DEVICE_INDICES)))
        _DEVICE_INDICES[key] = sample_indices(geo, xp)
    return _DEVICE_INDICES[key]


def draw_sample(x: Any, geo: SampleGeometry) -> tuple[Any, Any]:
    """(box sample, 1-D sample) of ``x`` (NumPy or CuPy, on x's device): the superblocks
    concatenated along ``geo.stack_axis`` (a 3-D array), and the 32-aligned flat runs that
    hold them (a 1-D array of the same length)."""
    xp = _xp(x)
    box, runs = sample_indices(geo) if xp is np else _device_indices(geo, xp, tuple(x.shape))
    return _gather(x, xp, box.reshape(-1)).reshape(box.shape), _gather(x, xp, runs)


_local = threading.local()


def _device_sample(x: Any, geo: SampleGeometry) -> tuple[Any, Any]:
    """:func:`draw_sample` of a C-contiguous CuPy array by one gather launch into this
    thread's sample buffers (reused by the next choice on the same shape: the choice reads
    them before it returns). CuPy's fancy indexing cost ~70 us of host time per sample
    on the H200's host, more than the whole choice's GPU work."""
    from perfscout.codecs.szp import gpu as G

    xp = _xp(x)
    shape = tuple(x.shape)
    box, runs = _device_indices(geo, xp, shape)
    cache = getattr(_local, "samples", None)
    if cache is None:
        cache = _local.samples = {}
    key = (shape, np.dtype(x.dtype).str, int(xp.cuda.Device().id))
    bufs = cache.get(key)
    if bufs is None or bufs[4] is not box:  # new indices (evicted and remade, another sample size)
        while len(cache) >= _DEVICE_INDICES_MAX:
            cache.pop(next(iter(cache)))
        a, b = xp.empty(box.shape, dtype=x.dtype), xp.empty(runs.size, dtype=x.dtype)
        bufs = cache[key] = (a, b, box.reshape(-1), a.reshape(-1), box)
    a, b, box_flat, a_flat, _ = bufs
    G.gather_samples(x, box_flat, runs, a_flat, b)
    return a, b


def _encoded(sample: Any, abs_bound: float, block_ndim: int, version: int | None,
             value_range: tuple[float, float] | None = None) -> F.Header:
    """The header of the sample's stream (on the sample's device); ``value_range``: the
    field's, for its step (format.rounding_step)."""
    if _xp(sample) is np:
        kw = {} if version is None else {"version": version}
        return F.parse_header(F.encode(sample, "abs", abs_bound, block_ndim, value_range=value_range, **kw))
    from perfscout.codecs.szp import gpu as G

    return G.compress_device(sample, "abs", abs_bound, block_ndim).header


def _device_headers(samples: dict[int, Any], abs_bound: float,
                    value_range: tuple[float, float] | None = None) -> dict[int, F.Header]:
    """The headers of the device samples' streams, by the compress kernels alone
    (gpu.sample_stream_counts: every candidate's launches queued with prepared arguments,
    then one wait and one pinned read-back for all). The header needs only the payload
    size, the corner bytes and the outlier count, all of which the kernels leave in their
    scratch, so the steps of a whole stream (outlier sort, corner packing, header upload)
    are skipped. The sizes equal compress_device's streams' (tests/gpu/test_szp_autoshape.py
    checks them against the reference). ``value_range``: the field's, for its step."""
    from perfscout.codecs.szp import gpu as G

    version = G.WRITE_VERSION
    dtype = np.dtype(next(iter(samples.values())).dtype)
    qz = F.resolve_quantizer(dtype, "abs", abs_bound, value_range, version=version)  # the stream's, for every candidate
    counts = G.sample_stream_counts(samples, qz, version)
    heads = {}
    for b, x in samples.items():
        payload_words, n_out, corner_bytes = counts[b]
        heads[b] = F.Header(
            dtype=dtype, shape=tuple(x.shape), mode="abs", bound=float(abs_bound),
            abs_bound=qz.abs_bound, step=float(qz.step), block_ndim=b,
            nblocks=math.prod(F.block_grid(F.view_shape(tuple(x.shape), b), b)),
            payload_words=payload_words, n_outliers=n_out, version=version, corner_bytes=corner_bytes)
    return heads


def _estimate(h: F.Header, shape: tuple[int, ...], block_ndim: int) -> int:
    """The whole array's stream bytes predicted from a sample's stream: the sample's bytes
    per block (widths, payload, corners) times the array's own block count, plus the fixed
    parts. The sample holds interior blocks only; the block count carries what the edges
    cost each shape (e.g. a last axis of 33 is 5 blocks of 8 wide for 2-D blocks, 2 of
    them nearly all padding, but 33/32 blocks in flat order)."""
    lay = F.layout(h)
    outliers = (8 + h.dtype.itemsize) * h.n_outliers
    per_block = (lay.total - lay.widths - 4 - outliers) / max(1, h.nblocks)
    nblocks = math.prod(F.block_grid(F.view_shape(shape, block_ndim), block_ndim))
    return int(round(lay.widths + 4 + outliers * math.prod(shape) / max(1, h.nelem) + per_block * nblocks))


def _check(x: Any, abs_bound: float) -> float:
    if np.dtype(x.dtype) not in F.DTYPE_CODES:
        raise InputError(f"szp compresses float32 and float64, not {x.dtype}")
    if x.ndim > F.MAX_NDIM:
        raise InputError(f"szp handles at most {F.MAX_NDIM} dimensions, got {x.ndim}")
    eb = float(abs_bound)
    if math.isnan(eb) or eb < 0:
        raise InputError(f"the absolute bound must be >= 0, got {abs_bound!r}")
    # resolve_quantizer caps a bound beyond the dtype at its largest value: the same here
    return min(eb, float(np.finfo(x.dtype).max))


def choose_block_ndim(x: Any, abs_bound: float, *, version: int | None = None,
                      value_range: tuple[float, float] | None = None) -> ShapeChoice:
    """Choose szp's block dimensionality for ``x`` (NumPy or CuPy) at the resolved
    absolute bound ``abs_bound``: the candidate whose stream of the sample is smallest.

    Every candidate compresses the same sample in ``abs`` mode with ``abs_bound`` and the
    field's ``value_range``, which is the quantiser a ``rel`` bound that resolved to
    ``abs_bound`` uses too (format.resolve_quantizer; the one exception is a bound below the
    dtype's smallest normal, where only the fallback step differs). A zero bound (a constant field in ``rel`` mode) leaves
    nothing to choose by: the default shape, nothing compressed. One candidate (a 1-D or
    0-D array), or an empty array: that one, nothing compressed. ``version`` (NumPy arrays
    only) is the stream format the reference writes for the sample, by default its own;
    a CuPy array's sample gets the format the kernels write. ``value_range``: x's finite
    (min, max) when the compressor has it (``rel`` mode's range pass): the samples then
    get the stream's own step (format.rounding_step), not only its bound.
    """
    eb = _check(x, abs_bound)
    if _xp(x) is np:
        return _choose(x, eb, version, np, value_range)
    with x.device:  # the sample, its indices and the kernels on the array's own GPU
        return _choose(x, eb, version, _xp(x), value_range)


def _choose(x: Any, eb: float, version: int | None, xp: Any,
            value_range: tuple[float, float] | None) -> ShapeChoice:
    sync = xp.cuda.get_current_stream().synchronize if xp is not np else (lambda: None)
    sync()
    t0 = time.perf_counter()
    cands = candidates(x.ndim)
    if len(cands) == 1 or x.size == 0 or eb == 0:
        return ShapeChoice(F.default_block_ndim(x.ndim), {}, 0, time.perf_counter() - t0)
    shape = tuple(x.shape)
    geo = sample_geometry(shape)
    if geo is None:  # small: the whole array with every candidate, an exact choice
        if xp is np:
            heads = {b: _encoded(x, eb, b, version, value_range) for b in cands}
        else:
            whole = x if x.flags.c_contiguous else xp.ascontiguousarray(x)
            heads = _device_headers(dict.fromkeys(cands, whole), eb, value_range)
        elems = int(x.size)
        est = {b: F.layout(h).total for b, h in heads.items()}
    else:
        if xp is not np and x.flags.c_contiguous:
            box_sample, flat_sample = _device_sample(x, geo)
        else:
            box_sample, flat_sample = draw_sample(x, geo)
        samples = {b: flat_sample if b == 1 else box_sample for b in cands}
        if xp is np:
            heads = {b: _encoded(smp, eb, b, version, value_range) for b, smp in samples.items()}
        else:
            heads = _device_headers(samples, eb, value_range)
        elems = geo.elems
        est = {b: _estimate(h, shape, b) for b, h in heads.items()}
    best = min(cands, key=lambda b: (est[b], b))
    sync()
    sizes = {b: F.layout(h).total for b, h in heads.items()}
    return ShapeChoice(best, sizes, elems, time.perf_counter() - t0, est)


def resolved_abs_bound(x: Any, mode: str, bound: float) -> float:
    """The absolute bound szp resolves ``mode``/``bound`` to for ``x`` (format.
    resolve_quantizer), the value range taken on x's own device (rel mode only)."""
    return _resolved(x, mode, bound)[0]


def _resolved(x: Any, mode: str, bound: float) -> tuple[float, tuple[float, float] | None]:
    """(the resolved absolute bound, the finite range the encoders quantise with: x's in
    ``rel`` mode, None in ``abs`` mode, which has no range pass)."""
    if np.dtype(x.dtype) not in F.DTYPE_CODES:
        raise InputError(f"szp compresses float32 and float64, not {x.dtype}")
    frange = None
    if mode == "rel":
        if _xp(x) is np:
            frange = _host_range(np.asarray(x))
        else:
            from perfscout.codecs.szp import gpu as G

            with x.device:
                frange = G.device_range(x if x.flags.c_contiguous else _xp(x).ascontiguousarray(x))
    return F.resolve_quantizer(np.dtype(x.dtype), mode, bound, frange).abs_bound, frange


def choose_for(x: Any, mode: str, bound: float, *, version: int | None = None) -> ShapeChoice:
    """:func:`choose_block_ndim` at the absolute bound ``mode``/``bound`` resolves to, with
    the stream's step. Its seconds are the choice's alone: the range pass (rel) is the
    compressor's anyway."""
    eb, frange = _resolved(x, mode, bound)
    return choose_block_ndim(x, eb, version=version, value_range=frange)


#: Host range passes read this many elements at a time (bounded temporaries).
_RANGE_CHUNK = 1 << 24


def _host_range(x: np.ndarray) -> tuple[float, float] | None:
    return F.finite_range(x, chunk_elems=_RANGE_CHUNK)
