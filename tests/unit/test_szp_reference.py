"""The szp format's NumPy reference: round trips, strict bounds, the bit layout pinned by
an independent slow encoder, and corrupt/truncated streams rejected with clear errors."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from perfscout.codecs.base import Compressed
from perfscout.codecs.szp import format as F
from perfscout.codecs.szp.codec import SZPGpuCodec
from perfscout.errors import CodecError, InputError


def _assert_within(x: np.ndarray, y: np.ndarray, stream: bytes) -> None:
    h = F.parse_header(stream)
    assert y.shape == x.shape and y.dtype == x.dtype
    finite = np.isfinite(x)
    err = np.abs(x[finite].astype(np.float64) - y[finite].astype(np.float64))
    assert err.size == 0 or err.max() <= h.abs_bound
    # non-finite inputs come back bit for bit
    assert np.array_equal(x[~finite].view(np.uint8), y[~finite].view(np.uint8))


def _smooth(shape: tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    field = sum(np.sin((k + 1) * g) for k, g in enumerate(grids))
    return (field + 0.01 * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "shape,block_ndim",
    [((1000,), 1), ((37, 53), 2), ((37, 53), 1), ((9, 13, 21), 3), ((9, 13, 21), 2),
     ((3, 4, 5, 17), 3), ((1,), 1), ((31,), 1), ((33,), 1), ((4, 8), 2), ((2, 4, 4), 3)],
)
@pytest.mark.parametrize("mode,bound", [("abs", 1e-2), ("rel", 1e-3), ("rel", 1e-5)])
def test_round_trip_holds_the_bound(dtype, shape, block_ndim, mode, bound) -> None:
    x = _smooth(shape, dtype)
    s = F.encode(x, mode, bound, block_ndim)
    y = F.decode(s)
    _assert_within(x, y, s)
    h = F.parse_header(s)
    assert (h.shape, h.mode, h.bound, h.block_ndim) == (shape, mode, bound, block_ndim)
    if mode == "rel":
        assert h.abs_bound == pytest.approx(bound * float(x.max() - x.min()))


def test_smooth_fields_compress() -> None:
    x = _smooth((64, 64, 64), np.float32)
    for bnd in (1, 2, 3):
        s = F.encode(x, "rel", 1e-3, bnd)
        assert x.nbytes / len(s) > 3.0, bnd


def test_empty_and_zero_dimensional_arrays() -> None:
    for x in (np.zeros(0, np.float32), np.zeros((3, 0), np.float64), np.array(2.5, np.float32)):
        s = F.encode(x, "abs", 0.1)
        y = F.decode(s)
        assert y.shape == x.shape
        _assert_within(x, y, s)


def test_nonfinite_and_huge_values_are_stored_exactly() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-45, 0.0, -0.0, 1.0, 7.0] * 4,
                 np.float32)
    s = F.encode(x, "abs", 0.1)
    y = F.decode(s)
    _assert_within(x, y, s)
    h = F.parse_header(s)
    assert h.n_outliers >= 5 * 4  # NaN, +-Inf and +-3e38 at least


def test_constant_field_in_rel_mode_is_exact_and_small() -> None:
    x = np.full((50, 60), -3.25, np.float32)
    s = F.encode(x, "rel", 1e-3)
    assert np.array_equal(F.decode(s), x)
    assert len(s) < x.nbytes / 10  # one width-1 word pair per block, no outliers
    assert F.parse_header(s).n_outliers == 0


def test_float_rounding_failures_become_outliers() -> None:
    # Values huge relative to the bound: q overflows the integer range, and in between
    # the reconstruction rounding misses the bound; each such element must be an outlier.
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(4096) * 10.0 ** rng.integers(-3, 9, 4096)).astype(np.float32)
    s = F.encode(x, "abs", 1e-3)
    _assert_within(x, F.decode(s), s)
    assert F.parse_header(s).n_outliers > 0


def test_bound_is_never_loosened_by_dtype_rounding() -> None:
    # float32(0.1) > 0.1: the enforced check bound must still be <= 0.1
    qz = F.resolve_quantizer(np.dtype(np.float32), "abs", 0.1, None)
    assert float(qz.check) < 0.1 and float(qz.step) <= 0.2
    qz = F.resolve_quantizer(np.dtype(np.float64), "rel", 1e-3, (-1.0, 3.0))
    assert qz.abs_bound == pytest.approx(4e-3) and float(qz.check) < 4e-3


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_bounds_are_rejected(bad: float) -> None:
    with pytest.raises(InputError, match="positive finite"):
        F.encode(np.ones(10, np.float32), "abs", bad)


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(InputError, match="float32 and float64"):
        F.encode(np.ones(10, np.int32), "abs", 0.1)
    with pytest.raises(InputError, match="3-D blocks"):
        F.encode(np.ones((4, 4), np.float32), "abs", 0.1, block_ndim=3)
    with pytest.raises(CodecError, match="modes abs and rel"):
        F.encode(np.ones(4, np.float32), "psnr", 0.1)


# -- the bit layout, pinned by an independent per-element encoder ----------------------


def _slow_payload(d_blocks: np.ndarray, version: int = 3) -> tuple[list[int], list[int], list[int]]:
    """Per-element transcription of FORMAT.md: widths, payload words and corner bytes."""
    widths, words, corners = [], [], []
    for blk in d_blocks.tolist():
        w_all = max(abs(v) for v in blk).bit_length()
        w_rest = max(abs(v) for v in blk[1:]).bit_length()
        plain_words = w_all + 1 if w_all else 0
        # v3: a corner block with words keeps the corner's sign in its sign word and stores
        # |d0|; a corner-only block stores ext0 = |d0| << 1 | sign
        cval = abs(blk[0]) if w_rest else abs(blk[0]) << 1 | (blk[0] < 0)
        nb = max(1, -(-cval.bit_length() // 8))
        if version == 2:
            corner = w_rest + 2 < plain_words
        else:
            corner_words = w_rest + 1 if w_rest else 0
            corner = 4 * corner_words + nb < 4 * plain_words
        w = w_rest if corner else w_all
        if corner:
            widths.append(w | 0x80 | ((nb - 1) << 5 if version == 3 else 0))
        else:
            widths.append(w)
        if corner and version == 3:
            corners += [(cval >> (8 * k)) & 0xFF for k in range(nb)]
        if w == 0 and not (corner and version == 2):
            continue
        mags = [0 if (corner and e == 0) else abs(v) for e, v in enumerate(blk)]
        sign = 0
        for e, v in enumerate(blk):
            if v < 0:
                sign |= 1 << (8 * (e % 4) + e // 4)
        words.append(sign)
        for k in range(w):
            word = 0
            for e, m in enumerate(mags):
                if (m >> k) & 1:
                    word |= 1 << (8 * (e % 4) + e // 4)
            words.append(word)
        if corner and version == 2:
            words.append(abs(blk[0]))
    return widths, words, corners


def test_one_dimensional_block_layout_by_hand() -> None:
    # integers with abs bound 0.5 quantise to themselves: q = 0..31, Lorenzo residuals
    # 0, 1, 1, ..., 1 -> width 1, sign word 0, plane 0 has every bit but element 0's.
    x = np.arange(32, dtype=np.float32)
    p = F.parse(F.encode(x, "abs", 0.5))
    assert p.widths.tolist() == [1]
    assert p.payload.tolist() == [0x00000000, 0xFFFFFFFE]


@pytest.mark.parametrize("block_ndim,shape", [(1, (100,)), (2, (9, 19)), (3, (5, 9, 7))])
@pytest.mark.parametrize("offset", [0, 5000, -5000, 100, -3, 2**25])  # offsets: corner blocks
@pytest.mark.parametrize("version", [2, 3])
def test_payload_matches_the_slow_transcription(block_ndim, shape, offset, version) -> None:
    rng = np.random.default_rng(block_ndim)
    x = np.cumsum(rng.integers(-40, 40, size=shape), axis=-1).astype(np.float64) + offset
    if offset == 100:  # blocks whose only non-zero residual is the corner
        x = np.full(shape, 100.0)
        x.reshape(-1)[::97] = -77.0
    p = F.parse(F.encode(x, "abs", 0.5, block_ndim, version=version))  # integers: q == x
    view = F.view_shape(shape, block_ndim)
    grid = F.block_grid(view, block_ndim)
    bshape = F.BLOCK_SHAPES[block_ndim]
    padded = np.pad(x.reshape(view), [(0, g * b - v) for g, b, v in zip(grid, bshape, view)],
                    mode="edge").astype(np.int64)
    blocks = F._to_blocks(padded, grid, bshape)
    d = F._lorenzo(blocks).reshape(len(blocks), 32)
    widths, words, corners = _slow_payload(d, version)
    assert p.header.version == version
    assert p.widths.tolist() == widths
    assert p.payload.tolist() == words
    assert p.corners.tolist() == corners and p.header.corner_bytes == len(corners)
    if abs(offset) >= 100:
        assert any(w & F.CORNER_FLAG for w in widths)
    stream = F.encode(x, "abs", 0.5, block_ndim, version=version)
    _assert_within(x, F.decode(stream), stream)


def test_corner_block_layout_by_hand() -> None:
    # q = 1000, 1001, ..., 1031: residuals 1000, 1, 1, ...: plain would be 10 + 1 words; as a
    # corner block the planes hold the 31 ones (width 1: sign word + 1 plane) and the
    # corners section the corner's magnitude 1000 in 2 bytes (width byte 1 | (2-1) << 5 | 0x80);
    # its sign stays in the sign word.
    x = np.arange(1000, 1032, dtype=np.float32)
    p = F.parse(F.encode(x, "abs", 0.5))
    assert p.header.version == F.VERSION == 4 and p.header.header_len == 144
    assert p.widths.tolist() == [1 | 1 << 5 | F.CORNER_FLAG]
    assert p.payload.tolist() == [0x00000000, 0xFFFFFFFE]
    assert p.corners.tolist() == [1000 & 0xFF, 1000 >> 8] and p.header.corner_bytes == 2
    y = -x
    p = F.parse(F.encode(y, "abs", 0.5))  # all negative: the sign word is full
    assert p.payload.tolist() == [0xFFFFFFFF, 0xFFFFFFFE]
    assert p.corners.tolist() == [1000 & 0xFF, 1000 >> 8]
    # a corner of 8 significant bits fits 1 byte as a magnitude (as ext0 it would need 2)
    p = F.parse(F.encode(np.arange(200, 232, dtype=np.float32), "abs", 0.5))
    assert p.widths.tolist() == [1 | F.CORNER_FLAG] and p.corners.tolist() == [200]
    stream = F.encode(y, "abs", 0.5)
    _assert_within(y, F.decode(stream), stream)
    # version 2 of the same: sign word keeps the corner's sign, one more word its magnitude
    p = F.parse(F.encode(x, "abs", 0.5, version=2))
    assert p.widths.tolist() == [1 | F.CORNER_FLAG] and p.payload.tolist() == [0, 0xFFFFFFFE, 1000]


def test_a_block_that_is_only_its_corner_has_no_payload() -> None:
    # a constant block: residuals 7, 0, ..., 0. Plain: 4 words (w = 3); corner: 1 byte, 0 words
    x = np.full(64, 7.0, np.float32)
    p = F.parse(F.encode(x, "abs", 0.5, version=3))
    assert p.widths.tolist() == [0x80, 0x80] and p.header.payload_words == 0
    assert p.corners.tolist() == [14, 14]
    # version 4: the second block is chained to the first (d0 - s = 0): no corner, no words
    p = F.parse(F.encode(x, "abs", 0.5))
    assert p.widths.tolist() == [0x80, F.CHAIN_FLAG] and p.header.payload_words == 0
    assert p.corners.tolist() == [14]
    # 4-byte corners: q near 2**26 - 1 (ext0 needs 27 bits)
    x = np.full(32, 2.0**26 - 3, np.float64)
    p = F.parse(F.encode(x, "abs", 0.5))
    assert p.widths.tolist() == [0x80 | 3 << 5] and p.corners.tolist() == list(
        int(2 * (2**26 - 3)).to_bytes(4, "little"))
    stream = F.encode(x, "abs", 0.5)
    _assert_within(x, F.decode(stream), stream)
    # an all-zero block stays plain: no words, no corner byte
    p = F.parse(F.encode(np.zeros(32, np.float32), "abs", 0.5))
    assert p.widths.tolist() == [0] and p.header.corner_bytes == 0


def test_auto_block_flag_is_recorded() -> None:
    x = _smooth((20, 30), np.float32)
    s = F.encode(x, "rel", 1e-3, 1, auto_block=True)
    h = F.parse_header(s)
    assert h.auto_block and h.flags == F.FLAG_AUTO_BLOCK and h.block_ndim == 1
    assert not F.parse_header(F.encode(x, "rel", 1e-3, 1)).auto_block
    # the flag does not change anything else in the stream
    plain = F.encode(x, "rel", 1e-3, 1)
    assert s[:136] == plain[:136] and s[144:-4] == plain[144:-4]
    with pytest.raises(InputError, match="version 3"):
        F.encode(x, "rel", 1e-3, 1, auto_block=True, version=2)
    with pytest.raises(InputError, match="version 2, 3 or 4"):
        F.encode(x, "rel", 1e-3, 1, version=1)


def test_version_3_is_smaller_than_version_2_on_smooth_fields() -> None:
    for bnd in (1, 2, 3):
        x = _smooth((16, 64, 64), np.float32)
        for rel in (1e-2, 1e-3, 1e-4):
            v2 = F.encode(x, "rel", rel, bnd, version=2)
            v3 = F.encode(x, "rel", rel, bnd, version=3)
            # the header grows by 16 bytes; the blocks never cost more
            assert len(v3) <= len(v2) + 32, (bnd, rel)
            assert np.array_equal(F.decode(v2), F.decode(v3))
        assert len(F.encode(x, "rel", 1e-2, bnd, version=3)) < 0.95 * len(F.encode(x, "rel", 1e-2, bnd, version=2))


@pytest.mark.parametrize("name", ["v1_f32_2d_rel1e-3", "v1_f64_1d_abs1e-4"])
def test_version_1_streams_still_decode(name: str) -> None:
    """Streams written by format version 1 (no corner blocks), kept as fixtures."""
    from pathlib import Path

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "szp"
    data = (fix / f"{name}.szp").read_bytes()
    assert F.parse_header(data).version == 1
    expected = np.load(fix / f"{name}.decoded.npy")
    assert np.array_equal(F.decode(data).view(np.uint8), expected.view(np.uint8))
    # a corner flag is not a version 1 width
    lay = F.layout(F.parse_header(data))
    b = bytearray(data)
    b[lay.widths] |= F.CORNER_FLAG
    with pytest.raises(CodecError, match="unknown flag bits"):
        F.decode(_recrc(b))


@pytest.mark.parametrize("name", ["v2_f32_3d_rel1e-3", "v2_f64_1d_abs1e-2"])
def test_version_2_streams_still_decode(name: str) -> None:
    """Streams written by format version 2 (corner magnitude in a payload word), kept as
    fixtures; ``encode(version=2)`` still writes them byte for byte."""
    from pathlib import Path

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "szp"
    data = (fix / f"{name}.szp").read_bytes()
    p = F.parse(data)
    assert p.header.version == 2 and p.header.header_len == 128
    assert np.any(p.widths & F.CORNER_FLAG)  # the fixtures do have corner blocks
    expected = np.load(fix / f"{name}.decoded.npy")
    assert np.array_equal(F.decode(data).view(np.uint8), expected.view(np.uint8))
    # bits 5-6 are not a version 2 width
    b = bytearray(data)
    b[p.layout.widths + int(np.flatnonzero(p.widths & F.CORNER_FLAG)[0])] |= 0x20
    with pytest.raises(CodecError, match="unknown flag bits"):
        F.decode(_recrc(b))


def test_version_2_encoder_writes_the_fixture_bytes() -> None:
    from pathlib import Path

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "szp"
    rng = np.random.default_rng(7)
    g = np.meshgrid(*[np.linspace(0, 3, n) for n in (6, 13, 21)], indexing="ij")
    x = (sum(np.sin((k + 1) * a) for k, a in enumerate(g)) + 50
         + 0.001 * rng.standard_normal((6, 13, 21))).astype(np.float32)
    x[2, 3, 4] = np.nan
    assert F.encode(x, "rel", 1e-3, 3, version=2) == (fix / "v2_f32_3d_rel1e-3.szp").read_bytes()


# -- corrupt and truncated streams --------------------------------------------------------


@pytest.fixture(scope="module")
def stream() -> bytes:
    x = _smooth((40, 50), np.float32)
    x[3, 4] = np.nan  # so the outlier sections are present
    return F.encode(x, "rel", 1e-3)


def _recrc(body: bytearray) -> bytes:
    return bytes(body[:-4]) + struct.pack("<I", zlib.crc32(bytes(body[:-4])))


def test_bad_magic(stream: bytes) -> None:
    with pytest.raises(CodecError, match="bad magic"):
        F.decode(b"XXXX" + stream[4:])


def test_unsupported_version(stream: bytes) -> None:
    b = bytearray(stream)
    b[4:6] = struct.pack("<H", 99)
    with pytest.raises(CodecError, match="unsupported szp format version 99"):
        F.decode(bytes(b))


def test_checksum_mismatch(stream: bytes) -> None:
    b = bytearray(stream)
    b[F.HEADER_LEN + 40] ^= 0x10
    with pytest.raises(CodecError, match="checksum mismatch"):
        F.decode(bytes(b))


@pytest.mark.parametrize("cut", [1, 4, 100, 2000])
def test_truncated(stream: bytes, cut: int) -> None:
    with pytest.raises(CodecError, match="truncated"):
        F.decode(stream[:-cut])


def test_too_short_for_a_header() -> None:
    with pytest.raises(CodecError, match="truncated"):
        F.decode(b"SZPG\x01\x00")


def test_trailing_bytes(stream: bytes) -> None:
    with pytest.raises(CodecError, match="trailing bytes"):
        F.decode(stream + b"\0")


def test_crafted_stream_with_valid_crc_is_still_checked(stream: bytes) -> None:
    lay = F.layout(F.parse_header(stream))
    b = bytearray(stream)
    b[lay.widths] = 60  # impossible width, checksum recomputed
    with pytest.raises(CodecError, match="block width exceeds"):
        F.decode(_recrc(b))
    b[lay.widths] = 0x21  # width 1 with a reserved bit set
    with pytest.raises(CodecError, match="unknown flag bits"):
        F.decode(_recrc(b))
    b = bytearray(stream)
    b[16:24] = struct.pack("<Q", 12345)  # element count no longer matches the shape
    with pytest.raises(CodecError, match="does not hold"):
        F.decode(_recrc(b))
    b = bytearray(stream)
    b[lay.out_index : lay.out_index + 8] = struct.pack("<Q", 10**9)
    with pytest.raises(CodecError, match="outlier indices"):
        F.decode(_recrc(b))


# -- the codec class without a GPU ----------------------------------------------------------


def test_codec_falls_back_to_the_reference_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from perfscout.codecs.szp import gpu as G

    monkeypatch.setattr(G, "gpu_available", lambda: (False, "gpu_unavailable: test"))
    codec = SZPGpuCodec("rel", 1e-3, block_ndim=2)
    x = _smooth((30, 40), np.float32)
    c = codec.compress(x)
    assert c.meta["device"] == "cpu" and c.meta["reason"].startswith("gpu_unavailable")
    assert c.data == F.encode(x, "rel", 1e-3, 2)
    assert codec.timed_run(x, 3) is None
    y = codec.decompress(c)
    _assert_within(x, y, c.data)
    assert c.abs_bound == F.parse_header(c.data).abs_bound


def test_codec_rejects_foreign_streams_and_bad_options() -> None:
    codec = SZPGpuCodec("abs", 0.1, device="cpu")
    foreign = Compressed(b"", (1,), "float32", "zfp", "abs", 0.1)
    with pytest.raises(CodecError, match="written by 'zfp'"):
        codec.decompress(foreign)
    with pytest.raises(CodecError, match="unknown options"):
        SZPGpuCodec("abs", 0.1, level=3)
    with pytest.raises(CodecError, match="block_ndim"):
        SZPGpuCodec("abs", 0.1, block_ndim=4)
    with pytest.raises(CodecError, match="does not support mode"):
        SZPGpuCodec("psnr", 40)


def test_real_fields(shared_fields: dict[str, np.ndarray]) -> None:
    codec = SZPGpuCodec("rel", 1e-3, device="cpu")
    for name, x in shared_fields.items():
        c = codec.compress(x)
        y = codec.decompress(c)
        _assert_within(x, y, c.data)
        assert c.meta["device"] == "cpu" and c.meta["reason"] == "cpu_requested", name


# -- hostile version 3 streams ------------------------------------------------------------


@pytest.fixture(scope="module")
def corner_stream() -> bytes:
    x = _smooth((40, 50), np.float32) + 100  # an offset: many corner blocks
    x[3, 4] = np.nan
    s = F.encode(x, "rel", 1e-3, 2)
    assert F.parse_header(s).corner_bytes > 0
    return s


def test_v3_forged_fields_are_rejected(corner_stream: bytes) -> None:
    p = F.parse(corner_stream)
    lay = p.layout
    ci = int(np.flatnonzero(p.widths & F.CORNER_FLAG)[0])
    pi = int(np.flatnonzero((p.widths & F.CORNER_FLAG) == 0)[0])
    cases = {
        "unknown flag bits": (136, struct.pack("<Q", 2)),  # header flag 1 is not defined
        "header length 128 != 144": (6, struct.pack("<H", 128)),
        "corner bytes": (128, struct.pack("<Q", 4 * p.header.nblocks + 1)),  # beyond any blocks
    }
    for msg, (off, val) in cases.items():
        b = bytearray(corner_stream)
        b[off : off + len(val)] = val
        with pytest.raises(CodecError, match=msg):
            F.decode(_recrc(b))
    # nb bits on a plain block
    b = bytearray(corner_stream)
    b[lay.widths + pi] |= 0x20
    with pytest.raises(CodecError, match="unknown flag bits"):
        F.decode(_recrc(b))
    # a corner block's nb forged one larger: the corners section no longer adds up
    b = bytearray(corner_stream)
    nb = ((p.widths[ci] >> 5) & 3) + 1
    if nb < 4:
        b[lay.widths + ci] = (int(p.widths[ci]) & 0x9F) | (int(nb) << 5)
        with pytest.raises(CodecError, match="corner bytes"):
            F.decode(_recrc(b))
    # the header's corner_bytes off by 16 (one pad more): the layout shifts, the sum differs
    b = bytearray(corner_stream)
    b[128:136] = struct.pack("<Q", p.header.corner_bytes + 16)
    with pytest.raises(CodecError, match="truncated|corner bytes"):
        F.decode(_recrc(b))
    # a corner block forged into a plain block of the same width: sizes then differ
    b = bytearray(corner_stream)
    b[lay.widths + ci] = p.widths[ci] & F.WIDTH_BITS
    with pytest.raises(CodecError, match="corner bytes|payload size"):
        F.decode(_recrc(b))


def test_v3_corner_not_in_its_fewest_bytes_is_rejected() -> None:
    x = np.full(32, 7.0, np.float32)  # one corner-only block: ext0 = 14 in 1 byte
    s = F.encode(x, "abs", 0.5, version=3)
    p = F.parse(s)
    h = p.header
    # rebuild the stream with the corner in 2 bytes (14, 0)
    widths = np.array([0x80 | 1 << 5], np.uint8)
    h2 = F.Header(h.dtype, h.shape, h.mode, h.bound, h.abs_bound, h.step, h.block_ndim,
                  h.nblocks, 0, 0, 3, 2, 0)
    forged = F.assemble(h2, widths, np.zeros(0, "<u4"), np.zeros(0, "<u8"),
                        np.zeros(0, np.float32), np.array([14, 0], np.uint8))
    with pytest.raises(CodecError, match="fewest bytes"):
        F.decode(forged)
    # the canonical form of the same decodes
    ok = F.assemble(F.Header(h.dtype, h.shape, h.mode, h.bound, h.abs_bound, h.step, h.block_ndim,
                             h.nblocks, 0, 0, 3, 1, 0),
                    np.array([0x80], np.uint8), np.zeros(0, "<u4"), np.zeros(0, "<u8"),
                    np.zeros(0, np.float32), np.array([14], np.uint8))
    assert ok == s


@pytest.mark.parametrize("cut", [1, 4, 17, 40])
def test_v3_truncated_inside_the_corners(corner_stream: bytes, cut: int) -> None:
    with pytest.raises(CodecError, match="truncated"):
        F.decode(corner_stream[:-cut])


def test_v3_stream_too_short_for_its_longer_header() -> None:
    s = F.encode(np.zeros(4, np.float32), "abs", 0.1)
    with pytest.raises(CodecError, match="truncated"):
        F.parse_header(s[:136])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 10**6])
def test_finite_range_in_chunks_is_the_one_pass_range(dtype: type, chunk: int) -> None:
    """The host range passes of szp-gpu and its auto block shape read in chunks; non-finite
    values and a chunk with none finite must not change the range."""
    rng = np.random.default_rng(chunk)
    x = (rng.standard_normal((9, 11, 13)) * 1e3).astype(dtype)
    x.reshape(-1)[:150] = np.nan  # whole chunks with nothing finite
    x[3, 4, 5], x[8, 0, 2] = np.inf, -np.inf
    assert F.finite_range(x, chunk_elems=chunk) == F.finite_range(x)
    assert F.finite_range(x[:, ::2, 1:], chunk_elems=chunk) == F.finite_range(x[:, ::2, 1:])  # a strided view
    assert F.finite_range(np.full((5, 5), np.nan, dtype), chunk_elems=chunk) is None


# -- version 4: chained blocks ---------------------------------------------------------------


def test_chained_block_layout_by_hand() -> None:
    """q = 1000 .. 1063 in two 1-D blocks: the first is a corner block (the corner 1000 in 2
    bytes, the planes the 31 ones); the second's first residual is predicted from the first
    block's last value (1032 - 1031 = 1), so all its residuals are 1: width 1, chained, no
    corner byte. Version 3 makes it a second corner block (2 more bytes)."""
    x = np.arange(1000, 1064, dtype=np.float32)
    p = F.parse(F.encode(x, "abs", 0.5))
    assert p.widths.tolist() == [1 | 1 << 5 | F.CORNER_FLAG, 1 | F.CHAIN_FLAG]
    assert p.corners.tolist() == [1000 & 0xFF, 1000 >> 8] and p.header.corner_bytes == 2
    assert p.payload.tolist() == [0x00000000, 0xFFFFFFFE, 0x00000000, 0xFFFFFFFF]
    s4 = F.encode(x, "abs", 0.5)
    _assert_within(x, F.decode(s4), s4)
    assert np.array_equal(F.decode(s4), F.decode(F.encode(x, "abs", 0.5, version=3)))
    p3 = F.parse(F.encode(x, "abs", 0.5, version=3))
    assert p3.widths.tolist() == [1 | 1 << 5 | F.CORNER_FLAG] * 2 and p3.header.corner_bytes == 4
    # a negative step down: the chained first residual keeps its sign in the sign word
    y = x.copy()
    y[32:] -= 2  # 1030 after 1031: d0 - s = -1 (a step of -40 makes it a corner block again)
    p = F.parse(F.encode(y, "abs", 0.5))
    assert p.widths[1] & F.CHAIN_FLAG and not p.widths[1] & F.CORNER_FLAG
    assert np.array_equal(F.decode(F.encode(y, "abs", 0.5)), F.decode(F.encode(y, "abs", 0.5, version=3)))


def test_chains_restart_every_chain_span_blocks() -> None:
    """A block at a multiple of CHAIN_SPAN is never chained (the GPU decodes CHAIN_SPAN
    blocks per warp step); each other block of a long ramp is."""
    x = np.arange(1000, 1000 + 32 * 13, dtype=np.float32)
    w = F.parse(F.encode(x, "abs", 0.5)).widths
    chained = F.chained(w)
    assert not chained[:: F.CHAIN_SPAN].any()
    assert chained[np.arange(len(w)) % F.CHAIN_SPAN != 0].all()


@pytest.mark.parametrize("block_ndim,shape", [(1, (3000,)), (1, (7, 50, 63)), (2, (40, 99)), (2, (3, 17, 70)),
                                              (3, (9, 18, 36)), (3, (4, 5, 33, 40))])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_version_4_decodes_what_version_3_decodes_and_is_never_larger(block_ndim, shape, seed, dtype) -> None:
    """Chaining changes how a block's first residual is coded, never the quantised values:
    the same reconstruction, bit for bit, in at most version 3's bytes (a block is chained
    only when that takes fewer), with NaN, huge and subnormal values among the inputs and a
    bound below float32's resolution of the data."""
    rng = np.random.default_rng(seed)
    x = (np.cumsum(rng.standard_normal(shape), axis=-1) * 10 + 100).astype(dtype)
    x.reshape(-1)[rng.choice(x.size, 5, replace=False)] = [np.nan, 1e30, -1e30, 0.0, 3e-39]
    for bound in (1e-2, 1e-4, 1e-9):
        s3, s4 = F.encode(x, "abs", bound, block_ndim, version=3), F.encode(x, "abs", bound, block_ndim)
        y3, y4 = F.decode(s3), F.decode(s4)
        assert np.array_equal(y3.view(np.uint8), y4.view(np.uint8))
        assert len(s4) <= len(s3)
        _assert_within(x, y4, s4)


def test_forged_chain_flags_are_rejected() -> None:
    x = np.arange(1000, 1000 + 32 * 8, dtype=np.float32)
    s = bytearray(F.encode(x, "abs", 0.5))
    p = F.parse(bytes(s))
    lay = p.layout

    def with_width(b: int, value: int) -> bytes:
        t = bytearray(s)
        t[lay.widths + b] = value
        body = bytes(t[: lay.crc])
        return body + zlib.crc32(body).to_bytes(4, "little")

    with pytest.raises(CodecError, match="flag bits"):  # chained at a multiple of CHAIN_SPAN
        F.decode(with_width(F.CHAIN_SPAN, int(p.widths[F.CHAIN_SPAN]) & 0x1F | F.CHAIN_FLAG))
    with pytest.raises(CodecError, match="flag bits"):  # bit 6 on a block that is not a corner block
        F.decode(with_width(1, int(p.widths[1]) | 0x40))
    v3 = bytearray(F.encode(x, "abs", 0.5, version=3))
    p3 = F.parse(bytes(v3))
    v3[p3.layout.widths + 1] = int(p3.widths[1]) & 0x1F | F.CHAIN_FLAG  # no chain flag before version 4
    body = bytes(v3[: p3.layout.crc])
    with pytest.raises(CodecError):
        F.decode(body + zlib.crc32(body).to_bytes(4, "little"))


# -- the step on a field far from zero (format 4 writers: format.rounding_step) ------------


def _far_from_zero(shape: tuple[int, ...], offset: float, spread: float) -> np.ndarray:
    """A smooth pattern in [-1, 1] with 1e-3 noise, scaled and offset: every value far
    from zero (a temperature in kelvin, a pressure in pascal)."""
    rng = np.random.default_rng(3)
    grids = np.meshgrid(*[np.linspace(0, 1, n) for n in shape], indexing="ij")
    f = np.ones(shape)
    for k, g in enumerate(grids):
        f = f * np.sin(2 * np.pi * (k + 1) * g + 0.7 * k)
    return (offset + spread * (f + 1e-3 * rng.standard_normal(shape))).astype(np.float32)


@pytest.mark.parametrize(("offset", "spread", "rel"), [(280, 30, 1e-4), (280, 30, 1e-5), (1e5, 5e3, 1e-5)])
def test_a_field_far_from_zero_gets_fewer_rounding_outliers(monkeypatch, offset, spread, rel) -> None:
    """With step = 2 * check, the encoder's rounding (about eps * |x|) fails elements
    whose quantisation error is within it of check, and they are stored whole. Format
    4's step leaves that rounding room: far fewer fail, the stream is smaller, and the
    bound still holds element by element. (float64 reaches q's limit, 2^26 steps, long
    before its eps * |x| matters.)"""
    x = _far_from_zero((24, 40, 40), offset, spread)
    new = F.encode(x, "rel", rel, 3)
    with monkeypatch.context() as m:
        m.setattr(F, "rounding_step", lambda check, frange: None)
        old = F.encode(x, "rel", rel, 3)
    hn, ho = F.parse_header(new), F.parse_header(old)
    assert ho.n_outliers >= 50 and hn.n_outliers <= ho.n_outliers // 4
    assert len(new) < len(old)
    qz = F.resolve_quantizer(np.dtype(np.float32), "rel", rel, F.finite_range(x))
    assert hn.step == float(qz.step) < 2 * float(qz.check) == ho.step
    for s, h in ((new, hn), (old, ho)):
        err = np.abs(F.decode(s).astype(np.float64) - x.astype(np.float64))
        assert err.max() <= h.abs_bound
    assert F.parse_header(F.encode(x, "rel", rel, 3, version=3)).step == ho.step  # format 3 writers: unchanged


def test_abs_mode_and_format_3_writers_keep_step_two_check() -> None:
    """abs mode has no range pass, so its step stays 2 * check; so does every format 3
    writer. A field near zero in rel mode gets the rounding room too, but there it is
    tiny: the step moves by a few ulps and nearly nothing else changes."""
    x = _far_from_zero((24, 40, 40), 280, 30)
    h = F.parse_header(F.encode(x, "abs", 1e-3, 3))
    assert h.step == 2 * float(F.resolve_quantizer(np.dtype(np.float32), "abs", 1e-3, None).check)
    centred = _smooth((24, 40, 40), np.float32)
    qz = F.resolve_quantizer(np.dtype(np.float32), "rel", 1e-3, F.finite_range(centred))
    assert 2 * qz.check * (1 - 1e-4) < qz.step < 2 * qz.check
    v3 = F.resolve_quantizer(np.dtype(np.float32), "rel", 1e-3, F.finite_range(centred), version=3)
    assert v3.step == 2 * v3.check


@pytest.mark.parametrize(("check", "frange", "applies"), [
    (np.float32(1e-2), (270.0, 310.0), True),
    (np.float32(1e-2), (-310.0, -270.0), True),    # all negative: its magnitude counts
    (np.float32(1e-2), (100.0, 310.0), True),
    (np.float32(1e-2), (-1.0, 310.0), True),       # crossing zero: M is still 310
    (np.float32(1e-5), (270.0, 310.0), False),     # bound near eps * M: no step meets it
    (np.float32(1e-2), None, False),               # no range known
    (np.float32(1e-2), (0.0, 0.0), None),          # nothing to leave room for: 2 * check
    (np.float64(1e-12), (270.0, 310.0), True),
])
def test_rounding_step_leaves_its_allowance_where_a_step_can(check, frange, applies) -> None:
    step = F.rounding_step(check, frange)
    if applies is False:
        assert step is None
        return
    if applies is None:
        assert step == 2 * check
        return
    assert type(step) is type(check) and step < 2 * check
    m = F.ROUNDING_ALLOWANCE * float(np.finfo(type(check)).eps) * max(abs(v) for v in frange)
    assert float(step) <= 2 * (float(check) - m) and float(step) >= 2 * (float(check) - m) * (1 - 1e-6)
