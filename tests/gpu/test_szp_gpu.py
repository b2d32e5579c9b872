"""szp on the GPU: byte-identical to the NumPy reference, cross-decodable, chunked
streaming, DLPack inputs, event timing, and kernels free of local memory.

Runs only where CuPy sees a CUDA device (the ``gpu`` marker skips it elsewhere); the
recorded run is described in benchmarks/results/README.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfscout.codecs.szp import format as F
from perfscout.codecs.szp.codec import SZPGpuCodec
from perfscout.errors import CodecError

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy", reason="CuPy is needed for the GPU codec tests")
from perfscout.codecs.szp import gpu as G  # noqa: E402

V = G.WRITE_VERSION  # the format the kernels write; the reference writes the same


def _field(shape: tuple[int, ...], dtype: type, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.standard_normal(shape), axis=-1)
    if len(shape) > 1:
        x = np.cumsum(x, axis=-2) / 10
    x[tuple(rng.integers(0, s) for s in shape)] = np.nan  # one outlier at least
    return x.astype(dtype)


def _check_bound(x: np.ndarray, y: np.ndarray, stream: bytes) -> None:
    h = F.parse_header(stream)
    finite = np.isfinite(x)
    err = np.abs(x[finite].astype(np.float64) - y[finite].astype(np.float64))
    assert err.max() <= h.abs_bound
    assert np.array_equal(x[~finite].view(np.uint8), y[~finite].view(np.uint8))


def _same_stream(gpu: bytes, ref: bytes) -> None:
    """Equal bytes, or a short account of where they first differ."""
    if gpu == ref:
        return
    h = F.parse_header(ref)
    lay = F.layout(h)
    n = min(len(gpu), len(ref))
    diff = np.flatnonzero(np.frombuffer(gpu[:n], np.uint8) != np.frombuffer(ref[:n], np.uint8))
    first = int(diff[0]) if diff.size else n
    section = next((name for name, off in reversed(
        [("header", 0), ("widths", lay.widths), ("payload", lay.payload), ("corners", lay.corners),
         ("out_index", lay.out_index), ("out_value", lay.out_value), ("crc", lay.crc)])
        if first >= off), "?")
    gh = F.parse_header(gpu) if len(gpu) > F.HEADER_LEN else None
    pytest.fail(f"streams differ: lengths gpu {len(gpu)} ref {len(ref)}, {diff.size} bytes differ, "
                f"first at {first} ({section} section, +{first - getattr(lay, section, 0) if section not in ('header', '?') else first}); "
                f"gpu header {gh}, ref header {h}; gpu[{first}:+16]={gpu[first:first + 16].hex()} "
                f"ref={ref[first:first + 16].hex()}")


CASES = [
    ((4096 * 64 + 7,), 1), ((1000, 1003), 2), ((1000, 1003), 1), ((129, 67), 2),
    ((61, 130, 131), 3), ((64, 128, 128), 3), ((61, 130, 131), 2), ((2, 3, 33, 50), 3),
    ((5,), 1), ((3, 5), 2), ((1, 1, 3), 3),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,bnd", CASES)
@pytest.mark.parametrize("mode,bound", [("abs", 1e-2), ("rel", 1e-4)])
def test_gpu_stream_is_byte_identical(dtype, shape, bnd, mode, bound) -> None:
    x = _field(shape, dtype, seed=len(shape) * 7 + bnd)
    ds = G.compress_device(cp.asarray(x), mode, bound, bnd)
    gpu_stream = G.to_host(ds)
    ref_stream = F.encode(x, mode, bound, bnd, version=V)
    _same_stream(gpu_stream, ref_stream)
    # cross-decoding: GPU decodes the reference's stream, CPU the GPU's, same bits
    y_gpu = G.decompress_device(ref_stream).get()
    y_cpu = F.decode(gpu_stream)
    assert np.array_equal(y_gpu.view(np.uint8), y_cpu.view(np.uint8))
    _check_bound(x, y_gpu, gpu_stream)
    # the device-resident round trip gives the same array
    assert np.array_equal(G.decompress_device(ds).get().view(np.uint8), y_cpu.view(np.uint8))


def test_many_tiles_exercise_the_lookback() -> None:
    x = _field((16 * 1024 * 1024,), np.float32, seed=11)
    for mode, bound in (("rel", 1e-3), ("abs", 1e-6)):
        _same_stream(G.to_host(G.compress_device(cp.asarray(x), mode, bound, 1)), F.encode(x, mode, bound, 1, version=V))


def test_unaligned_views_take_the_scalar_path() -> None:
    base = cp.asarray(_field((100_003,), np.float32, seed=5))
    view = base[1:]  # 4-byte aligned only: no 16-byte loads
    ref = F.encode(view.get(), "abs", 1e-3, 1, version=V)
    _same_stream(G.to_host(G.compress_device(view, "abs", 1e-3, 1)), ref)


def test_real_fields_are_byte_identical(shared_fields: dict[str, np.ndarray]) -> None:
    for name, x in shared_fields.items():
        for mode, bound in (("rel", 1e-2), ("rel", 1e-4), ("abs", 1e-6)):
            ref = F.encode(x, mode, bound, version=V)
            _same_stream(G.to_host(G.compress_device(cp.asarray(x), mode, bound)), ref)  # noqa: E501
            y = G.decompress_device(ref).get()
            assert np.array_equal(y.view(np.uint8), F.decode(ref).view(np.uint8)), name


@pytest.mark.parametrize(
    "shape,bnd", [((37, 40, 52), 3), ((2, 301, 75), 3), ((301, 75), 2), ((200_001,), 1), ((5, 9, 300), 1)]
)
def test_chunked_streaming_gives_the_same_bytes(shape, bnd) -> None:
    x = _field(shape, np.float32, seed=3)
    small = 4096  # bytes: forces many slabs through the two-stream pipeline
    data = G.compress_host(x, "rel", 1e-3, bnd, chunk_bytes=small)
    _same_stream(data, F.encode(x, "rel", 1e-3, bnd, version=V))
    y = G.decompress_host(data, chunk_bytes=small)
    assert np.array_equal(y.view(np.uint8), F.decode(data).view(np.uint8))


def test_chunked_slab_with_many_outliers_reruns() -> None:
    x = np.full((64, 64, 64), np.nan, np.float32)  # every element is an outlier
    x[::2] = 1.0
    data = G.compress_host(x, "abs", 1e-3, 3, chunk_bytes=64 * 64 * 8 * 4)
    _same_stream(data, F.encode(x, "abs", 1e-3, 3, version=V))


def test_device_range_ignores_nonfinite() -> None:
    for dtype in (np.float32, np.float64):
        x = _field((10_001,), dtype, seed=2)
        x[5], x[7] = np.inf, -np.inf
        assert G.device_range(cp.asarray(x)) == F.finite_range(x)
    assert G.device_range(cp.asarray(np.full(9, np.nan, np.float32))) is None


def test_codec_accepts_numpy_cupy_and_torch() -> None:
    torch = pytest.importorskip("torch", reason="torch is needed for the DLPack input test")
    x = _field((64, 80, 96), np.float32, seed=9)
    codec = SZPGpuCodec("rel", 1e-3)
    c_np = codec.compress(x)
    assert c_np.meta["device"] == "cuda" and c_np.meta["reason"] == ""
    assert codec.compress(cp.asarray(x)).data == c_np.data
    assert codec.compress(torch.from_numpy(x).cuda()).data == c_np.data
    _check_bound(x, codec.decompress(c_np), c_np.data)


def test_codec_rejects_a_corrupt_stream_on_the_gpu_path() -> None:
    codec = SZPGpuCodec("abs", 1e-3)
    c = codec.compress(_field((1000,), np.float32, seed=1))
    bad = bytearray(c.data)
    bad[200] ^= 1
    c.data = bytes(bad)
    with pytest.raises(CodecError, match="checksum mismatch"):
        codec.decompress(c)


def test_timed_run_reports_event_times() -> None:
    x = _field((256, 256, 64), np.float32, seed=4)
    t = SZPGpuCodec("rel", 1e-3, block_ndim=3).timed_run(x, repeats=3)
    assert t is not None
    assert t.compress_s > 0 and t.decompress_s > 0 and t.h2d_s > 0 and t.d2h_s > 0
    assert len(t.samples["compress_s"]) == 3
    assert t.compressed.meta["device"] == "cuda" and t.device_name
    assert t.compressed.data == F.encode(x, "rel", 1e-3, 3, version=V)
    _check_bound(x, t.reconstructed, t.compressed.data)


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("bnd", [1, 2, 3])
@pytest.mark.parametrize("fmt", [2, 3, 4])
def test_kernels_use_no_local_memory(dtype: str, bnd: int, wide: bool, fmt: int) -> None:
    mod = G._module(dtype, bnd, wide, fmt)
    for name in ("szp_compress", "szp_decompress", "szp_width_scan", "szp_minmax", "szp_scatter",
                 "szp_corner_scan", "szp_corner_pack", "szp_corner_unpack", "szp_finish", "szp_sort_outliers",
                 "szp_gather2"):
        fn = mod.get_function(name)
        assert fn.local_size_bytes == 0, (name, fn.local_size_bytes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,bnd", [((100_003,), 1), ((61, 130, 131), 3), ((129, 67), 2)])
def test_64_bit_index_kernels_write_the_same_bytes(monkeypatch, dtype, shape, bnd) -> None:
    """The SZP_WIDE build (views of 2**31 elements or more) on small arrays."""
    monkeypatch.setattr(G, "NARROW_LIMIT", 0)
    assert G.geometry(shape, bnd).wide
    x = _field(shape, dtype, seed=3)
    ds = G.compress_device(cp.asarray(x), "rel", 1e-3, bnd)
    _same_stream(G.to_host(ds), F.encode(x, "rel", 1e-3, bnd, version=V))
    assert np.array_equal(G.decompress_device(ds).get().view(np.uint8), F.decode(G.to_host(ds)).view(np.uint8))


def test_device_stream_with_a_corrupt_width_is_rejected() -> None:
    """A device-resident stream skips host validation; the width scan still catches a
    width above MAX_WIDTH, and widths that disagree with the payload size."""
    x = _field((64 * 1024,), np.float32, seed=8)
    for value, match in ((F.MAX_WIDTH + 1, "exceeds"), (0, "do not add up")):
        ds = G.compress_device(cp.asarray(x), "abs", 1e-3, 1)
        lay = F.layout(ds.header)
        w = ds.body[lay.widths : lay.widths + ds.header.nblocks]
        k = int(cp.argmax(w))  # a block with a nonzero width
        w[k] = value
        with pytest.raises(CodecError, match=match):
            G.decompress_device(ds)


# -- format versions ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,bnd", [((100_003,), 1), ((61, 130, 131), 3), ((129, 67), 2), ((3, 5), 2)])
def test_both_written_versions_are_byte_identical(dtype, shape, bnd) -> None:
    """The SZP_FORMAT=2 and =3 builds each write the reference's bytes for that version,
    on a field with an offset (many corner blocks) and on a constant one (corner-only
    blocks: format 3 has no payload words for them at all)."""
    for x in (_field(shape, dtype, seed=12) + 1000, np.full(shape, 7.25, dtype)):
        for version in (2, 3):
            ds = G.compress_device(cp.asarray(x), "abs", 1e-3, bnd, version=version)
            data = G.to_host(ds)
            _same_stream(data, F.encode(x, "abs", 1e-3, bnd, version=version))
            assert F.parse_header(data).version == version
            y = G.decompress_device(ds).get()
            assert np.array_equal(y.view(np.uint8), F.decode(data).view(np.uint8))
            small = 4096  # chunked both ways
            assert G.compress_host(x, "abs", 1e-3, bnd, chunk_bytes=small, version=version) == data
            assert np.array_equal(G.decompress_host(data, chunk_bytes=small).view(np.uint8), y.view(np.uint8))


@pytest.mark.parametrize("name", ["v1_f32_2d_rel1e-3", "v1_f64_1d_abs1e-4", "v2_f32_3d_rel1e-3",
                                  "v2_f64_1d_abs1e-2"])
def test_older_streams_decode_on_the_gpu(name: str) -> None:
    from pathlib import Path

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "szp"
    data = (fix / f"{name}.szp").read_bytes()
    expected = np.load(fix / f"{name}.decoded.npy")
    assert np.array_equal(G.decompress_device(data).get().view(np.uint8), expected.view(np.uint8))
    assert np.array_equal(G.decompress_host(data, chunk_bytes=1024).view(np.uint8), expected.view(np.uint8))


def test_auto_block_flag_on_the_gpu() -> None:
    x = _field((64, 300), np.float32, seed=1)
    data = G.to_host(G.compress_device(cp.asarray(x), "rel", 1e-3, 1, auto_block=True))
    assert F.parse_header(data).auto_block
    assert data == F.encode(x, "rel", 1e-3, 1, auto_block=True, version=V)


def test_device_stream_with_a_corrupt_corners_section_is_rejected() -> None:
    import dataclasses

    x = _field((64 * 1024,), np.float32, seed=8) + 500  # corner blocks everywhere
    ds = G.compress_device(cp.asarray(x), "abs", 1e-3, 1, version=3)
    assert ds.header.corner_bytes > 0
    bad = G.DeviceStream(ds.body, dataclasses.replace(ds.header, corner_bytes=ds.header.corner_bytes - 1))
    with pytest.raises(CodecError, match="corner bytes"):
        G.decompress_device(bad)
    # a corner whose top byte is 0: not in its fewest bytes
    lay = F.layout(ds.header)
    w = ds.body[lay.widths : lay.widths + ds.header.nblocks].get()
    c = ds.body[lay.corners : lay.corners + ds.header.corner_bytes].get()
    nbs = F.corner_nbytes(w)
    k = int(np.flatnonzero(nbs >= 2)[0])  # a corner block with 2 or more corner bytes
    top = int(nbs[:k].sum()) + int(nbs[k]) - 1
    assert c[top] != 0
    body = ds.body.copy()
    body[lay.corners + top] = 0
    with pytest.raises(CodecError, match="fewest bytes"):
        G.decompress_device(G.DeviceStream(body, ds.header))


@pytest.mark.parametrize("version", [2, 3])
def test_launch_decompress_stream_decodes_like_decompress_device(version: int) -> None:
    """The benchmarks' kernel-only entry point decodes what decompress_device decodes,
    except at the outliers, which it leaves to the scatter."""
    x = _field((300, 301), np.float64, seed=4) + 200  # many corner blocks, a NaN outlier
    ds = G.compress_device(cp.asarray(x), "abs", 1e-3, 2, version=version)
    out = cp.empty(x.shape, dtype=x.dtype)
    G.launch_decompress_stream(out, ds, G.new_scratch(G.geometry(x.shape, 2)))
    p = F.parse(G.to_host(ds))
    keep = np.ones(x.size, bool)
    keep[p.out_index.astype(np.int64)] = False
    assert p.header.n_outliers >= 1 and keep.sum() > 0.99 * x.size
    got, want = out.get().reshape(-1), G.decompress_device(ds).get().reshape(-1)
    assert np.array_equal(got[keep].view(np.uint8), want[keep].view(np.uint8))
