"""cuSZp on the GPU through perfscout: round trips in every encoding/processing/dtype, its stream
size against the NumPy size model of its 1-D outlier format, host-byte round trips and
truncation, the wrong-architecture check, and the evaluation that reports cuSZp's float32
rounding beyond the bound as a finding (while szp-gpu holds the same bound).

Needs a CUDA device, CuPy and a libcuSZp.so (scripts/build_cuszp.sh; PERFSCOUT_CUSZP_LIB);
each piece that is missing skips with the registry's reason.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from perfscout.codecs.framing import from_bytes, to_bytes
from perfscout.codecs.registry import get_codec, info
from perfscout.errors import CodecError
from perfscout.tools.evaluate import evaluate_full

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy", reason="CuPy is needed for the GPU tests")
_avail = info("cuszp")
if not _avail.available:
    pytest.skip(f"cuszp is unavailable here: {_avail.reason}", allow_module_level=True)

from perfscout.codecs.gpu_peers import cuszp as C
from perfscout.codecs.gpu_peers import device as D

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import cuszp_model


def _smooth(shape: tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.standard_normal(shape), axis=-1)
    if len(shape) > 1:
        x = np.cumsum(x, axis=-2) / 10
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("encoding", ["fixed", "plain", "outlier"])
@pytest.mark.parametrize("dim,shape", [(1, (100_003,)), (1, (37, 61, 45)), (2, (130, 260)), (2, (9, 70, 36)),
                                       (3, (33, 66, 68)), (3, (5, 7, 12))])
def test_roundtrip_close_to_the_bound(dtype, encoding, dim, shape):
    x = _smooth(shape, dtype, seed=dim)
    eb = 1e-3 * float(x.max() - x.min())
    codec = get_codec("cuszp", "abs", eb, encoding=encoding, dim=dim)
    c = codec.compress(x)
    y = codec.decompress(c)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert c.meta["stream_nbytes"] == len(c.data) and c.meta["dim"] == dim and c.meta["encoding"] == encoding
    err = np.abs(x.astype(np.float64) - y.astype(np.float64))
    # cuSZp works in the data's precision: allow its rounding, not more (perfscout's check
    # reports any excess; here we only check that the library really ran)
    slack = 4 * np.spacing(np.abs(x).max().astype(dtype)).astype(np.float64) + 1e-6 * eb
    assert err.max() <= eb + slack, (err.max(), eb)
    assert x.nbytes / len(c.data) > 1.5


@pytest.mark.parametrize("shape,dim,dtype,short_by", [
    ((20_000,), 1, np.float32, None),        # a 1-D grid of one thread block: the report is the rate bytes alone
    ((9, 70, 36), 2, np.float32, None),      # 405 2-D blocks: one thread block
    ((5, 7, 12), 3, np.float64, None),       # 12 3-D blocks
    ((130, 260), 2, np.float32, 3),          # 561 blocks over 2 thread blocks: the report misses the rate padding
    ((40, 64, 64), 3, np.float32, 0),        # 10 x 16 x 16 blocks, a multiple of 4: the report is right
])
def test_the_stream_is_whole_where_cuszp_reports_a_wrong_size(shape, dim, dtype, short_by):
    """cuSZp's reported size is the rate bytes alone when its grid has one thread block, and
    1-3 bytes short with 2-D/3-D processing when the block count is not a multiple of 4:
    perfscout stores the stream's real extent (its block rates), and the report beside it."""
    x = _smooth(shape, dtype, seed=5)
    codec = get_codec("cuszp", "abs", 1e-3 * float(x.max() - x.min()), encoding="outlier", dim=dim)
    with D.work_stream():
        xd = cp.asarray(x)
        raw = codec.device_compress(xd)
        blob = codec.settle(raw, shape, x.dtype)
        region, blocks = C.rate_layout(C.cuszp_dims(shape, dim), dim)
    assert blob.reported_nbytes == raw.nbytes and blob.nbytes > region
    if short_by is None:
        assert blob.reported_nbytes == blocks  # one rate byte per block; the payload's total was never written
    else:
        assert blob.nbytes - blob.reported_nbytes == short_by
    c = codec.compress(x)
    assert len(c.data) == blob.nbytes and c.meta.get("library_nbytes", len(c.data)) == blob.reported_nbytes
    y = codec.decompress(c)  # from the host bytes alone
    want = cuszp_model.reconstruct(x, codec.eb32)
    word = np.uint64 if dtype == np.float64 else np.uint32
    assert np.array_equal(y.view(word), want.view(word))


def test_a_resealed_stream_that_is_not_its_blocks_length_is_refused_before_cuszp_reads_it():
    from perfscout.codecs.framing import seal

    x = _smooth((64, 96, 128), np.float32, seed=2)
    codec = get_codec("cuszp-outlier", "abs", 1e-2)
    c = codec.compress(x)
    for data, match in ((c.data[:-2], "truncated"), (c.data + b"\0" * 8, "longer than its blocks"),
                        (c.data[:100], "shorter than the")):
        forged = type(c)(**{**c.__dict__, "data": data, "meta": {**c.meta, **seal(data)}})  # the CRC passes
        with pytest.raises(CodecError, match=match):
            codec.decompress(forged)


def test_stream_size_matches_the_numpy_size_model_of_the_1d_outlier_format():
    for seed, shape in ((1, (1 << 20,)), (2, (123_457,)), (3, (64, 128, 100))):
        x = _smooth(shape, np.float32, seed)
        for rel in (1e-2, 1e-3, 1e-4):
            codec = get_codec("cuszp-outlier", "abs", rel * float(x.max() - x.min()), dim=1)
            with D.work_stream():
                blob = codec.device_compress(cp.asarray(x))
            assert blob.nbytes == cuszp_model.stream_bytes(x, codec.eb32), (shape, rel)
            rates = cuszp_model.rate_bytes(x, codec.eb32)  # the block-rate section, byte for byte
            assert np.array_equal(cp.asnumpy(blob.buffer[: rates.size]), rates), (shape, rel)
            assert codec.settle(blob, shape, x.dtype).nbytes == blob.nbytes  # extent = report here


def test_host_bytes_roundtrip_through_the_container_and_truncation_is_refused(tmp_path):
    x = _smooth((40, 80, 96), np.float32)
    codec = get_codec("cuszp-plain", "abs", 1e-2)
    c = codec.compress(x)
    y = codec.decompress(c)
    blob = to_bytes(c)
    back, _ = from_bytes(blob)
    again = get_codec("cuszp-plain", back.mode, back.bound).decompress(back)  # as `perfscout decompress` does
    assert np.array_equal(again.view(np.uint32), y.view(np.uint32))
    cut = type(c)(**{**c.__dict__, "data": c.data[:-1]})
    with pytest.raises(CodecError, match="truncated"):
        codec.decompress(cut)
    flipped = bytearray(c.data)
    flipped[len(flipped) // 2] ^= 0xFF
    with pytest.raises(CodecError, match="CRC"):
        codec.decompress(type(c)(**{**c.__dict__, "data": bytes(flipped)}))
    with pytest.raises(CodecError, match="meta"):
        codec.decompress(type(c)(**{**c.__dict__, "meta": {k: v for k, v in c.meta.items() if k != "dim"}}))


def test_a_library_recorded_for_another_architecture_is_unavailable(tmp_path, monkeypatch):
    path, _ = C.locate()
    copy = tmp_path / "libcuSZp.so"
    shutil.copy(path, copy)
    copy.with_name("libcuSZp.so.json").write_text(json.dumps({"cuda_architectures": "70-real;75-real"}))
    monkeypatch.setenv(C.ENV_VAR, str(copy))
    ok, reason = C.CuSZpCodec.availability()
    assert not ok
    assert "70-real;75-real" in reason and "CUSZP_ARCH=" in reason


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dim,shape", [(1, (50_001,)), (2, (70, 332)), (3, (20, 30, 44))])
def test_decoded_values_equal_the_numpy_reconstruction_reference(dtype, dim, shape):
    """cuSZp's output, bit for bit, is cuszp_model.reconstruct (q * eb * 2 in the data's precision)."""
    x = _smooth(shape, dtype, seed=11)
    x.reshape(-1)[::7] = 0.0  # all-zero blocks too: cuSZp leaves them unwritten
    x.reshape(-1)[: x.size // 3] = 0.0
    for encoding in ("fixed", "plain", "outlier"):
        codec = get_codec("cuszp", "abs", 1e-3 * float(x.max() - x.min()), encoding=encoding, dim=dim)
        y = codec.decompress(codec.compress(x))
        want = cuszp_model.reconstruct(x, codec.eb32)
        word = np.uint64 if dtype == np.float64 else np.uint32
        assert np.array_equal(y.view(word), want.view(word)), (encoding, int((y != want).sum()))


def _rounding_victims(n: int, eb: float, seed: int) -> np.ndarray:
    """float32 values whose cuSZp reconstruction (the NumPy reference) is beyond ``eb``."""
    rng = np.random.default_rng(seed)
    found = []
    while sum(map(len, found)) < n:
        cand = rng.uniform(0, 100, 1 << 20).astype(np.float32)
        err = np.abs(cuszp_model.reconstruct(cand, eb).astype(np.float64) - cand.astype(np.float64))
        found.append(cand[err > eb])
    return np.concatenate(found)[:n]


def test_float32_rounding_beyond_the_bound_is_a_finding_and_szp_gpu_holds_it():
    eb = 1e-2
    victims = _rounding_victims(500, eb, seed=7)
    x = _smooth((1 << 18,), np.float32, seed=3) + np.float32(50)
    x[:: (x.size // victims.size)][: victims.size] = victims  # planted where the reference says cuSZp errs
    expect = int((np.abs(cuszp_model.reconstruct(x, eb).astype(np.float64) - x.astype(np.float64)) > eb).sum())
    assert expect >= victims.size
    ev = evaluate_full(x, "cuszp-outlier", "abs", eb, device="cuda", repeats=2)
    r = ev.result
    assert r.status in ("bound_violated", "bound_overshoot"), r.error
    assert r.bound_ok is False and ev.check is not None and ev.check.n_beyond == expect
    assert "worst excess" in r.error and "gpu_detail=" in r.error and r.max_abs_err > eb
    held = evaluate_full(x, "szp-gpu", "abs", eb, device="cuda", repeats=2).result
    assert held.status == "ok" and held.bound_ok is True and held.max_abs_err <= eb, held.error


def test_gpu_evaluation_record_and_detail():
    from perfscout.analysis.report.gpu import parse_detail

    x = _smooth((64, 128, 128), np.float32)
    ev = evaluate_full(x, "cuszp", "rel", 1e-3, device="cuda", repeats=3)
    r = ev.result
    assert r.device == "cuda" and r.device_name and r.status in ("ok", "bound_overshoot", "bound_violated")
    assert r.abs_bound == pytest.approx(1e-3 * float(x.max() - x.min()))
    d = parse_detail(r.error)
    assert d and d["copy_GBps"] > 0 and d["host_roundtrip_identical"] is True
    assert d["library_nbytes"] == d["host_nbytes"] == ev.compressed.nbytes
    assert r.ratio == pytest.approx(x.nbytes / d["library_nbytes"])
    assert r.compress_s > 0 and r.decompress_s > 0 and r.h2d_s > 0 and r.d2h_s > 0


def test_cli_saves_the_stream_and_decompresses_it_again(tmp_path):
    """`perfscout eval --save-compressed` on the GPU, then `perfscout decompress` from the file."""
    import subprocess

    saved, raw = tmp_path / "c.psz", tmp_path / "c.raw"
    p = subprocess.run([sys.executable, "-m", "perfscout", "eval", "--synthetic", "smooth:16,64,64", "--codec",
                        "cuszp-plain", "--mode", "rel", "--bound", "1e-3", "--device", "cuda", "--json",
                        "--save-compressed", str(saved)], check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1) and saved.is_file(), p.stderr[-2000:]  # 1: measured, bound not held
    rec = json.loads(p.stdout)
    assert rec["device"] == "cuda" and rec["codec"] == "cuszp-plain"
    p = subprocess.run([sys.executable, "-m", "perfscout", "decompress", str(saved), "--out", str(raw)],
                       check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    back, _ = from_bytes(saved.read_bytes())
    y = get_codec("cuszp-plain", back.mode, back.bound).decompress(back)
    assert np.array_equal(np.fromfile(raw, dtype="<f4").reshape(y.shape).view(np.uint32), y.view(np.uint32))
    assert rec["ratio"] == pytest.approx(y.nbytes / len(back.data))


@pytest.mark.parametrize("encoding", ["fixed", "plain", "outlier"])
@pytest.mark.parametrize("dim,shape", [(1, (70_001,)), (2, (96, 200)), (3, (24, 32, 40))])
def test_repeated_decodes_into_one_zeroed_target_equal_a_fresh_decode(encoding, dim, shape):
    """The fair timing's premise (issue #29): decodes of one stream into the buffer that
    decode_target zeroed once give the fresh decode, bit for bit, every time; a buffer that
    was not zeroed does not (cuSZp leaves all-zero blocks unwritten), which is why the
    zeroing stays, outside the timed calls."""
    x = _smooth(shape, np.float32, seed=21)
    x.reshape(-1)[: x.size // 2] = 0.0  # all-zero blocks
    codec = get_codec("cuszp", "abs", 1e-3 * float(x.max() - x.min()), encoding=encoding, dim=dim)
    with D.work_stream():
        xd = cp.asarray(x)
        blob = codec.settle(codec.device_compress(xd), shape, xd.dtype)
        meta = codec.stream_meta(xd)
        fresh = codec.device_decompress(blob, shape, xd.dtype, meta)
        target = codec.decode_target(shape, xd.dtype)
        for _ in range(3):
            y = codec.device_decompress(blob, shape, xd.dtype, meta, out=target)
            assert y is target and bool(cp.array_equal(y.view(cp.uint32), fresh.view(cp.uint32)))
        stale = cp.full(shape, 7.0, cp.float32)
        codec.device_decompress(blob, shape, xd.dtype, meta, out=stale)
        assert int((stale == 7.0).sum()) >= x.size // 2 - 64 * 64  # the unwritten blocks kept the stale value
        with pytest.raises(CodecError, match="decode target"):
            codec.device_decompress(blob, shape, xd.dtype, meta, out=cp.zeros(shape, cp.float64))


def test_gpu_evaluation_decodes_into_a_target_zeroed_outside_the_timing():
    from perfscout.analysis.report.gpu import parse_detail

    x = _smooth((32, 128, 128), np.float32)
    x[:8] = 0.0
    ev = evaluate_full(x, "cuszp-plain", "rel", 1e-3, device="cuda", repeats=3)
    d = parse_detail(ev.result.error)
    assert ev.result.status in ("ok", "bound_overshoot") and d["host_roundtrip_identical"] is True
    assert "zeroed once outside the timed decodes" in d["decode_target"]
    assert d["decode_zeroing_s"] > 0 and d["decompress_with_zeroing_s"] > ev.result.decompress_s
