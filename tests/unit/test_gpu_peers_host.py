"""The GPU peers (cuSZp, nvCOMP) on a machine without a GPU: what the registry says and why,
library discovery and loading with real files, the architecture rule, geometry and limits,
options and config round trips, refusal of truncated/corrupt/foreign streams before any GPU
work, the device-side bound check against the CPU one, and the GPU section of the report
rendered from a real results store.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfscout.analysis.report.gpu import (
    format_detail,
    gpu_section,
    parse_detail,
    strip_detail,
)
from perfscout.codecs.base import ALL_MODES, Compressed
from perfscout.codecs.framing import seal
from perfscout.codecs.gpu_peers import cuszp as C
from perfscout.codecs.gpu_peers import nvcomp as N
from perfscout.codecs.registry import (
    codec_ids,
    get_codec,
    info,
    list_codecs,
)
from perfscout.errors import CodecError, CodecUnavailable, InputError
from perfscout.tools import bounds as B
from perfscout.tools import gpu_eval
from perfscout.tools.evaluate import evaluate

ROOT = Path(__file__).resolve().parents[2]
PEERS = ["cuszp", "cuszp-plain", "cuszp-outlier", *sorted(N.ALGORITHMS)]


def _has_gpu() -> bool:
    from perfscout.codecs.gpu_peers.device import gpu_reason

    return gpu_reason() == ""


no_gpu = pytest.mark.skipif(_has_gpu(), reason="these check the no-GPU answers; this machine has a GPU")


@pytest.fixture(autouse=True)
def _fresh_discovery(monkeypatch, tmp_path):
    """Each test finds the library anew (no cached loads across env changes)."""
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(C.ENV_VAR, raising=False)
    C.load_library.cache_clear()
    yield
    C.load_library.cache_clear()


# -- the registry -------------------------------------------------------------------------
def test_registry_lists_every_peer_as_a_cuda_backend_with_its_modes():
    ids = codec_ids()
    for cid in PEERS:
        assert cid in ids
        i = info(cid)
        assert i.device == "cuda", cid
        assert i.available or i.reason, cid  # unavailable always says why
    assert info("cuszp").modes == ("abs", "rel", "psnr", "ratio")
    assert "lossless" in ALL_MODES
    for cid in N.ALGORITHMS:
        assert info(cid).modes == ("lossless",) and info(cid).family == "lossless"


@no_gpu
def test_unavailable_peers_say_exactly_why(monkeypatch):
    monkeypatch.setenv(C.ENV_VAR, "/nonexistent/libcuSZp.so")
    reasons = {c.id: c.reason for c in list_codecs() if c.id in PEERS}
    assert "PERFSCOUT_CUSZP_LIB=/nonexistent/libcuSZp.so does not name a file" in reasons["cuszp"]
    for cid in N.ALGORITHMS:
        if importlib.util.find_spec("nvidia") and importlib.util.find_spec("nvidia.nvcomp"):
            assert "nvCOMP is installed, but" in reasons[cid] and ("CuPy" in reasons[cid] or "CUDA" in reasons[cid])
        else:
            assert "nvidia.nvcomp is not installed" in reasons[cid] and "perfscout[cuda]" in reasons[cid]
    with pytest.raises(CodecUnavailable, match="does not name a file"):
        get_codec("cuszp", "abs", 1e-3)


def test_library_not_found_lists_where_it_looked(monkeypatch):
    monkeypatch.setattr(C, "_on_linker_path", lambda: None)
    path, why = C.locate()
    assert path is None
    assert "libcuSZp.so not found" in why and "scripts/build_cuszp.sh" in why
    assert str(C.standard_places()[0].parent) in why


def test_the_default_build_prefix_is_found(tmp_path, monkeypatch):
    lib = tmp_path / "home" / "cuszp" / "lib" / "libcuSZp.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"not really")
    assert C.locate() == (str(lib), "")


def test_a_library_that_is_not_cuszp_is_refused(monkeypatch):
    libc = ctypes.util.find_library("c")
    assert libc, "the C library is always there"
    with pytest.raises(CodecError, match="does not export cuSZp_compress"):
        C.load_library(libc)


def test_a_file_that_is_no_shared_library_is_refused(tmp_path, monkeypatch):
    bogus = tmp_path / "libcuSZp.so"
    bogus.write_text("#!/bin/sh\n")
    monkeypatch.setenv(C.ENV_VAR, str(bogus))
    ok, reason = C.CuSZpCodec.availability()
    assert not ok and f"cannot load {bogus}" in reason and "build_cuszp.sh" in reason


@pytest.mark.parametrize("archs,cc,ok", [
    ("90", (9, 0), True), ("90-real", (9, 0), True), ("80", (9, 0), True),  # PTX compiles forward
    ("80-real", (9, 0), False), ("86-real", (8, 9), True), ("89-real", (8, 6), False),
    ("90a", (9, 0), True), ("90a", (10, 0), False), ("100", (9, 0), False),
    ("60;61;62;70;75;80;86", (9, 0), True), ("70-real;75-real", (9, 0), False), ("", (9, 0), False),
    ("80-virtual", (8, 6), True), ("sm_90", (9, 0), True),
])
def test_architecture_rule(archs, cc, ok):
    problem = C.arch_problem(archs, cc)
    assert (problem == "") is ok, problem
    if not ok:
        assert f"CUSZP_ARCH={cc[0]}{cc[1]}" in problem


def test_build_info_is_read_beside_the_library(tmp_path):
    lib = tmp_path / "libcuSZp.so"
    lib.write_bytes(b"x")
    assert C.build_info(str(lib)) is None
    (tmp_path / "libcuSZp.so.json").write_text(json.dumps({"cuda_architectures": "90", "commit": "abc"}))
    assert C.build_info(str(lib))["cuda_architectures"] == "90"
    (tmp_path / "libcuSZp.so.json").write_text("{broken")
    assert C.build_info(str(lib)) is None


# -- geometry and limits -----------------------------------------------------------------
def test_dims_are_fastest_axis_first_and_extra_axes_fold_into_z():
    assert C.cuszp_dims((41, 128, 100), 3) == (100, 128, 41)
    assert C.cuszp_dims((2, 3, 4, 5), 3) == (5, 4, 6)
    assert C.cuszp_dims((512, 256), 2) == (256, 512, 1)
    assert C.cuszp_dims((41, 128, 100), 1) == (41 * 128 * 100, 1, 1)
    with pytest.raises(InputError, match="3-D processing needs an array of at least 3"):
        C.cuszp_dims((512, 512), 3)
    with pytest.raises(InputError, match="use dim=1"):
        C.cuszp_dims((512,), 2)


def test_2d_and_3d_processing_need_rows_of_a_multiple_of_4():
    assert C.default_dim((100, 64)) == 2 and C.default_dim((10, 100, 64)) == 3
    assert C.default_dim((16983, 16983)) == 1 and C.default_dim((9, 70, 33)) == 1 and C.default_dim((5,)) == 1
    with pytest.raises(InputError, match=r"fastest axis \(16983\) is not a multiple of 4"):
        C.CuSZpCodec("abs", 1e-3, dim=2).check_input((16983, 16983), np.dtype(np.float32))
    C.CuSZpCodec("abs", 1e-3).check_input((16983, 16983), np.dtype(np.float32))  # default: 1-D, fine
    with pytest.raises(CodecError, match="not a multiple of 4"):
        C._decode_params({"encoding": "plain", "dim": 3, "eb_f32": 0.5}, (4, 4, 7))


def test_worst_case_covers_the_largest_block_the_format_allows():
    # 1-D: per 32 elements one rate byte + sign word + 32 planes of 4 bytes + 4 outlier bytes
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import cuszp_model

    rng = np.random.default_rng(0)
    x = rng.uniform(-1e6, 1e6, 40_000).astype(np.float32)  # every block near full width
    eb = 1e-3
    model = cuszp_model.stream_bytes(x, eb)
    assert C.worst_case_nbytes(C.cuszp_dims(x.shape, 1), 1) >= model
    assert C.worst_case_nbytes((32768, 1, 1), 1) >= 1024 * (1 + 4 + 128 + 4)
    assert C.block_count((100, 20, 9), 2) == (13 * 3 * 9, 64)
    assert C.block_count((100, 20, 9), 3) == (25 * 5 * 3, 64)


def test_stream_extent_follows_the_block_rate_bytes():
    # 1-D, 40000 elements: two 1024-block chunks of rate bytes; a plain block of 3 planes
    # (4 + 12 bytes), an outlier block of 2 planes with a 2-byte first residual (4 + 2 + 8),
    # an outlier block of 0 planes with a 1-byte one (4 + 1); the rest all-zero (nothing)
    dims1 = C.cuszp_dims((40_000,), 1)
    assert C.rate_layout(dims1, 1) == (2048, 2048)
    s1 = np.zeros(2048 + 16 + 14 + 5, np.uint8)
    s1[:3] = [3, 0x80 | (1 << 5) | 2, 0x80]
    assert C.stream_extent(s1[:2048], dims1, 1) == s1.size and C.extent_problem(s1, (40_000,), 1) == ""
    # 2-D (130, 260): 17 x 33 = 561 blocks, their rate bytes padded to 564; 8-byte units
    dims2 = C.cuszp_dims((130, 260), 2)
    assert C.rate_layout(dims2, 2) == (564, 561)
    s2 = np.zeros(564 + 16 + 20, np.uint8)
    s2[0], s2[5] = 1, 0x80 | (3 << 5) | 1
    assert C.stream_extent(s2[:561], dims2, 2) == s2.size and C.extent_problem(s2, (130, 260), 2) == ""
    assert "truncated: 599 bytes, but its block rates describe 600" in C.extent_problem(s2[:-1], (130, 260), 2)
    assert "longer than its blocks" in C.extent_problem(np.concatenate([s2, s2[:1]]), (130, 260), 2)
    assert "shorter than the 564 block-rate bytes" in C.extent_problem(s2[:100], (130, 260), 2)
    assert C.rate_layout(C.cuszp_dims((5, 7, 12), 3), 3) == (12, 12)


def test_plain_and_fixed_rate_bytes_are_the_plane_count_itself():
    """cuSZp's plain and fixed encodings store the block's bit-plane count as the whole rate
    byte (no outlier flag, no 5-bit field): a 32-plane block is 32 planes, not 0."""
    dims = C.cuszp_dims((40_000,), 1)
    s = np.zeros(2048 + (4 + 4 * 32) + (4 + 4 * 5), np.uint8)
    s[:2] = [32, 5]
    for enc in ("plain", "fixed"):
        assert C.stream_extent(s[:2048], dims, 1, enc) == s.size
        assert C.extent_problem(s, (40_000,), 1, enc) == ""
    assert C.stream_extent(s[:2048], dims, 1, "outlier") == 2048 + 4 + 4 * 5  # 32 & 0x1F = 0 planes there
    assert "longer than its blocks" in C.extent_problem(s, (40_000,), 1, "outlier")


class _FakeCuSZp:
    """Records what the GPU evaluation passes to a backend that needs a prepared output."""

    def __init__(self, target):
        self.target, self.calls = target, []

    def decode_target(self, shape, dtype):
        return self.target

    def stream_meta(self, xd):
        return {}

    def device_decompress(self, blob, shape, dtype, meta, **kw):
        self.calls.append((blob, kw.get("out")))
        return kw.get("out")


def test_gpu_evaluation_prepares_a_zeroed_output_once_per_stream_outside_the_timed_decodes():
    x = np.zeros((4, 8), np.float32)
    run = gpu_eval._PeerRunner(_FakeCuSZp(target="zeroed buffer"))
    warm, timed = object(), object()
    run.decompress(warm, x)  # the warm-up: nothing prepared, the backend zeroes its own output
    assert run.prepare_decode(timed, x) is True
    run.decompress(timed, x)
    run.decompress(timed, x)
    run.decompress(warm, x)  # another stream never gets the buffer prepared for this one
    assert run.codec.calls == [(warm, None), (timed, "zeroed buffer"), (timed, "zeroed buffer"), (warm, None)]
    plain = gpu_eval._PeerRunner(_FakeCuSZp(target=None))  # a backend that needs nothing
    assert plain.prepare_decode(timed, x) is False
    plain.decompress(timed, x)
    assert plain.codec.calls == [(timed, None)]


def test_stream_extent_of_the_numpy_model_is_its_modelled_size():
    """The extent read from rate bytes equals the size model of the 1-D outlier format (which
    tests/gpu/test_cuszp.py checks against cuSZp itself, rate bytes included)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import cuszp_model

    rng = np.random.default_rng(4)
    for n in (1000, 32_768, 100_003):
        x = np.cumsum(rng.standard_normal(n)).astype(np.float32)
        x[n // 2 : n // 2 + 500] = 0.0  # all-zero blocks too
        for eb in (1e-1, 1e-3):
            rates = cuszp_model.rate_bytes(x, eb)
            dims = C.cuszp_dims(x.shape, 1)
            assert rates.size == C.rate_layout(dims, 1)[0]
            assert C.stream_extent(rates, dims, 1) == cuszp_model.stream_bytes(x, eb), (n, eb)


def test_inputs_beyond_cuszp_limits_are_refused_before_the_library():
    codec = C.CuSZpCodec("abs", 1e-3, dim=1)
    with pytest.raises(InputError, match="C ints"):
        codec.check_input((2**31,), np.dtype(np.float32))
    with pytest.raises(InputError, match="float32 and float64"):
        codec.check_input((10,), np.dtype(np.int32))
    with pytest.raises(InputError, match="empty"):
        codec.check_input((0,), np.dtype(np.float32))
    with pytest.raises(InputError, match="3-D processing"):
        C.CuSZpCodec("abs", 1e-3, dim=3).check_input((100, 100), np.dtype(np.float32))


# -- options and configs -----------------------------------------------------------------
def test_cuszp_options_and_config_roundtrip():
    codec = C.CuSZpCodec("abs", 2.5e-3, encoding="plain", dim=2)
    cfg = codec.get_config()
    assert cfg == {"id": "cuszp", "mode": "abs", "bound": 2.5e-3, "encoding": "plain", "dim": 2}
    again = C.CuSZpCodec.from_config(cfg)
    assert (again.encoding, again.dim, again.eb32) == ("plain", 2, float(np.float32(2.5e-3)))
    assert C.CuSZpPlainCodec("abs", 1e-3).encoding == "plain"
    assert C.CuSZpOutlierCodec("abs", 1e-3).encoding == "outlier"
    assert C.CuSZpCodec("abs", 1e-3, encoding="fixed").encoding == "fixed"  # cuSZp's no-delta mode
    with pytest.raises(CodecError, match="encoding must be"):
        C.CuSZpCodec("abs", 1e-3, encoding="aatrox")
    with pytest.raises(CodecError, match="dim must be 1, 2 or 3"):
        C.CuSZpCodec("abs", 1e-3, dim=4)
    with pytest.raises(CodecError, match="unknown option"):
        C.CuSZpPlainCodec("abs", 1e-3, encoding="outlier")
    with pytest.raises(CodecError, match="does not support mode 'rel'"):
        C.CuSZpCodec("rel", 1e-3)
    with pytest.raises(InputError, match="C float"):
        C.CuSZpCodec("abs", 1e-300)
    with pytest.raises(CodecError, match="config is for codec"):
        C.CuSZpCodec.from_config({"id": "zfp", "mode": "abs", "bound": 1.0})


def test_nvcomp_options_and_config_roundtrip():
    codec = N.NvcompLZ4Codec("lossless", 1.0, chunk_size=1 << 17, data_type="<u4")
    cfg = codec.get_config()
    assert cfg == {"id": "nvcomp-lz4", "mode": "lossless", "bound": 1.0, "chunk_size": 1 << 17, "data_type": "<u4"}
    assert N.NvcompLZ4Codec.from_config(cfg).options == codec.options
    assert N.NvcompDeflateCodec("lossless", 1.0, algorithm_type=5).options["algorithm_type"] == 5
    with pytest.raises(CodecError, match="chunk_size"):
        N.NvcompZstdCodec("lossless", 1.0, chunk_size=1000.5)
    with pytest.raises(CodecError, match="no data_type option"):
        N.NvcompZstdCodec("lossless", 1.0, data_type="<f4")
    with pytest.raises(CodecError, match="data_type must be"):
        N.NvcompBitcompCodec("lossless", 1.0, data_type="float")
    with pytest.raises(CodecError, match="algorithm_type must be in 0..1"):
        N.NvcompBitcompCodec("lossless", 1.0, algorithm_type=3)
    with pytest.raises(CodecError, match="no algorithm_type option"):
        N.NvcompANSCodec("lossless", 1.0, algorithm_type=1)
    with pytest.raises(CodecError, match="does not support mode 'abs'"):
        N.NvcompANSCodec("abs", 1e-3)


def test_wire_types_follow_what_each_algorithm_takes():
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    assert [N.wire_dtype(a, f32) for a in ("Bitcomp", "ANS", "Cascaded", "Zstd")] == ["<f4", "<f4", "<u4", "|u1"]
    assert [N.wire_dtype(a, f64) for a in ("Bitcomp", "ANS", "Cascaded", "LZ4")] == ["<f8", "|u1", "<u8", "|u1"]


# -- streams are checked before any GPU work -------------------------------------------------
def _cuszp_stream(data: bytes, **meta) -> Compressed:
    m = {"encoding": "outlier", "dim": 1, "eb_f32": float(np.float32(1e-3)), **seal(data), **meta}
    return Compressed(data=data, shape=(1000,), dtype="float32", codec_id="cuszp", mode="abs", bound=1e-3, meta=m)


def test_truncated_corrupt_and_foreign_streams_are_refused_without_a_gpu():
    codec = C.CuSZpCodec("abs", 1e-3)
    good = _cuszp_stream(b"\x01" * 300)
    with pytest.raises(CodecError, match="truncated"):
        codec.decompress_device(Compressed(**{**good.__dict__, "data": good.data[:-1]}))
    with pytest.raises(CodecError, match="trailing bytes"):
        codec.decompress_device(Compressed(**{**good.__dict__, "data": good.data + b"\0"}))
    with pytest.raises(CodecError, match="CRC-32"):
        codec.decompress_device(Compressed(**{**good.__dict__, "data": b"\x02" + good.data[1:]}))
    with pytest.raises(CodecError, match="no checksum"):
        codec.decompress_device(Compressed(**{**good.__dict__, "meta": {"dim": 1}}))
    with pytest.raises(CodecError, match="written by 'zfp'"):
        codec.decompress_device(Compressed(**{**good.__dict__, "codec_id": "zfp"}))
    with pytest.raises(CodecError, match="stream was written by"):
        N.NvcompZstdCodec().decompress_device(Compressed(**good.__dict__))


@pytest.mark.parametrize("meta,match", [({"dim": None}, "lacks"), ({"encoding": "aatrox"}, "invalid"),
                                        ({"eb_f32": 1e-3}, "not a float32"), ({"dim": 3}, "3-D processing for a 1-D")])
def test_stream_meta_is_validated(meta, match):
    m = {"encoding": "outlier", "dim": 1, "eb_f32": float(np.float32(1e-3)), **meta}
    if m["dim"] is None:
        del m["dim"]
    with pytest.raises(CodecError, match=match):
        C._decode_params(m, (1000,))


# -- evaluation and the CLI without a GPU ----------------------------------------------------
@no_gpu
def test_evaluate_on_cuda_records_gpu_unavailable_with_the_reason(monkeypatch):
    monkeypatch.setenv(C.ENV_VAR, "/nonexistent/libcuSZp.so")
    x = np.linspace(0, 1, 4096, dtype=np.float32).reshape(64, 64)
    r = evaluate(x, "cuszp", "rel", 1e-3, device="cuda")
    # the reason names the library (the codec child may have started before the variable was set)
    assert r.status == "gpu_unavailable" and "libcuSZp.so" in r.error
    r = evaluate(x, "nvcomp-zstd", "lossless", 1.0, device="cuda")
    assert r.status == "gpu_unavailable" and "nvcomp" in r.error.lower()


def test_cli_refuses_a_gpu_peer_on_the_cpu_and_a_lossless_mode_for_a_lossy_codec(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "perfscout", "eval", "--synthetic", "smooth:16,16", *args],
                              check=False, capture_output=True, text=True, timeout=120, cwd=tmp_path)

    p = run("--codec", "sz3", "--mode", "lossless", "--bound", "1")
    assert p.returncode == 2 and "lossless" in p.stderr and "Traceback" not in p.stderr
    if not _has_gpu():
        p = run("--codec", "nvcomp-zstd", "--mode", "lossless", "--bound", "1", "--device", "cpu")
        assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr


def test_gpu_eval_routing():
    from perfscout.codecs.registry import _load

    assert gpu_eval.runs_on_device(_load("cuszp"), "rel", {})
    assert gpu_eval.runs_on_device(_load("nvcomp-ans"), "lossless", {})
    assert not gpu_eval.runs_on_device(_load("cuszp"), "psnr", {})  # searches take evaluate()'s host path
    assert not gpu_eval.runs_on_device(_load("zfp"), "abs", {})
    assert not gpu_eval.runs_on_device(_load("szp-gpu"), "abs", {"device": "cpu"})


# -- the device-side bound check, against the CPU check ----------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(6))
def test_device_bound_check_agrees_with_verify_bound(dtype, seed, monkeypatch):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((40, 33)) * 10 ** rng.uniform(-3, 3)).astype(dtype)
    eb = float(np.abs(x).max()) * 10 ** rng.uniform(-6, -2)
    y = (x + rng.uniform(-1.0, 1.0, x.shape) * eb * rng.choice([0.999, 1.0, 1.0000001, 1.5])).astype(dtype)
    y.reshape(-1)[rng.integers(0, x.size)] += dtype(eb * 0.5)
    monkeypatch.setattr(gpu_eval, "CANDIDATE_BATCH", 7)  # batches of candidates add up like one pass
    a, b = gpu_eval.verify_on_device(x, y, eb), B.verify_bound(x, y, abs_bound=eb)
    assert (a.status, a.bound_ok, a.n_beyond, a.n_violations) == (b.status, b.bound_ok, b.n_beyond, b.n_violations)
    assert a.max_abs_err == b.max_abs_err and a.max_abs_err_index == b.max_abs_err_index
    if b.n_beyond:
        assert a.worst_index == b.worst_index and a.worst_excess == pytest.approx(b.worst_excess)
        assert "worst excess" in a.message and "of the bound" in a.message


def test_lossless_check_is_bit_for_bit():
    x = np.array([1.0, -0.0, np.nan, 3.0], dtype=np.float32)
    assert gpu_eval.verify_lossless(x, x.copy()).status == "ok"
    y = x.copy()
    y[1] = 0.0  # -0.0 -> +0.0: equal as numbers, not as bits
    c = gpu_eval.verify_lossless(x, y)
    assert c.status == "bound_violated" and c.n_beyond == 1 and c.worst_index == (1,)
    z = x.copy()
    z.view(np.uint32)[2] ^= 1  # another NaN payload
    assert gpu_eval.verify_lossless(x, z).n_beyond == 1


# -- the report's GPU section ----------------------------------------------------------------
def _record(task, codec, status, detail, **kw):
    from perfscout.state.records import CompressionResult

    base = {"task_key": task, "dataset": "f", "shape": "1024", "dtype": "f32", "nbytes": 4096, "codec": codec,
            "device": "cuda", "device_name": "NVIDIA H200", "mode": "rel", "bound": 1e-3, "abs_bound": 1e-3,
            "compress_s": 1e-6, "decompress_s": 5e-7, "h2d_s": 1e-6, "d2h_s": 1e-6, "ratio": 4.0,
            "max_abs_err": 9e-4, "bound_ok": status == "ok", "status": status, "repeats": 3}
    base.update(kw)
    msg = detail.pop("_message", "")
    base["error"] = "; ".join(m for m in (msg, format_detail(detail)) if m)
    return CompressionResult(**base)


def test_detail_note_roundtrip_and_stripping():
    note = format_detail({"copy_GBps": 4200.0, "x": math.inf, "worst": {"index": [1, 2]}})
    text = "bound_overshoot: 3 element(s) exceed; " + note
    assert parse_detail(text) == {"copy_GBps": 4200.0, "x": None, "worst": {"index": [1, 2]}}
    assert strip_detail(text) == "bound_overshoot: 3 element(s) exceed"
    assert parse_detail("no detail here") is None and parse_detail(None) is None
    assert parse_detail("gpu_detail={broken") is None


def test_report_renders_the_gpu_section_from_a_real_store(tmp_path):
    from perfscout.sweep.api import report as write_sweep_report
    from perfscout.tools.results_store import STORE_NAME, ResultStore

    recs = [
        _record("t-ok", "szp-gpu", "ok", {"copy_GBps": 4096.0, "n_beyond": 0, "n_violations": 0,
                                          "phases_s": {"upload": 0.9, "metrics": 0.25, "verify": 0.1}}),
        _record("t-bad", "cuszp-outlier", "bound_overshoot",
                {"_message": "bound_overshoot: 12 element(s) exceed the abs bound 0.001, all within float rounding",
                 "copy_GBps": 4000.0, "n_beyond": 12, "n_violations": 0,
                 "worst": {"index": [517], "excess": 7.5e-8, "excess_over_bound": 7.5e-5}}, max_abs_err=1.000075e-3),
        _record("t-ll", "nvcomp-zstd", "ok", {"copy_GBps": 4100.0}, mode="lossless", bound=1.0, abs_bound=0.0,
                max_abs_err=0.0),
        _record("t-cpu", "sz3", "ok", {}, device="cpu"),
    ]
    with ResultStore(tmp_path / STORE_NAME) as store:
        store.set_meta("run_id", "r1")
        for r in recs:
            store.put_result(r)
    section = gpu_section(ResultStore(tmp_path / STORE_NAME).results())
    assert len(section.throughput) == 3  # the CPU row is not a GPU row
    ok = section.throughput.set_index("task").loc["t-ok"]
    assert ok["compress GB/s"] == pytest.approx(4096 / 1e-6 / 1e9) and ok["× copy"] == pytest.approx(4.096 / 4096)
    assert ok["eval s"] == pytest.approx(1.25)  # the evaluation's own phases, summed
    assert math.isnan(section.throughput.set_index("task").loc["t-ll", "eval s"])  # a record without them
    v = section.verdicts.set_index("task")
    assert v.loc["t-bad", "verdict"].startswith("OVERSHOOT") and v.loc["t-bad", "worst index"] == "517"
    assert v.loc["t-bad", "excess / bound"] == pytest.approx(7.5e-5) and v.loc["t-ll", "verdict"] == "bit-exact"
    assert len(section.findings) == 1 and "12 element(s)" in section.findings[0] and "t-bad" in section.findings[0]
    assert "2 of 3 held" in section.intro[2]
    write_sweep_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "## GPU" in md and "### Bound verdicts" in md and "OVERSHOOT (float rounding)" in md
    html = (tmp_path / "report.html").read_text()
    assert "<h2>GPU</h2>" in html and "gpu_detail=" not in html.split("<h2>GPU</h2>")[1].split("<h2>")[0]


def test_gpu_sweep_spec_is_valid_and_expands(tmp_path):
    from perfscout.sweep.spec import expand, load_spec

    spec = load_spec(ROOT / "examples" / "sweep_gpu.yaml")
    assert [e.name for e in spec.experiments] == ["gpu_lossy", "gpu_lossless", "cpu_reference"]
    # the tiled files are made by benchmarks/gpu_peers.py tile; here: the same spec on small copies
    doc = (ROOT / "examples" / "sweep_gpu.yaml").read_text()
    data = tmp_path / "runs" / "gpu_data"
    data.mkdir(parents=True)
    for line in doc.splitlines():
        if "path: ../runs/gpu_data/" in line:
            name = line.split("gpu_data/")[1].split(",")[0]
            shape = [int(s) for s in line.split("shape: [")[1].split("]")[0].split(",")]
            doc = doc.replace(line, line.replace(f"shape: {line.split('shape: ')[1].split(']')[0]}]",
                                                 f"shape: [{shape[0]}, 4]"))
            np.zeros((shape[0], 4), np.float32).tofile(data / name)
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "sweep_gpu.yaml").write_text(doc.replace("{name: ", "{synthetic: \"smooth:8,8\", label: "))
    tasks, _ = expand(load_spec(tmp_path / "examples" / "sweep_gpu.yaml"))
    by = {}
    for t in tasks:
        by.setdefault((t.device, t.codec), set()).add(t.mode)
    assert by[("cuda", "cuszp-outlier")] == {"rel"} and by[("cuda", "nvcomp-ans")] == {"lossless"}
    assert by[("cpu", "sz3")] == {"rel"} and ("cuda", "szp-gpu") in by


def test_build_script_refuses_bad_input_clearly(tmp_path):
    script = ROOT / "scripts" / "build_cuszp.sh"
    p = subprocess.run(["bash", str(script), str(tmp_path / "nope")], check=False, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "does not exist" in p.stderr
    p = subprocess.run(["bash", str(script), str(tmp_path)], check=False, capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "not a cuSZp checkout" in p.stderr
    fake = tmp_path / "src"
    (fake / "include").mkdir(parents=True)
    (fake / "CMakeLists.txt").write_text("project(x)\n")
    (fake / "include" / "cuSZp.h").write_text("\n")
    p = subprocess.run(["bash", str(script), str(fake), str(tmp_path / "out")], check=False, capture_output=True,
                       text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "CUSZP_ARCH": "9.0"})
    assert p.returncode == 2 and ("bad architecture list" in p.stderr or "cmake is not on PATH" in p.stderr
                                  or "nvcc not found" in p.stderr)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("nvcc") is None,
                    reason="building cuSZp needs cmake and nvcc (the CUDA toolkit)")
def test_build_script_builds_a_loadable_library_from_a_cuszp_checkout(tmp_path, monkeypatch):
    src = Path(__import__("os").environ.get("PERFSCOUT_CUSZP_SRC", ROOT / ".device" / "gpu_peers" / "cuSZp"))
    if not (src / "include" / "cuSZp.h").is_file():
        pytest.skip(f"no cuSZp checkout at {src} (set PERFSCOUT_CUSZP_SRC; github.com/szcompressor/cuSZp)")
    p = subprocess.run(["bash", str(ROOT / "scripts" / "build_cuszp.sh"), str(src), str(tmp_path / "cz")],
                       check=False, capture_output=True, text=True, timeout=900, env={**__import__("os").environ, "CUSZP_ARCH": "90"})
    assert p.returncode == 0, p.stderr[-2000:]
    lib = tmp_path / "cz" / "lib" / "libcuSZp.so"
    assert json.loads((tmp_path / "cz" / "lib" / "libcuSZp.so.json").read_text())["cuda_architectures"] == "90"
    C.load_library(str(lib))  # loads, and exports the C API
    monkeypatch.setenv(C.ENV_VAR, str(lib))
    ok, reason = C.CuSZpCodec.availability()
    assert ok or "loads, but" in reason
