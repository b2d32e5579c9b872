"""perfscout's codecs as numcodecs codecs: config round-trips, self-describing chunks,
rel resolved at configuration time, errors that say what to do, entry-point discovery."""

from __future__ import annotations

import json
import subprocess
import sys

import numcodecs
import numpy as np
import pytest

from perfscout.codecs.framing import from_bytes
from perfscout.codecs.numcodecs import CODECS, SZ2, SZ3, SZP, ZFP, numcodecs_codec
from perfscout.errors import CodecError
from perfscout.tools.bounds import verify_bound

RNG = np.random.default_rng(21)
SMOOTH = np.cumsum(RNG.standard_normal((24, 40, 30)), axis=0).astype(np.float32)

#: (codec class, mode, bound) in every native mode each backend has (rel resolved below).
NATIVE = [
    (SZ3, "abs", 1e-2), (SZ2, "abs", 1e-2), (SZ2, "pw_rel", 1e-2), (CODECS[2], "abs", 1e-2),
    (ZFP, "abs", 1e-2), (ZFP, "fixed_rate", 12), (SZP, "abs", 1e-2),
]


@pytest.mark.parametrize("cls, mode, bound", NATIVE, ids=lambda v: getattr(v, "codec_id", str(v)))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_encode_decode_holds_the_bound_and_config_round_trips(cls, mode, bound, dtype) -> None:
    data = SMOOTH.astype(dtype)
    codec = cls(mode, bound)
    chunk = codec.encode(data)
    assert isinstance(chunk, bytes) and len(chunk) < data.nbytes
    out = codec.decode(chunk)
    assert out.shape == data.shape and out.dtype == data.dtype
    check = verify_bound(data, out, abs_bound=bound if mode == "abs" else None,
                         pw_rel_bound=bound if mode == "pw_rel" else None)
    assert check.bound_ok in (True, None), check.message
    # numcodecs' own registry rebuilds an equal codec from the config (and its JSON).
    config = json.loads(json.dumps(codec.get_config()))
    again = numcodecs.get_codec(config)
    assert type(again) is cls and again == codec and again.get_config() == codec.get_config()
    np.testing.assert_array_equal(again.decode(chunk), out)


def test_chunk_header_is_self_describing() -> None:
    chunk = SZ3("abs", 1e-3).encode(SMOOTH)
    compressed, sections = from_bytes(chunk)
    assert (compressed.codec_id, compressed.mode, compressed.bound) == ("sz3", "abs", 1e-3)
    assert compressed.shape == SMOOTH.shape and compressed.dtype == "float32" and not sections
    # A codec configured differently still decodes it: the chunk says how it was made.
    np.testing.assert_array_equal(SZ3("abs", 0.5).decode(chunk), SZ3("abs", 1e-3).decode(chunk))


def test_rel_is_resolved_to_abs_at_configuration_and_stated_in_the_config() -> None:
    r = float(SMOOTH.max() - SMOOTH.min())
    codec = SZ3("rel", 1e-3, value_range=r)
    cfg = codec.get_config()
    assert cfg["mode"] == "abs" and cfg["bound"] == pytest.approx(1e-3 * r)
    assert cfg["rel_bound"] == 1e-3 and cfg["value_range"] == r
    assert numcodecs.get_codec(cfg) == codec
    # Every chunk is held to the whole field's bound, whatever its own range.
    half = SMOOTH[:4]  # a chunk with a much smaller range than the field
    out = codec.decode(codec.encode(half))
    assert verify_bound(half, out, abs_bound=1e-3 * r).bound_ok
    with pytest.raises(CodecError, match="value_range"):
        SZ3("rel", 1e-3)
    with pytest.raises(CodecError, match="not rel_bound"):
        SZ3("abs", 1.0, rel_bound=1e-3, value_range=r)
    with pytest.raises(CodecError, match="means nothing alone"):
        SZ3("abs", 1.0, value_range=r)


@pytest.mark.parametrize("mode", ["psnr", "ratio"])
def test_searched_modes_are_refused_with_the_way_out(mode) -> None:
    with pytest.raises(CodecError, match="perfscout export"):
        SZ3(mode, 60)


@pytest.mark.parametrize("config, needle", [
    ({"mode": "pw_rel", "bound": 1e-2}, "does not support mode"),  # sz3 has no native pw_rel
    ({"mode": "abs", "bound": -1.0}, "positive"),
    ({"mode": "abs", "bound": float("nan")}, "positive"),
    ({"mode": "abs", "bound": 1e-3, "algorithm": "nope"}, "unknown algorithm"),
    ({"mode": "abs", "bound": 1e-3, "nonfinite": "drop"}, "nonfinite"),
    ({"mode": "abs", "bound": 1e-3, "colour": 3}, "unknown option"),
    ({"mode": "abs", "bound": "tiny"}, "must be numbers"),
    ({"mode": "rel", "bound": 1e-3, "value_range": [1, 2]}, "must be numbers"),
])
def test_bad_configs_fail_at_set_up_with_a_message(config, needle) -> None:
    with pytest.raises(CodecError, match=needle):
        SZ3.from_config(config)


def test_bytes_and_integers_are_refused_with_what_to_pass() -> None:
    codec = ZFP("abs", 1e-3)
    for bad in (SMOOTH.tobytes(), np.arange(10), np.zeros((0, 3), np.float32)):
        with pytest.raises(CodecError, match="float32/float64|non-empty"):
            codec.encode(bad)
    # a typed buffer is fine: it carries its dtype
    out = codec.decode(codec.encode(memoryview(SMOOTH.reshape(-1))))
    assert out.shape == (SMOOTH.size,)


def test_big_endian_input_and_out_buffer() -> None:
    codec = SZ3("abs", 1e-3)
    big = SMOOTH.astype(">f4")
    out = np.empty(SMOOTH.shape, np.float32)
    codec.decode(codec.encode(big), out=out)
    assert verify_bound(SMOOTH, out, abs_bound=1e-3).bound_ok


def test_nonfinite_refused_by_default_and_restored_bit_for_bit_on_passthrough() -> None:
    data = SMOOTH.copy()
    data[0, 0, :3] = [np.nan, np.inf, -np.inf]
    data[5:7] = np.nan  # whole planes masked, as land in an ocean field
    with pytest.raises(CodecError, match="non-finite.*passthrough"):
        SZ3("abs", 1e-3).encode(data)
    codec = SZ3("abs", 1e-3, nonfinite="passthrough")
    out = codec.decode(codec.encode(data))
    bad = ~np.isfinite(data)
    assert np.array_equal(out[bad].view(np.uint32), data[bad].view(np.uint32))
    assert np.abs(out[~bad].astype(np.float64) - data[~bad]).max() <= 1e-3 * (1 + 1e-6)
    all_nan = np.full((8, 8), np.nan, np.float32)
    assert np.isnan(codec.decode(codec.encode(all_nan))).all()


def test_corrupt_truncated_and_foreign_chunks_are_refused() -> None:
    chunk = SZ3("abs", 1e-3).encode(SMOOTH)
    flipped = bytearray(chunk)
    flipped[len(chunk) // 2] ^= 0xFF
    for bad, needle in ((bytes(flipped), "corrupt"), (chunk[:-10], "corrupt|truncated"),
                        (b"not a chunk at all", "magic|truncated")):
        with pytest.raises(CodecError, match=needle):
            SZ3("abs", 1e-3).decode(bad)
    with pytest.raises(CodecError, match="written by perfscout codec 'sz3'"):
        ZFP("abs", 1e-3).decode(chunk)


def test_a_chunk_that_breaks_the_bound_is_refused_not_written() -> None:
    # zfp's accuracy mode can miss its tolerance on values spanning many decades (DESIGN.md).
    data = (10.0 ** RNG.uniform(-30, 30, size=4096)).astype(np.float64) * RNG.choice([-1, 1], 4096)
    codec = ZFP("abs", 1e-12)
    decoded = codec._codec.decompress(codec._codec.compress(data))
    broken = not verify_bound(data, decoded, abs_bound=1e-12).bound_ok
    if not broken:
        pytest.skip("this zfp build held the tolerance on the planted data")
    with pytest.raises(CodecError, match="bound_violated"):
        codec.encode(data)
    ZFP("abs", 1e-12, verify=False).encode(data)  # opting out writes it


def test_numcodecs_codec_helper_names_the_backends() -> None:
    assert type(numcodecs_codec("szp-gpu", "abs", 1e-3)) is SZP
    with pytest.raises(CodecError, match="no numcodecs codec"):
        numcodecs_codec("lz4", "abs", 1e-3)


def test_entry_points_find_the_codecs_without_importing_perfscout() -> None:
    code = ("import sys, numcodecs, numpy as np\n"
            "assert not [m for m in sys.modules if m.startswith('perfscout')]\n"
            "c = numcodecs.get_codec({'id': 'perfscout.zfp', 'mode': 'abs', 'bound': 0.01})\n"
            "x = np.linspace(0, 1, 1000, dtype='f4')\n"
            "print(type(c).__module__, float(abs(c.decode(c.encode(x)) - x).max()))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    module, err = proc.stdout.split()
    assert module == "perfscout.codecs.numcodecs" and float(err) <= 0.01


from hypothesis import given, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402


@given(
    data=hnp.arrays(dtype=st.sampled_from([np.float32, np.float64]),
                    shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=9),
                    elements=st.floats(-1e6, 1e6, allow_nan=False, width=32)),
    which=st.sampled_from(["sz3", "sz3-h5", "zfp", "szp-gpu", "sz2"]),
    bound=st.sampled_from([1e-4, 1e-2, 1.0]),
)
def test_any_shape_and_dtype_round_trips_within_the_bound_or_refuses_clearly(data, which, bound) -> None:
    codec = numcodecs_codec(which, "abs", bound)
    try:
        chunk = codec.encode(data)
    except CodecError as exc:  # a documented refusal (e.g. SZ2 on exactly 20 values), never a crash
        assert str(exc)
        return
    out = numcodecs.get_codec(codec.get_config()).decode(chunk)
    assert out.shape == data.shape and out.dtype == data.dtype
    assert verify_bound(data, out, abs_bound=bound).status in ("ok", "bound_overshoot")


@pytest.mark.gpu
def test_szp_chunks_are_encoded_on_the_gpu_and_match_the_reference() -> None:
    data = np.cumsum(RNG.standard_normal((64, 64, 64)), axis=0).astype(np.float32)
    gpu_chunk = SZP("abs", 1e-3).encode(data)
    cpu_chunk = SZP("abs", 1e-3, device="cpu").encode(data)
    gpu, cpu = from_bytes(gpu_chunk)[0], from_bytes(cpu_chunk)[0]
    assert gpu.meta["device"] == "cuda" and cpu.meta["device"] == "cpu"
    assert gpu.data == cpu.data  # one portable format: the same stream from either side
    np.testing.assert_array_equal(SZP("abs", 1e-3, device="cpu").decode(gpu_chunk), SZP("abs", 1e-3).decode(cpu_chunk))


def test_a_chunk_is_a_file_perfscout_decompress_reads(tmp_path) -> None:
    from perfscout.cli.eval_cmd import decompress_file

    data = SMOOTH.copy()
    data[1, 2, 3] = np.nan
    chunk = tmp_path / "chunk.pscz"
    chunk.write_bytes(SZ3("abs", 1e-3, nonfinite="passthrough").encode(data))
    summary = decompress_file(chunk, tmp_path / "out.f32")
    assert summary["codec"] == "sz3" and summary["nonfinite"] == 1
    back = np.fromfile(tmp_path / "out.f32", dtype="<f4").reshape(data.shape)
    finite = np.isfinite(data)
    assert np.isnan(back[1, 2, 3]) and verify_bound(data[finite], back[finite], abs_bound=1e-3).bound_ok
