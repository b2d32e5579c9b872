"""The host side of the szp GPU driver that needs no GPU: launch geometry, the 32/64-bit
index choice, and the decode scratch layout. (The kernels themselves are tested on the
GPU in tests/gpu; this keeps a slip in the driver's arithmetic from waiting for one.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

from perfscout.codecs.szp import format as F
from perfscout.codecs.szp import gpu as G
from perfscout.errors import InputError


@pytest.mark.parametrize("shape,bnd", [((1000, 1003), 2), ((61, 130, 131), 3), ((5,), 1), ((0,), 1)])
def test_geometry_matches_the_reference_block_grid(shape, bnd) -> None:
    geo = G.geometry(shape, bnd)
    assert geo.view == F.view_shape(shape, bnd)
    assert geo.grid == F.block_grid(geo.view, bnd)
    assert geo.nblocks == math.prod(geo.grid)
    assert geo.ntiles == -(-geo.nblocks // G.TILE_BLOCKS)
    assert not geo.wide


def test_views_of_2_31_elements_take_the_64_bit_kernels(monkeypatch) -> None:
    assert G.geometry((2**31,), 1).wide
    assert not G.geometry((2**31 - 32,), 1).wide
    monkeypatch.setattr(G, "NARROW_LIMIT", 0)
    assert G.geometry((7,), 1).wide


def test_too_many_blocks_for_one_stream_is_refused() -> None:
    with pytest.raises(InputError, match="2\\*\\*32 blocks"):
        G.geometry((2**32 * 32,), 1)


@pytest.mark.parametrize("nblocks", [1, 127, 128, 129, 128 * 32, 128 * 32 + 1, 10**6])
def test_decode_scratch_layout_fits_and_covers_every_tile(nblocks) -> None:
    geo = G.Geometry((1, 1, 32 * nblocks), (1, 1, nblocks), 1)
    ctas, first = G._scan_slots(geo)
    # the width scan's last CTA owns slot ntiles (the total); its status words, the
    # counter, ntiles + 1 offsets, the error flags and the corners' byte count fit the
    # scratch new_scratch allocates
    assert ctas * G.SCAN_CTA_TILES > geo.ntiles
    scratch_len = G.scratch_words(geo)
    assert first + geo.ntiles + 3 <= scratch_len
    # compress tiles of 4 or more warps need at most 2 * ntiles status words, then the
    # counter, the outlier count and the corners' byte count
    assert -(-nblocks // (4 * G.STEPS * 4)) + 3 <= G._corner_region(geo)
    # format 3's corner scan: its own status words, counter and ntiles + 1 offsets, after
    # everything the compress and the width scan use
    assert first + geo.ntiles + 3 <= G._corner_region(geo)
    assert G._corner_region(geo) + ctas + 1 + geo.ntiles + 1 <= scratch_len
    # its pack/unpack grid has a warp for every tile
    (blocks,), (threads,) = G._corner_grid(geo)
    assert blocks * threads // 32 >= geo.ntiles


def test_one_memset_covers_every_slot_the_launches_need_zeroed() -> None:
    """The compress and the decode each zero scratch_zero_words(geo) leading words with one
    memset: the compress's status words and counts (for its smallest tiles, 4 warps), the
    width scan's status words, counter, error and corner-count slots, and the corner scan's
    status words and counter; all of it inside the scratch, none of the corner prefix."""
    for nblocks in (1, 127, 128, 129, 4097, 10**6, 2**24 + 5):
        geo = G.Geometry((1, 1, 32 * nblocks), (1, 1, nblocks), 1)
        z = G.scratch_zero_words(geo)
        ctas, first = G._scan_slots(geo)
        end = first + geo.ntiles + 1
        assert -(-nblocks // (4 * G.STEPS * 4)) + 3 <= z  # compress status + counter + 2 counts
        assert end + 2 <= z  # width scan: status, counter, (prefix), error, corner bytes
        r = G._corner_region(geo)
        assert z == r + ctas + 1  # the corner scan's status words and counter, not its prefix
        assert z <= G.scratch_words(geo)


def test_staging_buffer_has_room_for_every_transfer() -> None:
    """Pinned staging: 16-byte aligned areas for the counts (the compress reads 4 u64, the
    decode 3) and a version 3 header."""
    for at in (G._ST_COUNTS, G._ST_HEAD):
        assert at % 16 == 0
    assert G._ST_HEAD - G._ST_COUNTS >= 32
    assert G._ST_BYTES - G._ST_HEAD >= F.HEADER_LEN


def _bitonic_like_the_kernel(keys: np.ndarray, threads: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """szp_sort_outliers' loops, step for step (``threads`` stands in for the CTA, each
    pass of the inner loop one __syncthreads apart): keys padded with ~0 to a power of two,
    compare-exchange of i and i ^ j, ascending where i & k == 0."""
    m = len(keys)
    p2 = 1
    while p2 < m:
        p2 <<= 1
    k_ = np.full(p2, np.iinfo(np.uint64).max, np.uint64)
    k_[:m] = keys
    pos = np.arange(p2, dtype=np.uint32)
    k = 2
    while k <= p2:
        j = k >> 1
        while j > 0:
            for t in range(threads):
                for i in range(t, p2, threads):
                    partner = i ^ j
                    if partner > i and (k_[i] > k_[partner]) == ((i & k) == 0):
                        k_[i], k_[partner] = k_[partner], k_[i]
                        pos[i], pos[partner] = pos[partner], pos[i]
            j >>= 1
        k <<= 1
    return k_[:m], pos[:m]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, 13, 64, 100, 257])
def test_the_sort_kernels_network_sorts_any_count(n) -> None:
    rng = np.random.default_rng(n)
    keys = rng.choice(10**9, n, replace=False).astype(np.uint64)
    got, pos = _bitonic_like_the_kernel(keys)
    assert np.array_equal(got, np.sort(keys))
    assert np.array_equal(keys[pos], got)  # the values follow their indices


def test_sort_capacity_follows_the_devices_shared_memory(fake_cupy, monkeypatch) -> None:
    """12 bytes per outlier: the H200's 227 KiB opt-in holds SORT_MAX (16384); a device
    that reports less, or none, gets what the 48 KiB every device gives holds (4096)."""
    rt = fake_cupy.cuda.runtime
    for reported, want in ((232448, 16384), (100 * 1024, 8192), (132, 4096)):
        G._sort_kernel.cache_clear()
        monkeypatch.setattr(rt, "deviceGetAttribute", lambda attr, dev, r=reported: r)
        fn, n = G._sort_kernel("float32", 0)
        assert n == want
        assert 12 * n <= max(reported, 48 * 1024)
        if n > 4096:
            assert fn.max_dynamic_shared_size_bytes == 12 * n
    G._sort_kernel.cache_clear()


# -- the driver's host logic against the reference, on a stand-in for CuPy --------------
# compress_device / decompress_device are launches, memsets, copies and one wait; here the
# CuPy they call is NumPy memory (device allocations filled with garbage, so an unzeroed pad
# shows), the runtime's memset/memcpy act on those addresses, and each kernel writes what
# the real one writes, taken from the reference's stream of the array being compressed. A
# slip in an offset, a pad, the staging buffer or the outlier paths fails here, without a GPU.


class _FakeData:
    def __init__(self, a: np.ndarray) -> None:
        self.ptr = a.ctypes.data


class _FakeArray(np.ndarray):
    @property
    def data(self):  # noqa: ANN201 - CuPy's MemoryPointer stand-in
        return _FakeData(self)

    def get(self, stream=None, out=None):  # noqa: ANN001, ANN201
        if out is not None:
            out[...] = np.asarray(self)
            return out
        return np.array(self)

    def copy(self, order="C"):  # noqa: ANN001, ANN201
        return np.array(self).view(_FakeArray)


def _tile_prefix(per_block: np.ndarray, nb: int, ntiles: int) -> np.ndarray:
    c = np.concatenate([[0], np.cumsum(per_block.astype(np.int64))])
    return c[np.minimum(np.arange(ntiles + 1) * G.TILE_BLOCKS, nb)].astype(np.uint64)


class _FakeKernel:
    """One kernel of the stand-in module; REF holds the reference's parsed stream."""

    REF: dict = {}
    launches: list = []
    max_threads_per_block = 256  # 8 warps, as szp_compress's __launch_bounds__

    def __init__(self, name: str, options: tuple[str, ...]) -> None:
        self.name = name
        self.fmt = int(next(o for o in options if o.startswith("-DSZP_FORMAT="))[-1])

    def __call__(self, grid, block, args, shared_mem=0) -> None:  # noqa: ANN001
        self.launches.append(self.name)
        getattr(self, self.name)(*args)

    # The finishing kernels as the CUDA code reads the counts and derives the layout (a
    # model of szp_finish / szp_sort_outliers, not a copy of the reference's bytes).
    @staticmethod
    def _finish_layout(pay_off, tail, v3):  # noqa: ANN001, ANN205
        pw, n = int(tail[0]) & int(G.VAL_MASK), int(tail[2])
        cb = int(tail[3]) if v3 else 0
        corners = int(pay_off) + F.pad16(4 * pw)
        out_index = corners + F.pad16(cb)
        return pw, n, cb, corners, out_index

    def szp_finish(self, body, pay_off, tail, corner_tmp, cap, v3) -> None:  # noqa: ANN001
        pw, n, cb, corners, out_index = self._finish_layout(pay_off, tail, v3)
        if n > int(cap):
            return
        head = body[:144].view(np.uint64) if v3 else body[:128].view(np.uint64)
        head[7], head[8] = pw, n
        if v3:
            head[16] = cb
        body[int(pay_off) + 4 * pw : out_index] = 0
        body[corners : corners + cb] = corner_tmp[:cb]

    def szp_sort_outliers(self, body, pay_off, tail, idx, val, cap, sort_max, v3) -> None:  # noqa: ANN001
        pw, n, cb, corners, out_index = self._finish_layout(pay_off, tail, v3)
        if n > int(cap) or n > int(sort_max):
            return
        out_value = out_index + F.pad16(8 * n)
        crc = out_value + F.pad16(val.dtype.itemsize * n)
        order = np.argsort(np.asarray(idx[:n]), kind="stable")
        body[out_index:crc] = 0
        body[out_index : out_index + 8 * n].view(np.uint64)[:] = np.asarray(idx[:n])[order]
        body[out_value : out_value + val.dtype.itemsize * n].view(val.dtype)[:] = np.asarray(val[:n])[order]

    def szp_compress(self, x, Z, Y, X, NBy, NBx, nb, vec, recip, step, check, widths, corner_ext, payload,  # noqa: ANN001, N803
                     status, counter, out_idx, out_val, count, cap) -> None:
        p = self.REF["parsed"]
        h = p.header
        widths[: h.nblocks] = p.widths
        payload[: h.payload_words] = p.payload
        if self.fmt >= 3:
            corner_ext[: h.nblocks] = p.corner_ext
        perm = np.random.default_rng(h.n_outliers).permutation(h.n_outliers)  # atomic order
        m = min(h.n_outliers, int(cap))
        out_idx[:m], out_val[:m] = p.out_index[perm][:m], p.out_value[perm][:m]
        count[0] = h.n_outliers  # counted past the room, as the kernel does
        status[-1] = (1 << 62) | h.payload_words  # the last tile's inclusive prefix, flag bit set

    def szp_corner_scan(self, widths, nb, ntiles, prefix, status, counter, total) -> None:  # noqa: ANN001
        pre = _tile_prefix(F.corner_nbytes(np.asarray(widths[: int(nb)])), int(nb), int(ntiles))
        prefix[: int(ntiles) + 1] = pre
        total[0] = pre[-1]

    def szp_corner_pack(self, widths, nb, ntiles, corner_ext, prefix, out) -> None:  # noqa: ANN001
        cnb = F.corner_nbytes(np.asarray(widths[: int(nb)]))
        b = np.asarray(corner_ext[: int(nb)]).astype("<u4").view(np.uint8).reshape(-1, 4)
        packed = b[np.arange(4)[None, :] < cnb[:, None]]
        out[: packed.size] = packed

    def szp_width_scan(self, widths, nb, ntiles, prefix, status, counter, error) -> None:  # noqa: ANN001
        words = F.block_words(np.asarray(widths[: int(nb)]), 3 if self.fmt >= 3 else 2)
        prefix[: int(ntiles) + 1] = _tile_prefix(words, int(nb), int(ntiles))

    def szp_corner_unpack(self, widths, nb, ntiles, corners, length, prefix, corner_ext, error) -> None:  # noqa: ANN001
        w = np.asarray(widths[: int(nb)])
        if int(F.corner_nbytes(w).sum()) > int(length):
            error[0] |= 2
        else:
            corner_ext[: int(nb)] = F._unpack_corners(np.asarray(corners[: int(length)]), w)

    def szp_decompress(self, out, *args) -> None:  # noqa: ANN001
        out[...] = self.REF["decoded"].reshape(out.shape)

    def szp_scatter(self, out, idx, val, n, size) -> None:  # noqa: ANN001
        out.reshape(-1)[np.asarray(idx[: int(n)]).astype(np.int64)] = val[: int(n)]

    def szp_minmax(self, x, n, keys) -> None:  # noqa: ANN001
        r = F.finite_range(np.asarray(x).reshape(-1))
        if r is None:
            return
        ut, ft = (np.uint64, np.float64) if keys.dtype == np.uint64 else (np.uint32, np.float32)
        sign = ut(1) << ut(8 * np.dtype(ut).itemsize - 1)

        def key(v: float):  # noqa: ANN202
            u = np.array(v, ft).view(ut)
            return ~u if u & sign else u | sign

        keys[0], keys[1] = min(keys[0], key(r[0])), max(keys[1], key(r[1]))


@pytest.fixture
def fake_cupy(monkeypatch):  # noqa: ANN001, ANN201
    """sys.modules' cupy/cupyx replaced by the stand-in for one test (the driver's caches
    cleared before and after, so no stand-in kernel outlives it)."""
    import ctypes
    import sys
    import types

    rng = np.random.default_rng(0)

    def empty(shape, dtype=np.float64):  # noqa: ANN001, ANN202
        a = np.empty(shape, dtype)
        a.view(np.uint8).reshape(-1)[:] = rng.integers(0, 256, a.nbytes, dtype=np.uint8)  # device garbage
        return a.view(_FakeArray)

    class Stream:
        ptr = 0

        def __init__(self, non_blocking: bool = False) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def __enter__(self):  # noqa: ANN204
            return self

        def __exit__(self, *a) -> None:  # noqa: ANN002
            pass

    class Event:
        def __init__(self, block: bool = False, disable_timing: bool = False, interprocess: bool = False) -> None:
            pass

        def record(self, stream=None) -> None:  # noqa: ANN001
            pass

        def synchronize(self) -> None:
            pass

    runtime = types.SimpleNamespace(
        memcpyDefault=4,
        memsetAsync=lambda ptr, value, size, stream: ctypes.memset(ptr, value, size),
        memcpyAsync=lambda dst, src, size, kind, stream: ctypes.memmove(dst, src, size),
        getDevice=lambda: 0, deviceGetAttribute=lambda attr, dev: 132, getDeviceCount=lambda: 1,
        memGetInfo=lambda: (100 << 30, 140 << 30))
    cuda = types.SimpleNamespace(runtime=runtime, Stream=Stream, Event=Event, get_current_stream=Stream,
                                 Device=lambda i=0: types.SimpleNamespace(id=0))
    cp = types.ModuleType("cupy")
    cp.__dict__.update(
        cuda=cuda, ndarray=_FakeArray, empty=empty, uint8=np.uint8, uint32=np.uint32, uint64=np.uint64,
        zeros=lambda shape, dtype=np.float64: np.zeros(shape, dtype).view(_FakeArray),
        asarray=lambda a, dtype=None: np.array(a, dtype=dtype).view(_FakeArray),
        ascontiguousarray=lambda a: np.ascontiguousarray(a).view(_FakeArray),
        argsort=lambda a: np.argsort(np.asarray(a)).view(_FakeArray),
        RawModule=lambda code, options: types.SimpleNamespace(get_function=lambda n: _FakeKernel(n, options)))
    cpx = types.ModuleType("cupyx")
    cpx.empty_pinned = lambda shape, dtype=np.float64: np.empty(shape, dtype)

    def clear() -> None:
        for fn in (G._module, G._kernel, G._compress_kernel, G._sm_count, G._sort_kernel, G._finish_ctas):
            fn.cache_clear()
        G._local.__dict__.clear()

    clear()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupyx", cpx)
    yield cp
    clear()


def _driver_round_trip(cp, x: np.ndarray, mode: str, bound: float, bnd: int, version: int = 3) -> list[str]:  # noqa: ANN001
    ref = F.encode(x, mode, bound, bnd, version=version)
    _FakeKernel.REF.update(parsed=F.parse(ref), decoded=F.decode(ref))
    _FakeKernel.launches.clear()
    ds = G.compress_device(cp.asarray(x), mode, bound, bnd, version=version)
    launches = list(_FakeKernel.launches)
    assert G.to_host(ds) == ref
    for src in (ds, ref):  # the device stream, and host bytes copied over
        y = G.decompress_device(src)
        assert np.array_equal(np.asarray(y).view(np.uint8), _FakeKernel.REF["decoded"].view(np.uint8))
    return launches


def _planted(n: int, n_out: int, dtype: type, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (np.cumsum(rng.standard_normal(n)) / 30).astype(dtype)
    x[rng.choice(n, n_out, replace=False)] = np.nan
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,n_out,launches", [
    (20_000, 0, 1), (20_000, 1, 1), (20_000, 300, 1),  # sorted by szp_sort_outliers
    (300_000, 4096, 1),  # the most the stand-in device's 48 KiB sorts in the launches
    (300_000, 4096 + 3, 1),  # more: sorted after the wait (room 4687)
    (20_000, 1500, 2),  # past the first launch's room (1024): a second launch
])
def test_driver_writes_the_reference_bytes_on_every_outlier_path(fake_cupy, dtype, n, n_out, launches) -> None:
    got = _driver_round_trip(fake_cupy, _planted(n, n_out, dtype, n_out), "abs", 1e-2, 1)
    assert got.count("szp_compress") == launches


@pytest.mark.parametrize("bnd", [2, 3])
@pytest.mark.parametrize("mode,bound,version", [("abs", 1e-2, 3), ("rel", 1e-3, 3), ("abs", 1e-2, 2)])
def test_driver_with_corner_blocks_rel_mode_and_format_2(fake_cupy, bnd, mode, bound, version) -> None:
    x = _planted(24 * 40 * 50, 200, np.float32, 4).reshape(24, 40, 50)
    x[:, :, :20] = 0.0  # corner-only blocks beside payload blocks
    got = _driver_round_trip(fake_cupy, x, mode, bound, bnd, version)
    assert ("szp_minmax" in got) == (mode == "rel") and ("szp_corner_pack" in got) == (version >= 3)


@pytest.mark.parametrize("bnd", [1, 2])
def test_driver_gives_the_kernels_the_rounding_step_of_a_field_far_from_zero(fake_cupy, bnd) -> None:
    """Format 4's step on a field far from zero comes from the host's resolve_quantizer with
    the device range pass's min/max: the driver's header (and the quantiser it launches
    with) must be the reference's."""
    rng = np.random.default_rng(6)
    x = (280 + np.cumsum(rng.standard_normal((16, 24, 40)), axis=2) * 0.05).astype(np.float32)
    h = F.parse_header(F.encode(x, "rel", 1e-4, bnd, version=4))
    qz = F.resolve_quantizer(np.dtype(np.float32), "rel", 1e-4, F.finite_range(x))
    assert h.step == float(qz.step) < 2 * float(qz.check)  # the case this is about
    got = _driver_round_trip(fake_cupy, x, "rel", 1e-4, bnd, 4)
    assert "szp_minmax" in got


@pytest.mark.parametrize("shape,bnd", [((0,), 1), ((3, 0, 4), 3), ((5,), 1), ((3, 5), 2), ((1, 1, 3), 3)])
def test_driver_on_empty_and_tiny_arrays(fake_cupy, shape, bnd) -> None:
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    _driver_round_trip(fake_cupy, x, "rel", 1e-3, bnd)


@pytest.mark.parametrize("version", [3, 4])
@pytest.mark.parametrize("bnd,n_out", [(1, 0), (2, 40), (3, 3000)])  # 3000: past the launch's room
def test_sample_counts_are_the_streams_counts(fake_cupy, version, bnd, n_out) -> None:
    """The shape choice's prepared launches (gpu.sample_stream_counts: one scratch for the
    candidates, one memset, one pinned read-back) bring back the payload words, outliers and
    corner bytes of the reference's header; twice, so the reused buffers are reused."""
    x = _planted(16 * 20 * 64, n_out, np.float32, 5).reshape(16, 20, 64)
    x[:, :, :24] = 0.0  # corner blocks beside plain ones
    ref = F.encode(x, "abs", 1e-2, bnd, version=version)
    h = F.parse_header(ref)
    _FakeKernel.REF.update(parsed=F.parse(ref))
    qz = F.resolve_quantizer(x.dtype, "abs", 1e-2, None)
    want = (h.payload_words, h.n_outliers, h.corner_bytes)
    for _ in range(2):
        assert G.sample_stream_counts({bnd: fake_cupy.asarray(x)}, qz, version) == {bnd: want}


def test_driver_range_and_a_short_corners_section(fake_cupy) -> None:
    import dataclasses

    from perfscout.errors import CodecError

    cp = fake_cupy
    assert G.device_range(cp.asarray(np.array([np.nan, 2.0, -3.0, np.inf], np.float32))) == (-3.0, 2.0)
    assert G.device_range(cp.zeros(0, np.float64)) is None
    assert G.device_range(cp.asarray(np.full(5, np.nan))) is None
    x = np.full((64, 64), 7.0, np.float32)  # corner-only blocks
    _driver_round_trip(cp, x, "abs", 1e-3, 2)
    ds = G.compress_device(cp.asarray(x), "abs", 1e-3, 2)
    assert ds.header.corner_bytes > 0
    short = G.DeviceStream(ds.body, dataclasses.replace(ds.header, corner_bytes=ds.header.corner_bytes - 1))
    with pytest.raises(CodecError, match="corner"):
        G.decompress_device(short)
