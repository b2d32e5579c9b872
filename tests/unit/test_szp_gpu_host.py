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
    """Pinned staging: 16-byte aligned areas for the counts, HOST_SORT_MAX outliers of
    float64 each way, a version 3 header, and the largest outlier sections it uploads."""
    for at in (G._ST_COUNTS, G._ST_IDX, G._ST_VAL, G._ST_HEAD, G._ST_TAIL):
        assert at % 16 == 0
    assert G._ST_IDX - G._ST_COUNTS >= 32  # the compress reads 4 u64 counts, the decode 3
    assert G._ST_VAL - G._ST_IDX >= 8 * G.HOST_SORT_MAX
    assert G._ST_HEAD - G._ST_VAL >= 8 * G.HOST_SORT_MAX
    assert G._ST_TAIL - G._ST_HEAD >= F.HEADER_LEN
    n = G.HOST_SORT_MAX
    h = F.Header(np.dtype("float64"), (n * 32,), "abs", 1.0, 1.0, 1.0, 1, n, 0, n, 3, 0, 0)
    lay = F.layout(h)
    assert G._ST_TAIL + (lay.crc - lay.out_index) <= G._ST_BYTES


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_host_sorted_outlier_sections_equal_the_reference_stream(dtype, seed) -> None:
    """The outlier sections the driver uploads, built from outliers in any (atomic) order,
    are the reference stream's bytes, pads included; a stale byte in the staging area does
    not leak into a pad."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(4096).astype(dtype)
    x[rng.choice(x.size, 37 + seed, replace=False)] = np.array(3e7, dtype)  # beyond QLIMIT steps
    data = F.encode(x, "abs", 1e-2, 1)
    parsed = F.parse(data)
    h = parsed.header
    assert 1 < h.n_outliers <= G.HOST_SORT_MAX
    perm = rng.permutation(h.n_outliers)
    out = np.full(G._ST_BYTES - G._ST_TAIL, 0xAB, np.uint8)
    size = G._outlier_sections(out, parsed.out_index[perm].astype(np.uint64),
                               parsed.out_value[perm].astype(dtype), parsed.layout)
    lay = parsed.layout
    assert size == lay.crc - lay.out_index
    assert out[:size].tobytes() == bytes(data[lay.out_index : lay.crc])


def test_a_single_outlier_section() -> None:
    x = np.zeros(64, np.float32)
    x[5] = 3e7
    data = F.encode(x, "abs", 1e-3, 1)
    parsed = F.parse(data)
    assert parsed.header.n_outliers == 1
    lay = parsed.layout
    out = np.full(64, 0xCD, np.uint8)
    size = G._outlier_sections(out, parsed.out_index.astype(np.uint64), parsed.out_value, lay)
    assert out[:size].tobytes() == bytes(data[lay.out_index : lay.crc])
