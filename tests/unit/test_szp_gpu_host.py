"""The host side of the szp GPU driver that needs no GPU: launch geometry, the 32/64-bit
index choice, and the decode scratch layout. (The kernels themselves are tested on the
GPU in tests/gpu; this keeps a slip in the driver's arithmetic from waiting for one.)"""

from __future__ import annotations

import math

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
