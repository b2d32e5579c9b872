"""The metric pass's compiled fast path: pass A, pass B and SSIM as compiled kernels.

The same computation as :mod:`perfscout.analysis.stream_fast` (read that module first:
the definitions, the shifted-data sums, the fine histogram with its coarse-edge
re-binning, SSIM written on the error), with each chunk or tile done by one fused
compiled loop instead of a dozen NumPy operations over chunk buffers. NumPy's
per-operation passes over 2 MiB buffers were the floor of the NumPy fast path; here an
element is loaded once per pass and every statistic of the pass is updated from
registers.

What is identical to the NumPy fast path, bit for bit: min/max of x, y and e, the worst
|e| and its first flat index, every count (exact zeros, changed zeros, the fine and
coarse histograms), the largest point-wise ratio, and the bound check's counts and
indices. The sums (MSE, moments, Pearson, autocorrelation) are the same float64
formulas summed in another order (the compiler's vectorised order instead of einsum's),
and SSIM's float64 window sums are added in another order (along axes 0 and 1 running
sums, along axis 0 summed afresh every 8 planes): within the tolerances :mod:`perfscout.analysis.streaming`
states against the whole-array oracle (tests/unit/test_stream_compiled.py).

Determinism: the chunks and tiles are the same whatever the thread count; they run on
:func:`perfscout.analysis.tile_pool.map_ordered` (the kernels release the GIL) and are
reduced in chunk/tile order, so every figure is the same for any number of threads.
numba's ``parallel=True`` is not used: its reductions combine in a varying order.

Where the kernels come from (:data:`K`): the shared library of
:mod:`perfscout.analysis.stream_native` (the kernels of :mod:`perfscout.analysis.stream_kernels`
compiled ahead of time, built once per machine and version, loaded with ctypes in
0.04-0.06 s: no numba, no LLVM in the process), or, where that cannot be built (no C
compiler) or is turned off, numba's JIT dispatchers of the same functions (cached on
disk; ~0.3 s to load them from the cache plus ~0.2 s for numba's import, and ~50 MiB
resident). The same machine code either way. This module is imported only by a metric
pass that takes it (:func:`perfscout.analysis.streaming.metrics_backend`: large pairs, or
when asked for), and :func:`warm` loads everything once in a process that forks tasks.

Scope: float32 and float64 inputs of one dtype (integers and mixed dtypes take the NumPy
fast path); any number of dimensions for the point statistics (flat chunks); SSIM on
fields of at most 3 axes longer than 1 (seen as 3-D with leading axes of length 1); a
field of more gets the NumPy SSIM (:func:`perfscout.analysis.stream_fast.fast_ssim`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from perfscout.analysis import metric_defs as M
from perfscout.analysis import stream_native
from perfscout.analysis.stream_fast import ChunkView, ChunkWatch, _per_thread, plan_pass_b, reduce_pass_b, ssim_takes
from perfscout.analysis.stream_records import _Scan, _Spread, _Sums
from perfscout.analysis.tile_pool import halo_tiles, map_ordered

def _kernels() -> Any:
    """The library compiled ahead of time, else numba's JIT kernels (ImportError without
    numba: :func:`perfscout.analysis.streaming._compiled_module` then takes the NumPy path)."""
    native = stream_native.load()
    if native is not None:
        return native
    from perfscout.analysis import stream_kernels

    return stream_kernels


#: The kernels this process runs (see the module's docstring).
K = _kernels()


#: Bound kinds of pass A's count of elements beyond a bound.
_NO_BOUND, _ABS_BOUND, _PW_BOUND = 0, 1, 2


def _bound_filter(watch: ChunkWatch | None) -> tuple[int, float, bool]:
    """(bound kind, bound, whether every chunk must be shown to the watch): a watch with
    ``bounds`` (abs, pw_rel) is shown only the chunks with an element beyond its bound
    (pass A counts them: |e| > abs, or |e| > pw_rel * |x|, the check's own test), and,
    when it has ``candidates(start, x, y, indices)``, only those elements' indices
    (:func:`K.beyond_kernel`) instead of the chunk's e (:class:`ChunkView`)."""
    if watch is None:
        return _NO_BOUND, 0.0, False
    bounds = getattr(watch, "bounds", None)
    if bounds is None:
        return _NO_BOUND, 0.0, True
    abs_bound, pw = bounds
    if pw is not None:
        return _PW_BOUND, float(pw), False
    if abs_bound is not None:
        return _ABS_BOUND, float(abs_bound), False
    return _NO_BOUND, 0.0, False


def _pass_a(x: Any, y: Any, step: int, scan: _Scan, sums: _Sums, threads: int, watch: ChunkWatch | None,
            x_extremes: tuple[float, float] | None) -> bool:
    """stream_fast._pass_a with the compiled chunk kernel; False on a non-finite element."""
    known_x = x_extremes is not None
    kind, bound, show_all = _bound_filter(watch)
    starts = range(0, scan.n_total, step)

    def one(i0: int) -> tuple:
        xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
        finite, lo_e, hi_e, amax, imax, beyond = K.pass_a_kernel(xc, yc, kind, bound)
        if not finite:
            return (False,)
        # x's and y's extremes: NumPy's reductions (SIMD, exact; the kernel proved them finite).
        lo_x, hi_x = (-math.inf, math.inf) if known_x else (float(xc.min()), float(xc.max()))
        return True, lo_x, hi_x, float(yc.min()), float(yc.max()), lo_e, hi_e, amax, imax, beyond

    results = map_ordered(one, starts, threads)
    if not all(r[0] for r in results):
        return False
    if known_x:
        scan.x_min, scan.x_max = (float(v) for v in x_extremes)  # type: ignore[union-attr]
    worst_flat = 0
    for i0, (_, lo_x, hi_x, lo_y, hi_y, lo_e, hi_e, amax, imax, _) in zip(starts, results):
        if not known_x:
            scan.x_min, scan.x_max = min(scan.x_min, lo_x), max(scan.x_max, hi_x)
        scan.y_min, scan.y_max = min(scan.y_min, lo_y), max(scan.y_max, hi_y)
        sums.e_min, sums.e_max = min(sums.e_min, lo_e), max(sums.e_max, hi_e)
        if amax > sums.max_abs:  # the first chunk that holds the largest |e|
            sums.max_abs, worst_flat = amax, i0 + imax
    sums.max_flat = worst_flat
    if watch is not None:
        by_candidates = not show_all and hasattr(watch, "candidates")
        cand = np.empty(step if by_candidates and any(r[9] for r in results) else 0, dtype=np.int64)
        partials = []
        for i0, r in zip(starts, results):
            if not (show_all or r[9]):
                partials.append(None)  # no element of the chunk is beyond the bound
                continue
            xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
            if by_candidates:  # the watch needs only the elements beyond the bound
                k = K.beyond_kernel(xc, yc, kind, bound, cand)
                partials.append(watch.candidates(i0, xc, yc, cand[:k]))  # type: ignore[attr-defined]
                continue
            e = np.subtract(yc, xc, dtype=np.float64)
            lo_x, hi_x = (-math.inf, math.inf) if known_x else (r[1], r[2])
            partials.append(watch.chunk(ChunkView(i0, xc, yc, e, lo_x, hi_x, r[5], r[6])))
        watch.finish(partials, sums.max_abs, sums.max_flat)
    return True


# -- pass B --------------------------------------------------------------------------------


class _PassBBuffers:
    """One thread's scratch of pass B: the bin indices, its fine histogram."""

    def __init__(self, step: int, fine_bins: int, binned: bool, histograms: list[Any]) -> None:
        self.idx = np.empty(step, dtype=np.int32)  # fine bins < 2^31
        self.fine = np.zeros(fine_bins if binned else 1, dtype=np.int64)
        histograms.append(self.fine)  # list.append is atomic


def supported(x: Any, y: Any) -> bool:
    """Whether the compiled path takes this pair: NumPy float32/float64 arrays of one dtype."""
    return (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype == y.dtype
            and x.dtype in (np.float32, np.float64))


def compiled_point_stats(x: np.ndarray, y: np.ndarray, shape: tuple[int, ...], step: int, fine_bins: int, *,
                         threads: int = 1, watch: ChunkWatch | None = None,
                         x_extremes: tuple[float, float] | None = None) -> tuple[_Scan, _Sums, _Spread] | None:
    """:func:`perfscout.analysis.stream_fast.fast_point_stats` (same arguments, same
    record, None in the same cases) with the compiled chunk kernels; flat C-order
    float32 or float64 ``x``/``y`` of one dtype (:func:`supported`)."""
    n_total = int(x.size)
    scan = _Scan(shape=shape, n_total=n_total, n_valid=n_total)
    sums = _Sums()
    step = max(1, min(step, n_total))
    if x_extremes is not None and not all(map(math.isfinite, x_extremes)):
        x_extremes = None  # only finite extremes prove a finite x
    if not _pass_a(x, y, step, scan, sums, threads, watch, x_extremes):
        return None
    plan = plan_pass_b(np, x, y, step, scan, sums, fine_bins)
    if plan is None:
        return None
    spread, binned, edges = plan.spread, plan.binned, plan.edges
    per_coarse, half, sc = plan.per_coarse, plan.half, plan.sc
    kx, ky, ke = plan.kx, plan.ky, plan.ke
    histograms: list[Any] = []
    buffers = _per_thread(lambda: _PassBBuffers(step, fine_bins, binned, histograms))

    def one(i0: int) -> tuple:
        xc, yc = x[i0 : i0 + step], y[i0 : i0 + step]
        bufs = buffers()
        out = K.pass_b_kernel(xc, yc, kx, ky, ke, binned, sc, half, bufs.idx)
        if binned:
            K.scatter_kernel(xc, yc, bufs.idx, per_coarse, edges, bufs.fine)
        return out

    pw_bits = np.zeros(1, dtype=np.int64)

    def pw_value(pw: int) -> float:  # the kernel returns the largest ratio's bit pattern
        pw_bits[0] = pw
        return float(pw_bits.view(np.float64)[0])

    # Reduced in chunk order (the same chunks for any thread count), as stream_fast reduces.
    reduce_pass_b(map_ordered(one, range(0, n_total, step), threads), sums, spread, histograms if binned else [],
                  kx, ke, n_total, pw_value)
    if not sums.any_nonzero_x:
        sums.max_pw = 0.0
    return scan, sums, spread


# -- SSIM ----------------------------------------------------------------------------------


#: Compiled SSIM tiles (output windows per axis): rows of at most SSIM_ROW_MAX windows
#: (SSIM_ROW_MAX_1D for a 1-D field, whose one row is the field); blocks of
#: SSIM_BLOCK_ROWS input rows per plane, fewer when that exceeds SSIM_PLANE_ELEMENTS
#: elements; SSIM_TILE_PLANES output planes per tile (the halo of w0 - 1 planes is
#: recomputed once per tile). Measured on this 2-core VM (float32 sums then, 1 thread):
#: 256^3 with 31-row blocks 0.055-0.06 s (8192-element blocks), 15-row 0.078; 256x512x512
#: with 31-row blocks (16384 elements) 0.25 s, 15-row 0.29 s; 128 planes a few % faster
#: than 64. With float64 sums (64x256x512 float32, 1 thread, 0.15-0.19 s against float32's
#: 0.075-0.10 s): rows of 256 or 128 windows, 16-row blocks and a loop that sums each row
#: as its maps are made were each no faster.
SSIM_ROW_MAX = 512
SSIM_ROW_MAX_1D = 1 << 16
SSIM_BLOCK_ROWS = 32
SSIM_PLANE_ELEMENTS = 1 << 14
SSIM_TILE_PLANES = 128


def _ssim_plan(shape3: tuple[int, int, int], win: tuple[int, int, int]) -> tuple[list[int], list[int]]:
    """(output windows per axis, output windows per tile and axis) of the compiled SSIM."""
    n_out = [n - w + 1 for n, w in zip(shape3, win)]
    c_out = min(n_out[2], SSIM_ROW_MAX if shape3[1] > 1 or shape3[0] > 1 else SSIM_ROW_MAX_1D)
    c_in = c_out + win[2] - 1
    b_in = min(SSIM_BLOCK_ROWS, SSIM_PLANE_ELEMENTS // c_in)
    b_out = max(1, min(n_out[1], b_in - win[1] + 1))
    a_out = min(n_out[0], SSIM_TILE_PLANES)
    return n_out, [a_out, b_out, c_out]


def compiled_ssim(x: np.ndarray, y: np.ndarray, scan: _Scan, max_abs: float, data_range: float, *,
                  threads: int = 1) -> float | None:
    """:func:`perfscout.analysis.stream_fast.fast_ssim` (the same formula on the error in
    float64 window sums, the same refusals: None where :func:`.stream_fast.ssim_takes`
    refuses) with the compiled tile kernel, for fields of 1 to 3 dimensions longer than 1
    (None for more: the caller then runs fast_ssim). ``x``/``y``: C-contiguous, the
    field's shape, one float dtype."""
    # Axes of length 1 hold windows of length 1: dropping them changes no window, so a
    # field like (1, 64, 64, 64) is the 3-D field it holds.
    shape = tuple(int(n) for n in scan.shape if n != 1)
    if len(shape) > 3 or not ssim_takes(scan, max_abs, data_range):
        return None
    shape3 = (1,) * (3 - len(shape)) + shape
    x3, y3 = x.reshape(shape3), y.reshape(shape3)
    win = tuple(min(M.SSIM_WINDOW, n) for n in shape3)
    N = math.prod(win)
    c1n = N * N * (M.SSIM_K1 * data_range) ** 2
    c2n = N * (N - 1) * (M.SSIM_K2 * data_range) ** 2
    n_out, tile_out = _ssim_plan(shape3, win)  # type: ignore[arg-type]
    b_in, c_in = tile_out[1] + win[1] - 1, tile_out[2] + win[2] - 1

    def make() -> tuple[Any, ...]:
        # zeros: the kernel never writes the last few entries of a block's axis-2 sums
        # (windows past the block's end), which the row slides read into unused columns
        f64 = np.float64
        block_in, block_out = b_in * c_in, tile_out[1] * c_in
        return (np.zeros((4, block_in), f64), np.zeros((4, block_in), f64), np.zeros((win[0] + 1, 4, block_out), f64),
                np.zeros((4, block_out), f64), np.zeros(block_out, f64))

    buffers = _per_thread(make)

    def one(sl: tuple[slice, ...]) -> tuple[float, int]:
        (s0, s1, s2) = sl
        total = K.ssim_tile_kernel(x3, y3, s0.start, s0.stop, s1.start, s1.stop, s2.start, s2.stop,
                                  win[0], win[1], win[2], N, c1n, c2n, *buffers())
        count = (s0.stop - s0.start - win[0] + 1) * (s1.stop - s1.start - win[1] + 1) * (s2.stop - s2.start - win[2] + 1)
        return total, count

    total, count = 0.0, 0
    for t, c in map_ordered(one, halo_tiles(n_out, tile_out, win), threads):  # in tile order
        total += t
        count += c
    return 1.0 - total / count


def warm() -> None:
    """Compile (or load from the on-disk cache) every kernel for float32 and float64 on a
    tiny pair: a process that forks tasks (the sweep's forkserver) pays it once."""
    for dtype in (np.float32, np.float64):
        x = np.linspace(1.0, 2.0, 8 * 9 * 10, dtype=dtype).reshape(8, 9, 10)
        y = (x + dtype(1e-3)).astype(dtype)
        xf, yf = x.reshape(-1), y.reshape(-1)
        K.beyond_kernel(xf, yf, _ABS_BOUND, 0.0, np.empty(xf.size, dtype=np.int64))  # the bound check's
        got = compiled_point_stats(xf, yf, x.shape, 1 << 18, M.ERR_HIST_BINS * 4096)
        if got is not None:
            scan, sums, _ = got
            compiled_ssim(x, y, scan, sums.max_abs, scan.x_max - scan.x_min)
