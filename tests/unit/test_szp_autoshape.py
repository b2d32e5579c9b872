"""szp's automatic block shape (perfscout.codecs.szp.autoshape) with the NumPy reference.

The contract: on every field here (the real fields at their own size when ../shared/data is
there, synthetic fields of the kinds where the shape matters most) and REL 1e-2/1e-3/1e-4,
the stream that ``block_ndim="auto"`` writes is at most ``TOLERANCE`` larger than the best
fixed shape's; the choice is in the header and in ``Compressed.meta``; it is deterministic;
explicit shapes still work; bad values are clear errors. Nothing here is timed.
"""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfscout.codecs.registry import codec_class
from perfscout.codecs.szp import autoshape as A
from perfscout.codecs.szp import format as F
from perfscout.codecs.szp.codec import SZPGpuCodec
from perfscout.errors import CodecError, InputError

#: How much larger than the best fixed shape's stream the automatic choice may be.
TOLERANCE = 0.03
RELS = (1e-2, 1e-3, 1e-4)


# -- fields -----------------------------------------------------------------------------------


def smooth3d_slab(planes: int = 8, ny: int = 256, nx: int = 512, seed: int = 0) -> np.ndarray:
    """benchmarks/szp_cr_vs_cuszp.py's smooth3d slab, cut to planes x ny x nx: the grid of the
    256 x 1024 x 1024 field, so z spacing is 4x the x spacing (anisotropic)."""
    z = np.linspace(0, 1, 256, dtype=np.float32)[:planes, None, None]
    y = np.linspace(0, 1, 1024, dtype=np.float32)[None, :ny, None]
    x = np.linspace(0, 1, 1024, dtype=np.float32)[None, None, :nx]
    f = np.zeros((planes, ny, nx), np.float32)
    for k, (a, b, c) in enumerate([(1, 2, 3), (3, 1, 2), (5, 4, 1), (2, 7, 6)]):
        f += (np.sin(2 * math.pi * a * z + k) * np.cos(2 * math.pi * b * y)
              * np.sin(2 * math.pi * c * x + 0.3 * k) / (k + 1)).astype(np.float32)
    return f + 1e-3 * np.random.default_rng(seed).standard_normal(f.shape, dtype=np.float32)


def gaussian_random_field(shape: tuple[int, int, int] = (32, 128, 128), seed: int = 0) -> np.ndarray:
    """benchmarks/szp_cr_vs_cuszp.py's GRF (k^-3 power spectrum), on a smaller box."""
    white = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    kz = np.fft.fftfreq(shape[0])[:, None, None]
    ky = np.fft.fftfreq(shape[1])[None, :, None]
    kx = np.fft.rfftfreq(shape[2])[None, None, :]
    k2 = kz * kz + ky * ky + kx * kx
    k2[0, 0, 0] = 1.0
    f = np.fft.irfftn(np.fft.rfftn(white) * k2**-0.75, s=shape, axes=(0, 1, 2)).astype(np.float32)
    return f / f.std()


def stacked_levels(levels: int = 24, ny: int = 181, nx: int = 360, seed: int = 1) -> np.ndarray:
    """Pressure levels: each a smooth lat/lon field, the mean falling with height and the
    pattern changing from one level to the next (weak correlation along z)."""
    rng = np.random.default_rng(seed)
    y = np.linspace(-1, 1, ny)[:, None]
    x = np.linspace(0, 2 * np.pi, nx)[None, :]
    out = np.empty((levels, ny, nx), np.float32)
    for lev in range(levels):
        a, b, c = rng.uniform(0.5, 3, 3)
        out[lev] = (1000 * np.exp(-lev / 8) + 30 * np.sin(a * x + rng.uniform(0, 6)) * np.cos(b * np.pi * y)
                    + 10 * np.cos(3 * c * x * y) + 0.05 * rng.standard_normal((ny, nx)))
    return out


def anisotropic(shape: tuple[int, int, int] = (48, 96, 192), dz: float = 8.0, seed: int = 2) -> np.ndarray:
    """Smooth in every axis, the z spacing 8x the x and y spacing."""
    z = np.arange(shape[0])[:, None, None] * dz
    y = np.arange(shape[1])[None, :, None]
    x = np.arange(shape[2])[None, None, :]
    f = np.sin(z / 40 + 0.3) * np.cos(y / 50) + np.sin(x / 60) * np.cos(z / 33)
    return (f + 1e-4 * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def steep_grf(shape: tuple[int, int, int] = (64, 64, 64), seed: int = 6) -> np.ndarray:
    """A Gaussian random field with a k^-5 power spectrum: smooth alike along every axis, the
    kind of field where 3-D blocks predict best."""
    white = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    kz = np.fft.fftfreq(shape[0])[:, None, None]
    ky = np.fft.fftfreq(shape[1])[None, :, None]
    kx = np.fft.rfftfreq(shape[2])[None, None, :]
    k2 = kz * kz + ky * ky + kx * kx
    k2[0, 0, 0] = 1.0
    f = np.fft.irfftn(np.fft.rfftn(white) * k2**-1.25, s=shape, axes=(0, 1, 2)).astype(np.float32)
    return f / f.std()


def image2d(shape: tuple[int, int] = (768, 1024), seed: int = 3) -> np.ndarray:
    """An image-like 2-D field: smooth shading, an edge, a disc."""
    y = np.linspace(0, 1, shape[0])[:, None]
    x = np.linspace(0, 1, shape[1])[None, :]
    img = (np.sin(12 * x + 3 * y) + np.cos(9 * y * y + 5 * x) + 0.8 * (x > 0.5)
           + 1.5 * ((x - 0.3) ** 2 + (y - 0.6) ** 2 < 0.05))
    return (img + 0.002 * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def noise(shape: tuple[int, ...] = (32, 96, 160), seed: int = 4) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def tiled_seams() -> np.ndarray:
    """A non-periodic patch tiled 2 x 3 x 4: seams where the tiles meet."""
    return np.tile(smooth3d_slab(4, 64, 96, seed=5), (2, 3, 4))


SYNTHETIC = {
    "smooth3d_slab": smooth3d_slab,
    "grf": gaussian_random_field,
    "stacked_levels": stacked_levels,
    "anisotropic": anisotropic,
    "steep_grf": steep_grf,
    "image2d": image2d,
    "noise": noise,
    "tiled_seams": tiled_seams,
    "last_axis_1": lambda: smooth3d_slab(8, 512, 32)[..., :1].copy(),  # blocks mostly padding
    "last_axis_3": lambda: anisotropic((64, 128, 3)),
    "last_axis_33": lambda: gaussian_random_field((40, 200, 33)),  # one column past 32
    "middle_axis_1": lambda: smooth3d_slab(64, 1, 512),
    "odd_planes_4d": lambda: gaussian_random_field((13, 127, 100)).reshape(13, 1, 127, 100),
    "four_d": lambda: gaussian_random_field((32, 64, 64)).reshape(4, 8, 64, 64),
    "float64": lambda: gaussian_random_field((16, 64, 128)).astype(np.float64),
    "with_nonfinite": lambda: _with_nonfinite(smooth3d_slab(4, 128, 256)),
    "levels_of_short_rows": lambda: levels_of_short_rows(),  # rows of 63 that 1-D blocks straddle
}


def _with_nonfinite(x: np.ndarray) -> np.ndarray:
    x = x.copy()
    x.reshape(-1)[::997] = np.nan
    x.reshape(-1)[5::1999] = np.inf
    return x


@pytest.fixture(scope="module")
def synthetic() -> dict[str, np.ndarray]:
    return {name: make() for name, make in SYNTHETIC.items()}


def _full_sizes(x: np.ndarray, rel: float) -> dict[int, int]:
    return {b: len(F.encode(x, "rel", rel, b)) for b in A.candidates(x.ndim)}


def _check_auto_against_best(name: str, x: np.ndarray, rel: float) -> None:
    full = _full_sizes(x, rel)
    c = SZPGpuCodec("rel", rel, device="cpu").compress(x)
    chosen = c.meta["block_ndim"]
    best = min(full.values())
    assert len(c.data) == full[chosen], name  # the auto stream is that shape's stream
    assert len(c.data) <= (1 + TOLERANCE) * best, (
        f"{name} {x.shape} REL {rel:g}: auto chose {chosen}-D blocks, {len(c.data)} bytes; "
        f"fixed shapes {full}; sample {c.meta['block_sample_bytes']}, "
        f"estimated {c.meta['block_estimated_bytes']}")
    y = F.decode(c.data)
    finite = np.isfinite(x)
    assert np.all(np.abs(x[finite].astype(np.float64) - y[finite]) <= c.abs_bound)


@pytest.mark.parametrize("rel", RELS)
@pytest.mark.parametrize("name", list(SYNTHETIC))
def test_auto_is_within_tolerance_of_the_best_shape_on_synthetic_fields(synthetic, name, rel) -> None:
    _check_auto_against_best(name, synthetic[name], rel)


@pytest.mark.parametrize("rel", RELS)
def test_auto_is_within_tolerance_of_the_best_shape_on_the_real_fields(shared_fields, rel) -> None:
    for name, x in shared_fields.items():
        _check_auto_against_best(name, x, rel)


def test_auto_is_within_tolerance_on_random_shapes_and_fields() -> None:
    """Shapes of 2-4 dims with axes from 1 to 257 (tiny, odd, just past a block multiple),
    fields smooth along each axis at its own frequency, sometimes with level steps or noise."""
    rng = np.random.default_rng(2026)
    done = 0
    while done < 12:
        shape = tuple(int(v) for v in rng.choice([1, 2, 3, 5, 8, 13, 31, 32, 33, 40, 64, 100, 127, 257],
                                                 int(rng.integers(2, 5))))
        if not 40_000 <= math.prod(shape) <= 1_500_000:
            continue
        coords = np.meshgrid(*[np.arange(s) for s in shape], indexing="ij", sparse=True)
        f = sum(np.sin(c * rng.uniform(0.001, 1.5) + rng.uniform(0, 6)) * rng.uniform(0.1, 2) for c in coords)
        if rng.random() < 0.3:
            f = f + (coords[0] % 3) * rng.uniform(0, 5)
        if rng.random() < 0.3:
            f = f + 0.01 * rng.standard_normal(shape)
        _check_auto_against_best(f"random{shape}", np.asarray(f, np.float32), float(rng.choice(RELS)))
        done += 1


def test_the_fields_where_the_shape_matters_get_the_shape_that_wins(synthetic) -> None:
    """Not a tolerance: these fields have one clear winner, and auto finds it."""
    expect = {("stacked_levels", 1e-4): 1, ("smooth3d_slab", 1e-4): 1, ("image2d", 1e-2): 2,
              ("steep_grf", 1e-3): 3, ("last_axis_1", 1e-3): 1, ("middle_axis_1", 1e-3): 1}
    for (name, rel), want in expect.items():
        full = _full_sizes(synthetic[name], rel)
        assert min(full, key=full.get) == want, (name, full)  # the premise
        assert A.choose_for(synthetic[name], "rel", rel).block_ndim == want, name


# -- the sample ---------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(8, 64, 96), (4, 16, 12), (64, 3, 5), (6, 2, 64), (40, 96), (64, 12),
                                   (2, 3, 16, 64), (4, 40, 8), (6, 48, 20)])
def test_a_sample_of_every_superblock_is_the_field_block_for_block(monkeypatch, shape) -> None:
    """With the sample allowed to hold every superblock, and a field that superblocks tile
    exactly, each candidate's sample stream is exactly as long as the field's: the sample's
    blocks are the field's own blocks (aligned as the tiling aligns them, padding included),
    for the 2-D/3-D box sample and for the 1-D runs alike."""
    monkeypatch.setattr(A, "WHOLE_ELEMS", 0)
    monkeypatch.setattr(A, "MIN_SAMPLE_ELEMS", math.prod(shape))
    rng = np.random.default_rng(len(shape))
    x = np.cumsum(rng.standard_normal(shape), axis=-1).astype(np.float32)  # distinct blocks
    geo = A.sample_geometry(shape)
    assert geo is not None and geo.elems == x.size  # superblocks tile it exactly
    eb = A.resolved_abs_bound(x, "rel", 1e-3)
    # format 3: block sizes do not depend on block order (format 4's chains do, and a box
    # sample stacked along y or z orders the field's blocks differently)
    choice = A.choose_block_ndim(x, eb, version=3)
    full = {b: len(F.encode(x, "abs", eb, b, version=3)) for b in A.candidates(x.ndim)}
    assert choice.sample_bytes == full
    assert choice.estimated_bytes == full


def test_the_sample_is_aligned_spread_and_small() -> None:
    shape = (256, 512, 1024)  # 2**27 elements; never materialised
    geo = A.sample_geometry(shape)
    assert geo is not None
    assert geo.box == (2, 4, 32) and geo.stack_axis == 2
    z, rem = np.divmod(geo.origins, shape[1] * shape[2])
    y, x = np.divmod(rem, shape[2])
    assert np.all(z % 2 == 0) and np.all(y % 4 == 0) and np.all(x % 32 == 0)
    assert geo.elems <= A.MAX_SAMPLE_ELEMS + math.prod(geo.box)
    assert geo.elems / math.prod(shape) <= 0.01
    assert len(np.unique(geo.origins)) == len(geo.origins)
    # it covers the field: every eighth of each axis holds some superblock
    for coord, extent in ((z, shape[0]), (y, shape[1]), (x, shape[2])):
        assert len(np.unique(coord * 8 // extent)) == 8
    # a smaller field: the sample is at least MIN_SAMPLE_ELEMS, about 1.6 % of a 1 Mi-element one
    small = A.sample_geometry((16, 256, 256))
    assert small is not None and A.MIN_SAMPLE_ELEMS <= small.elems <= 0.02 * 16 * 256 * 256


def test_the_1d_runs_are_the_fields_own_32_aligned_blocks() -> None:
    shape = (6, 50, 999)  # rows of 999: 1-D blocks straddle rows
    x = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)  # value = flat index
    geo = A.sample_geometry(shape)
    assert geo is not None
    box_sample, flat_sample = A.draw_sample(x, geo)
    assert flat_sample.size == box_sample.size == geo.elems
    runs = flat_sample.reshape(-1, 32).astype(np.int64)
    assert np.all(runs[:, 0] % 32 == 0) and np.all(np.diff(runs, axis=1) == 1)
    # format 4: the runs come as whole chain steps of the field (F.CHAIN_SPAN aligned
    # blocks), each holding a 1-D block of one of its superblock's rows (rows of 999:
    # somewhere along the row, not at the row piece's start, which would favour blocks
    # straddling a row end)
    span = 32 * F.CHAIN_SPAN
    wins = flat_sample.reshape(-1, span).astype(np.int64)
    assert np.all(wins[:, 0] % span == 0) and np.all(np.diff(wins, axis=1) == 1)
    Y, X = shape[1], shape[2]
    rows = (geo.origins[:, None] + geo.run_offsets[None, :])  # (superblock, row)
    row_start = rows - rows % X
    per_box = len(wins) // len(geo.origins)
    w0 = wins[:, 0].reshape(len(geo.origins), per_box)
    holds = (w0[:, :, None] < row_start[:, None, :] + X) & (w0[:, :, None] + span > row_start[:, None, :])
    assert np.all(holds.any(axis=2))  # every window meets a row of its own superblock
    spread = [w - row_start[i][np.argmax(holds[i, k])] for i, ws in enumerate(w0) for k, w in enumerate(ws)]
    assert np.std(spread) > X / 4  # spread along the rows
    # the box sample holds exactly the superblocks' elements
    sz, sy, sx = geo.box
    offsets = ((np.arange(sz)[:, None, None] * Y + np.arange(sy)[None, :, None]) * X
               + np.arange(sx)[None, None, :]).reshape(-1)
    want = x.reshape(-1)[(geo.origins[:, None] + offsets[None, :]).reshape(-1)]
    assert np.array_equal(np.sort(box_sample.reshape(-1)), np.sort(want))


def levels_of_short_rows(shape: tuple[int, ...] = (63, 8, 7, 63), seed: int = 7) -> np.ndarray:
    """Independent levels (a random offset each) of smooth 8 x 7 x 63 boxes: rows of 63, so
    about half of the field's 1-D blocks straddle a row end."""
    rng = np.random.default_rng(seed)
    coords = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij", sparse=True)
    f = sum(np.sin(c * rng.uniform(0.01, 0.5) + rng.uniform(0, 6)) for c in coords)
    return (f + 10 * rng.standard_normal(shape[0]).reshape(-1, 1, 1, 1)).astype(np.float32)


@pytest.mark.parametrize("name,shapes", [
    ("levels_of_short_rows", (1,)),  # planes of 7 x 63: 2-D/3-D run up to 9 % high (see autoshape)
    ("last_axis_33", (1, 2, 3)), ("stacked_levels", (1, 2, 3)), ("odd_planes_4d", (1, 2, 3)),
    ("image2d", (1, 2)), ("smooth3d_slab", (1, 2, 3)), ("tiled_seams", (1, 2, 3))])
def test_the_estimates_track_the_full_streams(synthetic, name, shapes) -> None:
    """Each candidate's predicted size is within 5 % of its real stream: the sample is not
    biased (rows that 1-D blocks straddle, edge padding, odd plane counts). Before the 1-D
    runs were spread along their rows, rows of 63 made the 1-D estimate 22 % high."""
    x = synthetic[name]
    for rel in (1e-2, 1e-4):
        c = A.choose_for(x, "rel", rel)
        full = _full_sizes(x, rel)
        assert c.sample_elems < x.size
        assert full[c.block_ndim] <= (1 + TOLERANCE) * min(full.values())
        for b in shapes:
            assert abs(c.estimated_bytes[b] - full[b]) <= 0.05 * full[b], (name, rel, b, c.estimated_bytes, full)


# -- tiny, degenerate and odd inputs ------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 2), (0, 5), (1, 1, 1), (3, 1, 1, 2), (33, 1000)])
def test_small_and_degenerate_arrays_get_a_valid_choice(shape) -> None:
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    c = SZPGpuCodec("rel", 1e-2, device="cpu").compress(x)
    assert c.meta["block_ndim"] in A.candidates(x.ndim)
    y = F.decode(c.data)
    assert y.shape == x.shape and (x.size == 0 or np.max(np.abs(x - y)) <= c.abs_bound)
    if 1 < x.size <= A.WHOLE_ELEMS and x.ndim >= 2:  # compressed whole (R > 0): the choice is exact
        full = _full_sizes(x, 1e-2)
        assert len(c.data) == min(full.values())
        assert c.meta["block_sample_elems"] == x.size


def test_nothing_to_choose_by() -> None:
    """One candidate (1-D arrays), an empty array, a zero resolved bound (a constant field in
    rel mode): the default shape, nothing compressed."""
    for x, eb in ((np.ones(1000, np.float32), 0.1), (np.ones((0, 64, 64), np.float32), 0.1),
                  (np.full((40, 64, 64), 3.0, np.float32), 0.0)):
        c = A.choose_block_ndim(x, eb)
        assert c.block_ndim == F.default_block_ndim(x.ndim) and c.sample_bytes == {} and c.sample_elems == 0
    x = np.full((40, 64, 64), 3.0, np.float32)
    c = SZPGpuCodec("rel", 1e-3, device="cpu").compress(x)
    assert np.array_equal(F.decode(c.data), x)


def test_the_choice_is_deterministic_and_ignores_memory_layout() -> None:
    x = stacked_levels(12, 90, 180)
    a, b = A.choose_for(x, "rel", 1e-3), A.choose_for(x, "rel", 1e-3)
    assert (a.block_ndim, a.sample_bytes, a.sample_elems, a.estimated_bytes) == \
           (b.block_ndim, b.sample_bytes, b.sample_elems, b.estimated_bytes)
    fortran = np.asfortranarray(x)  # the same values, not C-contiguous: gathered, never copied whole
    c = A.choose_for(fortran, "rel", 1e-3)
    assert (c.block_ndim, c.sample_bytes) == (a.block_ndim, a.sample_bytes)
    s1, s2 = A.draw_sample(x, A.sample_geometry(x.shape)), A.draw_sample(fortran, A.sample_geometry(x.shape))
    assert all(np.array_equal(p, q) for p, q in zip(s1, s2))


def test_abs_bound_resolution_matches_the_encoders() -> None:
    """The bound the choice compresses with is the one the stream records (rel and abs), and
    a bound past the dtype's largest value is capped as the encoder caps it."""
    x = image2d((200, 300))
    for mode, bound in (("rel", 1e-3), ("abs", 0.01), ("abs", 1e300)):
        assert A.resolved_abs_bound(x, mode, bound) == F.parse_header(F.encode(x, mode, bound)).abs_bound
    assert A.choose_block_ndim(x, math.inf).block_ndim in (1, 2)


def test_the_choice_quantises_with_the_streams_step_on_a_field_far_from_zero(monkeypatch) -> None:
    """A field far from zero gets format 4's rounding room in rel mode (format.rounding_step):
    the candidates are compressed with that step, not only that bound. Small enough to be
    compressed whole, the choice's sizes are the streams' own, byte for byte; sampled,
    every sample is handed the field's range."""
    rng = np.random.default_rng(5)
    small = (280 + np.cumsum(rng.standard_normal((20, 30, 40)), axis=2) * 0.05).astype(np.float32)
    assert small.size <= A.WHOLE_ELEMS
    rel = 1e-4
    choice = A.choose_for(small, "rel", rel)
    streams = {b: F.encode(small, "rel", rel, b) for b in A.candidates(small.ndim)}
    assert {b: len(s) for b, s in streams.items()} == choice.sample_bytes
    qz = F.resolve_quantizer(np.dtype(np.float32), "rel", rel, F.finite_range(small))
    assert qz.step < 2 * qz.check * (1 - 1e-3)  # a step well below 2 * check is what this exercises
    big = (280 + np.cumsum(rng.standard_normal((16, 96, 128)), axis=2) * 0.05).astype(np.float32)
    assert A.sample_geometry(big.shape) is not None
    seen = []
    encode = F.encode
    monkeypatch.setattr(F, "encode", lambda *a, **k: seen.append(k.get("value_range")) or encode(*a, **k))
    A.choose_for(big, "rel", rel)
    assert seen and all(r == F.finite_range(big) for r in seen)


# -- the codec: default, header, meta, explicit shapes, errors ---------------------------------


def test_auto_is_the_default_and_is_recorded_in_header_and_meta() -> None:
    x = stacked_levels(12, 90, 180)
    codec = SZPGpuCodec("rel", 1e-3, device="cpu")
    assert codec.block_ndim == "auto"
    assert codec_class("szp-gpu")("rel", 1e-3).block_ndim == "auto"
    c = codec.compress(x)
    h = F.parse_header(c.data)
    m = c.meta
    assert m["block_ndim"] == h.block_ndim and m["block_ndim_auto"] is True
    if hasattr(F, "FLAG_AUTO_BLOCK"):  # format v3: the header says the shape was chosen
        assert h.flags & F.FLAG_AUTO_BLOCK
        assert c.data == F.encode(x, "rel", 1e-3, h.block_ndim, auto_block=True)
    assert set(m["block_sample_bytes"]) == {"1", "2", "3"}
    assert m["block_sample_bytes"] == {str(k): v for k, v in A.choose_for(x, "rel", 1e-3).sample_bytes.items()}
    assert m["block_sample_elems"] > 0 and m["block_choice_us"] > 0
    assert SZPGpuCodec("rel", 1e-3, device="cpu", block_ndim="auto").compress(x).data == c.data


@pytest.mark.parametrize("bnd", [1, 2, 3, np.int64(2)])
def test_explicit_block_ndim_still_works(bnd) -> None:
    x = image2d((64, 96)).reshape(4, 16, 96)
    c = SZPGpuCodec("rel", 1e-3, device="cpu", block_ndim=bnd).compress(x)
    h = F.parse_header(c.data)
    assert c.data == F.encode(x, "rel", 1e-3, int(bnd))
    assert h.block_ndim == c.meta["block_ndim"] == int(bnd)
    assert c.meta["block_ndim_auto"] is False and "block_sample_bytes" not in c.meta
    assert not getattr(h, "flags", 0)


@pytest.mark.parametrize("bad", [0, 4, -1, 2.5, "abc", "3", True, [2]])
def test_bad_block_ndim_is_a_clear_error(bad) -> None:
    with pytest.raises(CodecError, match=r"block_ndim must be 1, 2 or 3, got .*'auto', the default"):
        SZPGpuCodec("rel", 1e-3, block_ndim=bad)


def test_bad_inputs_to_the_chooser_are_clear_errors() -> None:
    with pytest.raises(InputError, match="float32 and float64"):
        A.choose_block_ndim(np.ones((64, 64), np.int32), 0.1)
    with pytest.raises(InputError, match="absolute bound"):
        A.choose_block_ndim(np.ones((64, 64), np.float32), float("nan"))
    with pytest.raises(InputError, match="absolute bound"):
        A.choose_block_ndim(np.ones((64, 64), np.float32), -1.0)


def test_the_evaluation_records_the_choice() -> None:
    from perfscout.tools.evaluate import evaluate_full

    x = stacked_levels(12, 90, 180)
    ev = evaluate_full(x, "szp-gpu", "rel", 1e-3, device="cuda", repeats=1, isolate=False,
                       options={"device": "cpu"})  # the reference, GPU or not
    assert ev.result.bound_ok and ev.result.ratio == x.nbytes / len(ev.compressed.data)
    meta = ev.compressed.meta
    assert meta["block_ndim_auto"] is True and meta["block_ndim"] in (1, 2, 3)
    assert set(meta["block_sample_bytes"]) == {"1", "2", "3"} and meta["block_choice_us"] > 0


def test_the_gpu_paths_pass_the_choice_and_the_flag_to_the_driver(monkeypatch) -> None:
    """Without a GPU here: the driver's entry points replaced by the reference (same
    signatures as perfscout.codecs.szp.gpu's), to check what the codec hands them."""
    from perfscout.codecs.szp import gpu as G

    calls: list[tuple[str, object, dict]] = []

    def compress_host(x, mode, bound, block_ndim=None, chunk_bytes=0, *, auto_block=False, version=F.VERSION):
        calls.append(("host", block_ndim, {"auto_block": auto_block}))
        return F.encode(x, mode, bound, block_ndim, auto_block=auto_block, version=version)

    def timed_roundtrip(x, mode, bound, block_ndim, repeats, *, auto_block=False):
        calls.append(("timed", block_ndim, {"auto_block": auto_block}))
        data = F.encode(np.asarray(x), mode, bound, block_ndim, auto_block=auto_block)
        return G.GpuTiming(data=data, reconstructed=F.decode(data), compress_s=1e-3, decompress_s=1e-3,
                           h2d_s=0.0, d2h_s=0.0, samples={}, device_name="fake")

    def compress_device(x, mode, bound, block_ndim=None, *, auto_block=False, version=F.VERSION, choose=None):
        choice = None
        if choose is not None:  # the driver calls the chooser after its own range pass
            choice = choose(x, A.resolved_abs_bound(x, mode, bound))
            block_ndim, auto_block = choice.block_ndim, True
        calls.append(("device", block_ndim, {"auto_block": auto_block}))
        data = F.encode(x, mode, bound, block_ndim, auto_block=auto_block, version=version)
        return G.DeviceStream(data, F.parse_header(data), choice)

    monkeypatch.setattr(G, "gpu_available", lambda: (True, ""))
    monkeypatch.setattr(G, "as_device_array", lambda obj: None)
    monkeypatch.setattr(G, "device_name", lambda: "fake")
    monkeypatch.setattr(G, "_fit_chunk", lambda chunk: chunk)
    monkeypatch.setattr(G, "compress_host", compress_host)
    monkeypatch.setattr(G, "compress_device", compress_device)
    monkeypatch.setattr(G, "to_host", lambda ds: ds.body)
    monkeypatch.setattr(G, "timed_roundtrip", timed_roundtrip)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(asarray=np.asarray))  # the upload
    x = stacked_levels(12, 90, 180)
    want = A.choose_for(x, "rel", 1e-3, version=G.WRITE_VERSION).block_ndim
    # larger than one slab: streamed by compress_host, the shape chosen with NumPy
    codec = SZPGpuCodec("rel", 1e-3, chunk_bytes=x.nbytes // 2)
    c = codec.compress(x)
    assert calls[-1] == ("host", want, {"auto_block": True})
    assert c.meta["device"] == "cuda" and c.meta["block_ndim"] == want and "block_sample_bytes" in c.meta
    # one slab: uploaded whole and chosen on the device (here the stand-in device is NumPy)
    c1 = SZPGpuCodec("rel", 1e-3).compress(x)
    assert calls[-1] == ("device", want, {"auto_block": True}) and c1.data == c.data
    t = codec.timed_run(x, 2)
    assert calls[-1] == ("timed", want, {"auto_block": True}) and t.compressed.meta["block_ndim"] == want
    SZPGpuCodec("rel", 1e-3, block_ndim=3, chunk_bytes=x.nbytes // 2).compress(x)
    assert calls[-1] == ("host", 3, {"auto_block": False})


def test_the_driver_is_handed_the_chooser_and_calls_it_after_its_range_pass(monkeypatch) -> None:
    """On the device the codec hands gpu.compress_device autoshape's chooser (gpu.py does not
    import the layer above it) and records the ShapeChoice the driver returns."""
    from perfscout.codecs.szp import gpu as G

    seen = []

    def compress_device(x, mode, bound, block_ndim=None, *, choose=None, **kw):
        seen.append("chooser" if choose is not None else block_ndim)
        if choose is None:
            data = F.encode(x, mode, bound, block_ndim)
            return G.DeviceStream(data, F.parse_header(data))
        choice = choose(x, A.resolved_abs_bound(x, mode, bound))
        data = F.encode(x, mode, bound, choice.block_ndim, auto_block=True)
        return G.DeviceStream(data, F.parse_header(data), choice)

    monkeypatch.setattr(G, "compress_device", compress_device)
    monkeypatch.setattr(G, "gpu_available", lambda: (True, ""))
    monkeypatch.setattr(G, "as_device_array", lambda obj: obj)
    monkeypatch.setattr(G, "device_name", lambda: "fake")
    monkeypatch.setattr(G, "to_host", lambda ds: ds.body)
    x = stacked_levels(12, 90, 180)
    c = SZPGpuCodec("rel", 1e-3).compress(x)
    assert seen == ["chooser"]
    assert c.meta["block_ndim_auto"] is True and c.meta["block_sample_bytes"]
    assert c.data == SZPGpuCodec("rel", 1e-3, device="cpu").compress(x).data
    SZPGpuCodec("rel", 1e-3, block_ndim=2).compress(x)
    assert seen == ["chooser", 2]


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 70), min_size=2, max_size=5).map(tuple)
       .filter(lambda s: math.prod(s) <= 200_000))
def test_any_shape_gets_a_sample_of_the_fields_own_aligned_blocks(shape) -> None:
    """For any shape (the whole-array threshold lifted): the superblocks lie inside the view at
    aligned positions, the 1-D runs are 32-aligned flat runs holding the superblocks' rows,
    both samples have the same length, and when every superblock is taken and they tile the
    view the sample streams are the field's."""
    import unittest.mock as mock

    n = math.prod(shape)
    with mock.patch.object(A, "WHOLE_ELEMS", 0), mock.patch.object(A, "MIN_SAMPLE_ELEMS", n):
        A.sample_geometry.cache_clear()
        try:
            geo = A.sample_geometry(shape)
        finally:
            A.sample_geometry.cache_clear()
        if geo is None:  # too small for one superblock: compressed whole
            assert n < 32 * 32 * 32
            return
        Z, Y, X = geo.view
        sz, sy, sx = geo.box
        z, rem = np.divmod(geo.origins, Y * X)
        y, x = np.divmod(rem, X)
        zb = 2 if len(shape) >= 3 else 1
        assert np.all(z + sz <= Z) and np.all(y + sy <= Y) and np.all(x + sx <= X)
        assert np.all(z % zb == 0) and np.all(y % 4 == 0) and np.all(x % 32 == 0)
        assert sz % zb == 0 or sz == Z
        assert sy % 4 == 0 or sy == Y
        assert sx == 32 or sx == X
        field = np.arange(n, dtype=np.float64).reshape(shape)  # value = flat index
        box_sample, flat_sample = A.draw_sample(field, geo)
        assert box_sample.size == flat_sample.size == geo.elems
        runs = flat_sample.reshape(-1, 32).astype(np.int64)
        assert np.all(runs[:, 0] % 32 == 0) and np.all(np.diff(runs, axis=1) == 1)
        if geo.elems == n:  # every superblock, tiling the view: the sample is the field
            rng = np.random.default_rng(n)
            f = np.cumsum(rng.standard_normal(shape), axis=-1).astype(np.float32)
            eb = A.resolved_abs_bound(f, "rel", 1e-3)
            if eb > 0:  # format 3: block sizes do not depend on block order (format 4's chains
                # do, and a box sample stacked along y orders the field's blocks differently)
                c = A.choose_block_ndim(f, eb, version=3)
                assert c.sample_bytes == {b: len(F.encode(f, "abs", eb, b, version=3)) for b in A.candidates(f.ndim)}


def test_the_evaluation_notes_say_which_block_shape_was_chosen_and_what_it_cost() -> None:
    from perfscout.tools.evaluate import evaluate_full

    ev = evaluate_full(stacked_levels(12, 90, 180), "szp-gpu", "rel", 1e-3, repeats=1, device="cuda")
    note = next(n for n in ev.notes if n.startswith("szp block shape chosen automatically"))
    assert f"{ev.compressed.meta['block_ndim']}-D blocks" in note and "µs" in note
    assert "1-D" in note and "3-D" in note  # every candidate's size is named
    fixed = evaluate_full(stacked_levels(12, 90, 180), "szp-gpu", "rel", 1e-3, repeats=1, device="cuda",
                          options={"block_ndim": 3})
    assert not any("chosen automatically" in n for n in fixed.notes)
