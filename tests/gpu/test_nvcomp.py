"""nvCOMP's lossless codecs on the GPU through perfscout: bit-exact round trips (NaN payloads
and signed zeros too) for every algorithm and both dtypes, their options, host-byte round
trips and truncation, and the GPU evaluation in ``lossless`` mode.

Needs a CUDA device, CuPy and nvidia-nvcomp-cu13 (the [cuda] extra); skips with the
registry's reason otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

from perfscout.codecs.registry import get_codec, info
from perfscout.errors import CodecError
from perfscout.tools.evaluate import evaluate_full

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy", reason="CuPy is needed for the GPU tests")
_avail = info("nvcomp-zstd")
if not _avail.available:
    pytest.skip(f"nvCOMP is unavailable here: {_avail.reason}", allow_module_level=True)

from perfscout.codecs.gpu_peers.nvcomp import ALGORITHMS

IDS = sorted(ALGORITHMS)


def _field(n: int, dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.standard_normal(n)).astype(dtype)
    x[::97] = 0.0
    return x


@pytest.mark.parametrize("codec_id", IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bit_exact_roundtrip(codec_id, dtype):
    x = _field(300_001, dtype).reshape(-1)
    specials = np.array([np.nan, -0.0, np.inf, -np.inf], dtype=dtype)
    specials = np.concatenate([specials, np.frombuffer(
        (np.array([0x7FC00001], np.uint32) if dtype == np.float32 else np.array([0x7FF8000000000001], np.uint64))
        .tobytes(), dtype)])
    x[: specials.size] = specials  # NaN payloads and signed zeros must come back bit for bit
    codec = get_codec(codec_id, "lossless", 1.0)
    c = codec.compress(x)
    y = codec.decompress(c)
    word = np.uint64 if dtype == np.float64 else np.uint32
    assert np.array_equal(x.view(word), y.view(word))
    assert c.meta["stream_nbytes"] == len(c.data) and c.abs_bound == 0.0


@pytest.mark.parametrize("codec_id,options", [("nvcomp-lz4", {"chunk_size": 1 << 17}),
                                              ("nvcomp-deflate", {"algorithm_type": 0}),
                                              ("nvcomp-bitcomp", {"algorithm_type": 1}),
                                              ("nvcomp-ans", {"data_type": "|u1"}),
                                              ("nvcomp-cascaded", {"data_type": "<u4"})])
def test_options_reach_nvcomp(codec_id, options):
    x = _field(200_000, np.float32, seed=3).reshape(400, 500)
    codec = get_codec(codec_id, "lossless", 1.0, **options)
    c = codec.compress(x)
    assert np.array_equal(codec.decompress(c).view(np.uint32), x.view(np.uint32))


def test_truncated_and_corrupt_streams_are_refused():
    x = _field(100_000, np.float32)
    codec = get_codec("nvcomp-zstd", "lossless", 1.0)
    c = codec.compress(x)
    with pytest.raises(CodecError, match="truncated"):
        codec.decompress(type(c)(**{**c.__dict__, "data": c.data[:-10]}))
    bad = bytearray(c.data)
    bad[len(bad) // 2] ^= 0x55
    with pytest.raises(CodecError, match="CRC"):
        codec.decompress(type(c)(**{**c.__dict__, "data": bytes(bad)}))


@pytest.mark.parametrize("codec_id", ["nvcomp-ans", "nvcomp-bitcomp", "nvcomp-zstd"])
def test_gpu_evaluation_in_lossless_mode(codec_id):
    from perfscout.analysis.report.gpu import parse_detail

    x = _field(1 << 20, np.float32).reshape(256, 4096)
    ev = evaluate_full(x, codec_id, "lossless", 1.0, device="cuda", repeats=3)
    r = ev.result
    assert r.status == "ok" and r.bound_ok is True and r.max_abs_err == 0.0 and r.abs_bound == 0.0
    d = parse_detail(r.error)
    assert d["host_roundtrip_identical"] is True and d["library_nbytes"] == len(ev.compressed.data)
    assert r.ratio == pytest.approx(x.nbytes / d["library_nbytes"]) and d["copy_GBps"] > 0


def test_cli_saves_the_stream_and_decompresses_it_bit_exact(tmp_path):
    import subprocess
    import sys

    from perfscout.datasets import synthetic

    saved, raw = tmp_path / "c.psz", tmp_path / "c.raw"
    p = subprocess.run([sys.executable, "-m", "perfscout", "eval", "--synthetic", "smooth:16,64,64", "--codec",
                        "nvcomp-bitcomp", "--mode", "lossless", "--bound", "1", "--device", "cuda", "--json",
                        "--save-compressed", str(saved)], check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    p = subprocess.run([sys.executable, "-m", "perfscout", "decompress", str(saved), "--out", str(raw)],
                       check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    x = synthetic("smooth", (16, 64, 64)).array
    assert np.array_equal(np.fromfile(raw, dtype="<f4").view(np.uint32), x.reshape(-1).view(np.uint32))
