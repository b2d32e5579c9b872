"""Every CPU backend: registry, config round-trip, every native mode, and rejection of
truncated/corrupt streams (checked before any byte reaches the native library)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

from perfscout.codecs import Compressed, codec_ids, from_config, get_codec, list_codecs, register_codec
from perfscout.codecs import registry
from perfscout.codecs.framing import from_bytes, seal, to_bytes
from perfscout.errors import CodecError, CodecUnavailable
from perfscout.tools.bounds import verify_bound

CPU_CODECS = ("sz3", "sz2", "sz3-h5", "zfp")
#: (codec, native mode, bound); abs bounds are relative to the test field's range of ~8.
NATIVE_CASES = [
    ("sz3", "abs", 1e-3), ("sz3", "rel", 1e-4),
    ("sz2", "abs", 1e-3), ("sz2", "rel", 1e-4), ("sz2", "pw_rel", 1e-3),
    ("sz3-h5", "abs", 1e-3),
    ("zfp", "abs", 1e-3), ("zfp", "fixed_rate", 12),
]


def smooth_field(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A smooth, strictly positive field (pw_rel needs no zeros), range about 8."""
    axes = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    return (5 + sum(np.sin(a * (i + 1)) for i, a in enumerate(axes)) * (4 / len(shape))).astype(dtype)


def test_registry_lists_every_backend_with_versions() -> None:
    infos = {i.id: i for i in list_codecs()}
    assert set(CPU_CODECS) | {"szp-gpu"} <= set(infos)
    for cid in CPU_CODECS:
        info = infos[cid]
        assert info.available and info.reason == "" and info.device == "cpu"
        assert info.version.split()[-1][0].isdigit()
        assert set(info.native_modes) <= set(info.modes)
    assert infos["sz2"].native_modes == ("abs", "rel", "pw_rel")
    assert infos["zfp"].modes == ("abs", "rel", "psnr", "ratio", "fixed_rate")
    gpu = infos["szp-gpu"]
    if not gpu.available:  # no module yet, or no CUDA device here: either way it says why
        assert gpu.reason


def test_missing_and_broken_backends_are_listed_with_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "perfscout_broken_codec.py").write_text("raise RuntimeError('driver exploded')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.register_codec("broken", "perfscout_broken_codec:Broken")
    registry.register_codec("absent", "perfscout_no_such_module:Absent")
    infos = {i.id: i for i in list_codecs()}
    assert not infos["broken"].available and "RuntimeError: driver exploded" in infos["broken"].reason
    assert not infos["absent"].available and "perfscout_no_such_module" in infos["absent"].reason
    with pytest.raises(CodecUnavailable, match="driver exploded"):
        get_codec("broken", "abs", 1e-3)
    with pytest.raises(CodecError, match="import path"):
        register_codec("bad", "no_colon_here")


def test_a_probe_that_raises_makes_the_backend_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real backend (zfp) whose driver probe blows up: listed with the reason, refused on use.
    (tmp_path / "perfscout_probe_codec.py").write_text(
        "from perfscout.codecs.zfp import ZFPCodec\n"
        "class Probe(ZFPCodec):\n"
        "    codec_id = 'probe'\n"
        "    @classmethod\n"
        "    def availability(cls):\n"
        "        raise OSError('no driver')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry.register_codec("probe", "perfscout_probe_codec:Probe")
    info = {i.id: i for i in list_codecs()}["probe"]
    assert not info.available and info.reason == "availability check raised OSError: no driver"
    with pytest.raises(CodecUnavailable, match="no driver"):
        get_codec("probe", "abs", 1e-3)


def test_unknown_codec_mode_and_unsupported_mode() -> None:
    with pytest.raises(CodecError, match="unknown codec 'nope'.*sz3"):
        get_codec("nope", "abs", 1e-3)
    with pytest.raises(CodecError, match="unknown mode 'l2norm'"):
        get_codec("sz3", "l2norm", 1e-3)
    with pytest.raises(CodecError, match="'zfp' does not support mode 'pw_rel'"):
        get_codec("zfp", "pw_rel", 1e-3)
    with pytest.raises(CodecError, match="derives it from abs"):
        get_codec("sz3", "psnr", 60)
    with pytest.raises(CodecError, match="unknown option"):
        get_codec("sz3", "abs", 1e-3, level=3)
    with pytest.raises(CodecError, match="unknown algorithm"):
        get_codec("sz3", "abs", 1e-3, algorithm="fast")
    with pytest.raises(CodecError, match=r"zfp: unknown option\(s\) precision; known: threads"):
        get_codec("zfp", "abs", 1e-3, precision=3)
    with pytest.raises(CodecError, match=r"sz2: unknown option\(s\) level; known: threads"):
        get_codec("sz2", "abs", 1e-3, level=3)
    assert "sz3" in codec_ids()


@pytest.mark.parametrize("codec,mode,bound", NATIVE_CASES)
def test_config_round_trip(codec: str, mode: str, bound: float) -> None:
    c = get_codec(codec, mode, bound)
    cfg = c.get_config()
    assert cfg["id"] == codec and cfg["mode"] == mode and cfg["bound"] == bound
    again = from_config(cfg)
    assert type(again) is type(c) and again.get_config() == cfg
    x = smooth_field((16, 20), "float32")
    assert again.compress(x).data == c.compress(x).data  # same config, same stream


def test_config_options_round_trip_and_wrong_id() -> None:
    c = get_codec("sz3", "abs", 1e-2, algorithm="lorenzo_reg")
    assert from_config(c.get_config()).get_config() == {"id": "sz3", "mode": "abs", "bound": 1e-2, "algorithm": "lorenzo_reg"}
    with pytest.raises(CodecError, match="config is for codec 'zfp'"):
        type(c).from_config({"id": "zfp", "mode": "abs", "bound": 1.0})
    with pytest.raises(CodecError, match="no 'id'"):
        from_config({"mode": "abs"})


@pytest.mark.parametrize("codec,mode,bound", NATIVE_CASES)
@pytest.mark.parametrize("shape", [(300,), (24, 31), (9, 12, 14)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_native_modes_hold_their_bound(codec: str, mode: str, bound: float, shape: tuple[int, ...], dtype: str) -> None:
    x = smooth_field(shape, dtype)
    c = get_codec(codec, mode, bound)
    packed = c.compress(x)
    assert packed.codec_id == codec and packed.shape == shape and packed.dtype == dtype
    y = c.decompress(packed)
    assert y.shape == x.shape and y.dtype == x.dtype
    err = np.abs(x.astype(np.float64) - y)
    R = float(x.max()) - float(x.min())
    if mode == "abs":
        assert verify_bound(x, y, abs_bound=bound).status in ("ok", "bound_overshoot")
        assert err.max() <= bound * (1 + 1e-6)
    elif mode == "rel":
        assert err.max() <= bound * R * (1 + 1e-5)
    elif mode == "pw_rel":
        assert verify_bound(x, y, pw_rel_bound=bound).status in ("ok", "bound_overshoot")
    else:  # fixed_rate: the size is the contract, bits per value over zfp's 4^d blocks
        padded = int(np.prod([-(-n // 4) * 4 for n in shape]))
        assert packed.nbytes * 8 / padded == pytest.approx(bound, abs=bound * 0.1 + 32 * 8 / padded)
        assert err.max() < R  # and it is still an approximation of the field


def _packed(codec: str) -> tuple[object, Compressed]:
    c = get_codec(codec, "abs", 1e-3)
    return c, c.compress(smooth_field((40, 50), "float32"))


@pytest.mark.parametrize("codec", CPU_CODECS)
def test_truncated_stream_is_rejected(codec: str) -> None:
    c, packed = _packed(codec)
    for cut in (packed.data[: len(packed.data) // 2], packed.data[:5], b""):
        with pytest.raises(CodecError, match="truncated"):
            c.decompress(dataclasses.replace(packed, data=cut))  # type: ignore[attr-defined]


@pytest.mark.parametrize("codec", CPU_CODECS)
def test_corrupt_stream_is_rejected(codec: str) -> None:
    c, packed = _packed(codec)
    raw = bytearray(packed.data)
    for pos in (0, 3, len(raw) // 2, len(raw) - 1):  # the header's magic/version bytes too
        bad = raw.copy()
        bad[pos] ^= 0x5A
        with pytest.raises(CodecError, match="corrupt"):
            c.decompress(dataclasses.replace(packed, data=bytes(bad)))  # type: ignore[attr-defined]
    with pytest.raises(CodecError, match="trailing"):
        c.decompress(dataclasses.replace(packed, data=packed.data + b"\0"))  # type: ignore[attr-defined]


@pytest.mark.parametrize("codec", CPU_CODECS)
def test_unsealed_or_foreign_stream_is_refused(codec: str) -> None:
    c, packed = _packed(codec)
    with pytest.raises(CodecError, match="no checksum"):
        c.decompress(dataclasses.replace(packed, meta={}))  # type: ignore[attr-defined]
    other = "zfp" if codec != "zfp" else "sz3"
    with pytest.raises(CodecError, match=f"written by '{other}'"):
        c.decompress(dataclasses.replace(packed, codec_id=other))  # type: ignore[attr-defined]
    with pytest.raises(CodecError, match="malformed"):
        c.decompress(dataclasses.replace(packed, shape=(0, 5)))  # type: ignore[attr-defined]
    # A container's JSON header can carry anything: a non-integer seal is refused too.
    odd = {**packed.meta, "stream_nbytes": str(packed.meta["stream_nbytes"])}
    with pytest.raises(CodecError, match="checksum entries are malformed"):
        c.decompress(dataclasses.replace(packed, meta=odd))  # type: ignore[attr-defined]
    if "filter_mask" in packed.meta:
        with pytest.raises(CodecError, match="filter_mask"):
            c.decompress(dataclasses.replace(packed, meta={**packed.meta, "filter_mask": "x"}))  # type: ignore[attr-defined]


@pytest.mark.parametrize("codec", CPU_CODECS)
def test_bad_arrays_are_refused_by_every_backend(codec: str) -> None:
    c = get_codec(codec, "abs", 1e-3)
    with pytest.raises(CodecError, match="dtype int32"):
        c.compress(np.arange(10, dtype=np.int32))
    with pytest.raises(CodecError, match="non-empty"):
        c.compress(np.zeros((0, 4), dtype=np.float32))
    with pytest.raises(CodecError, match="non-empty"):
        c.compress(np.array(1.0, dtype=np.float32))
    with pytest.raises(CodecError, match="NumPy"):
        c.compress([1.0, 2.0])  # type: ignore[arg-type]


def test_big_endian_and_non_contiguous_input() -> None:
    x = smooth_field((20, 30), "float64")
    for view in (x.astype(">f8"), x.T, x[:, ::2]):
        c = get_codec("sz3", "abs", 1e-4)
        y = c.decompress(c.compress(view))
        assert np.abs(y - view).max() <= 1e-4


def test_zfp_refuses_more_than_four_axes() -> None:
    with pytest.raises(CodecError, match="at most 4"):
        get_codec("zfp", "abs", 1e-3).compress(np.zeros((2, 2, 2, 2, 2), dtype=np.float32))


def test_zfp_fixed_rate_needs_a_sane_rate() -> None:
    with pytest.raises(CodecError, match="bits per value"):
        get_codec("zfp", "fixed_rate", 100)


def test_h5_unfiltered_chunk_path_decodes_raw_values() -> None:
    # HDF5 stores a chunk unfiltered when an optional filter declines it (filter_mask != 0).
    c = get_codec("sz2", "abs", 1e-3)
    x = smooth_field((6, 7), "float32")
    raw = x.tobytes()
    packed = Compressed(raw, x.shape, "float32", "sz2", "abs", 1e-3, 1e-3, {"filter_mask": 1, **seal(raw)})
    assert np.array_equal(c.decompress(packed), x)
    short = Compressed(raw[:-4], x.shape, "float32", "sz2", "abs", 1e-3, 1e-3, {"filter_mask": 1, **seal(raw[:-4])})
    with pytest.raises(CodecError, match="unfiltered chunk"):
        c.decompress(short)


@pytest.mark.parametrize("codec", ["sz2", "sz3-h5"])
def test_h5_stream_carries_filter_settings(codec: str) -> None:
    _, packed = _packed(codec)
    assert packed.meta["filter_mask"] == 0
    assert packed.meta["cd_values"][:4] == [2, 0, 50, 40]  # ndim, dtype code, dims fastest first


@pytest.mark.parametrize("codec", CPU_CODECS)
def test_container_round_trip_and_rejection(codec: str) -> None:
    c, packed = _packed(codec)
    blob = to_bytes(packed, {"extra": b"\x01\x02"})
    back, sections = from_bytes(blob)
    assert back == packed and sections == {"extra": b"\x01\x02"}
    assert np.array_equal(c.decompress(back), c.decompress(packed))
    for bad in (blob[:-1], blob[:10], b"XXXX" + blob[4:], blob[:30] + bytes([blob[30] ^ 1]) + blob[31:]):
        with pytest.raises(CodecError):
            from_bytes(bad)


def test_process_survives_every_rejection() -> None:
    # SZ2 calls exit() on a stream with bad version bytes: had such a stream reached the
    # library, this test process would be gone. Reaching the assert is the evidence.
    c, packed = _packed("sz2")
    bad = bytearray(packed.data)
    bad[0:4] = b"\xff\xff\xff\xff"
    with pytest.raises(CodecError, match="corrupt"):
        c.decompress(dataclasses.replace(packed, data=bytes(bad)))  # type: ignore[attr-defined]
    assert sys.modules["perfscout.codecs.h5filters"]


# -- guards found by fuzzing SZ 2.1 in child processes (see h5filters.SZ2Codec) -------------
@pytest.mark.parametrize("shape", [(20,), (4, 5), (2, 2, 5), (1, 20)])
def test_sz2_refuses_the_size_that_crashes_it(shape: tuple[int, ...]) -> None:
    with pytest.raises(CodecError, match="exactly 20 values"):
        get_codec("sz2", "abs", 1e-3).compress(np.ones(shape, dtype=np.float32))


def test_sz2_small_multidimensional_arrays_are_compressed_flat() -> None:
    x = np.random.default_rng(0).standard_normal((3, 3, 3)).astype(np.float32)
    bound = 0.7 * (float(x.max()) - float(x.min()))  # aborts SZ 2.1 on the 3-D layout
    c = get_codec("sz2", "abs", bound)
    packed = c.compress(x)
    assert packed.shape == (3, 3, 3) and packed.meta["stream_shape"] == [27]
    y = c.decompress(packed)
    assert y.shape == x.shape and np.abs(y.astype(np.float64) - x).max() <= bound
    bad = dataclasses.replace(packed, meta={**packed.meta, "stream_shape": [26]})
    with pytest.raises(CodecError, match="does not hold"):
        c.decompress(bad)
    big = smooth_field((4, 4, 4), "float32")  # at SMALL_FLATTEN the real layout is kept
    assert "stream_shape" not in c.compress(big).meta


@pytest.mark.parametrize("codec", ["sz2", "sz3-h5"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_h5_filters_refuse_subnormal_bounds(codec: str, dtype: str) -> None:
    tiny = np.finfo(dtype).smallest_subnormal
    x = (np.arange(1, 61) * tiny).astype(dtype)  # subnormal data: where the filters crash
    with pytest.raises(CodecError, match="smallest normal double"):
        get_codec(codec, "abs", 1e-320).compress(x)
    if codec == "sz2" and dtype == "float64":  # native rel: bound * R underflows here
        with pytest.raises(CodecError, match="smallest normal double"):
            get_codec(codec, "rel", 1e-3).compress(x)
    # pysz's SZ3 takes the same request and holds it.
    y = get_codec("sz3", "abs", 1e-320).decompress(get_codec("sz3", "abs", 1e-320).compress(x))
    assert np.abs(y.astype(np.float64) - x).max() <= 1e-320
