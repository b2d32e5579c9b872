"""The reader's opt-in to in-process native decoding, and the helper's shared-memory transport.

Real pysz / zfpy / hdf5plugin streams and real Zarr v3 stores. What must hold:

- ``PERFSCOUT_TRUSTED_DECODE=1`` (the reader's environment) and ``trusted_decode=True``
  chunks signed under this user's key decode without the helper process, to the same values;
- a store cannot switch it on by itself: ``trusted_decode`` in its metadata over chunks
  that are unsigned, signed under another key, or forged and re-sealed, goes to the helper;
- in trusted mode, a zlib bomb and a forged header are still refused before any native
  decoder runs (neither the helper nor the library in this process is called);
- the config key round-trips through ``get_config``/``from_config`` and zarr.json;
- the shared region and the pipe give the same values, and a chunk larger than the region
  takes the pipe.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr

import perfscout.codecs.numcodecs as N
from perfscout.codecs import decoder_process as D
from perfscout.codecs.base import crc32
from perfscout.codecs.numcodecs import SZ2, SZ3, ZFP, zarr3
from perfscout.codecs.registry import get_codec
from perfscout.errors import CodecError
from tests.integration.forgery import pack, split, sz3_claiming


def _field(shape=(48, 64), dtype=np.float32) -> np.ndarray:
    return np.cumsum(np.random.default_rng(5).standard_normal(shape), axis=1).astype(dtype)


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(N.TRUSTED_DECODE_ENV, raising=False)
    return tmp_path / "home"


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of native decodes: through the helper, and in this process (every CPU backend's
    ``decompress``, wrapped, the real one still running)."""
    seen = {"helper": 0, "here": 0}
    real_child = N.decode_in_child

    def child(*args):  # noqa: ANN002, ANN202
        seen["helper"] += 1
        return real_child(*args)

    monkeypatch.setattr(N, "decode_in_child", child)
    for backend in ("sz3", "sz2", "sz3-h5", "zfp"):
        cls = type(get_codec(backend, "abs", 1e-2))
        real = cls.decompress

        def wrapped(self, compressed, _real=real):  # noqa: ANN001, ANN202
            seen["here"] += 1
            return _real(self, compressed)

        monkeypatch.setattr(cls, "decompress", wrapped)
    return seen


def _resealed(header: dict, parts: list[bytes]) -> bytes:
    h = json.loads(json.dumps(header))
    h["meta"]["crc32"], h["meta"]["stream_nbytes"] = crc32(parts[0]), len(parts[0])
    h["sections"] = [[name, len(p)] for (name, _), p in zip(header["sections"], parts)]
    return pack(h, parts)


@pytest.mark.parametrize("cls", [SZ3, SZ2, ZFP])
def test_the_environment_opt_in_decodes_here_to_the_helpers_values(cls, home, calls, monkeypatch) -> None:
    x = _field()
    chunk = cls("abs", 1e-2).encode(x)
    isolated = cls("abs", 1e-2).decode(chunk)
    assert calls == {"helper": 1, "here": 1}  # the encoder's own verify pass decoded here, the read went out
    monkeypatch.setenv(N.TRUSTED_DECODE_ENV, "1")
    trusted = cls("abs", 1e-2).decode(chunk)
    assert calls == {"helper": 1, "here": 2}
    np.testing.assert_array_equal(trusted, isolated)


def test_a_typo_in_the_environment_is_an_error_not_a_silent_choice(home, monkeypatch) -> None:
    chunk = SZ3("abs", 1e-2).encode(_field())
    monkeypatch.setenv(N.TRUSTED_DECODE_ENV, "yes please")
    with pytest.raises(CodecError, match="PERFSCOUT_TRUSTED_DECODE must be 1"):
        SZ3("abs", 1e-2).decode(chunk)


def test_signed_chunks_decode_here_only_under_the_writers_key(home, calls, tmp_path, monkeypatch) -> None:
    x = _field()
    y = x.copy()
    y[::7, ::5] = np.nan
    codec = SZ3("abs", 1e-2, trusted_decode=True, nonfinite="passthrough")
    signed = codec.encode(y)
    key = home / N.KEY_NAME
    assert key.is_file() and stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert [n for n, _ in split(signed)[0]["sections"]][-1] == N.MAC_SECTION
    before = dict(calls)
    back = codec.decode(signed)
    assert calls["helper"] == before["helper"] and calls["here"] == before["here"] + 1
    np.testing.assert_array_equal(np.isnan(back), np.isnan(y))
    assert np.nanmax(np.abs(back - y)) <= 1e-2

    # Unsigned chunks under trusted_decode metadata: the helper, same values.
    unsigned = SZ3("abs", 1e-2, nonfinite="passthrough").encode(y)
    n = calls["helper"]
    codec.decode(unsigned)
    assert calls["helper"] == n + 1
    # A codec that is not trusted_decode never looks at a MAC.
    SZ3("abs", 1e-2, nonfinite="passthrough").decode(signed)
    assert calls["helper"] == n + 2

    # Another reader (another home: no key, or another key) sends the same chunk to the helper.
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "other"))
    codec.decode(signed)
    assert calls["helper"] == n + 3
    SZ3("abs", 1e-2, trusted_decode=True).encode(x)  # this home now has a key of its own
    np.testing.assert_array_equal(codec.decode(signed), back)
    assert calls["helper"] == n + 4


def test_a_forger_who_reseals_a_signed_chunk_gets_the_helper(home, calls) -> None:
    """Stream bytes changed, seal and container CRC recomputed, MAC kept (the forger has no
    key): the MAC no longer verifies, so the native decoder runs only in the helper."""
    x = _field()
    signed = SZ3("abs", 1e-2, trusted_decode=True).encode(x)
    header, parts = split(signed)
    stream = bytearray(parts[0])
    stream[len(stream) // 2] ^= 0x10
    parts[0] = bytes(stream)
    forged = _resealed(header, parts)
    n, here = calls["helper"], calls["here"]
    try:
        SZ3("abs", 1e-2, trusted_decode=True).decode(forged)
    except CodecError:
        pass  # the helper may refuse or decode it: either way, not here
    assert calls["helper"] == n + 1 and calls["here"] == here


def test_trusted_mode_refuses_a_zlib_bomb_before_any_native_decoder(home, calls, monkeypatch) -> None:
    x = _field((256, 256))
    x[::9, ::11] = np.nan
    good = ZFP("abs", 1e-2, nonfinite="passthrough").encode(x)
    header, parts = split(good)
    names = [name for name, _ in header["sections"]]
    z = zlib.compressobj(9)
    bomb = b"".join(z.compress(b"\xff" * 2**20) for _ in range(256)) + z.flush()  # 256 MiB from ~256 KiB
    parts[names.index("nonfinite_mask")] = bomb
    forged = _resealed(header, parts)
    monkeypatch.setenv(N.TRUSTED_DECODE_ENV, "1")
    before = dict(calls)
    with pytest.raises(CodecError, match="inflates to more"):
        ZFP("abs", 1e-2, nonfinite="passthrough").decode(forged)
    assert calls == before


def test_trusted_mode_refuses_forged_headers_before_any_native_decoder(home, calls, monkeypatch) -> None:
    monkeypatch.setenv(N.TRUSTED_DECODE_ENV, "1")
    chunk = SZ3("abs", 1e-2).encode(np.linspace(0, 1, 960).reshape(24, 40))
    before = dict(calls)
    header, parts = split(chunk)
    claims = dict(header, shape=[2**44])
    with pytest.raises(CodecError, match="available"):  # SZ3's own header forged to agree: the size refuses it
        SZ3("abs", 1e-2).decode(_resealed(claims, [sz3_claiming(parts[0], 2**44), *parts[1:]]))
    with pytest.raises(CodecError):  # the container says 40 x 24, the library header 24 x 40 (960 both)
        SZ3("abs", 1e-2).decode(_resealed(dict(header, shape=[40, 24]), parts))
    stream = bytearray(parts[0])
    stream[0] ^= 0xFF
    with pytest.raises(CodecError, match="magic"):  # SZ3's magic number forged, every checksum recomputed
        SZ3("abs", 1e-2).decode(_resealed(header, [bytes(stream), *parts[1:]]))
    with pytest.raises(CodecError, match="malformed"):  # a mode no backend knows
        SZ3("abs", 1e-2).decode(_resealed(dict(header, mode="nope"), parts))
    assert calls == before


def test_the_config_key_round_trips_and_zarr_metadata_alone_grants_nothing(home, calls, tmp_path) -> None:
    codec = SZ3("abs", 1e-2, trusted_decode=True)
    config = codec.get_config()
    assert config["trusted_decode"] is True and "trusted_decode" not in SZ3("abs", 1e-2).get_config()
    assert numcodecs.get_codec(dict(config)) == codec and SZ3.from_config(config).trusted_decode is True
    with pytest.raises(CodecError, match="trusted_decode must be true or false"):
        SZ3.from_config({**config, "trusted_decode": "false"})

    x = _field((64, 64))
    ours = zarr.create_array(tmp_path / "ours.zarr", shape=x.shape, chunks=(32, 32), dtype="float32",
                             serializer=zarr3.SZ3(mode="abs", bound=1e-2, trusted_decode=True), compressors=None)
    ours[:] = x
    meta = json.loads((tmp_path / "ours.zarr" / "zarr.json").read_text())
    assert meta["codecs"][0]["configuration"]["trusted_decode"] is True
    n, here = calls["helper"], calls["here"]
    back = zarr.open_array(tmp_path / "ours.zarr", mode="r")[:]
    assert calls["helper"] == n and calls["here"] > here  # 4 signed chunks, decoded here
    assert np.max(np.abs(back - x)) <= 1e-2

    # A store written without the key, its zarr.json edited to claim trusted_decode: the helper.
    theirs = zarr.create_array(tmp_path / "theirs.zarr", shape=x.shape, chunks=(32, 32), dtype="float32",
                               serializer=zarr3.SZ3(mode="abs", bound=1e-2), compressors=None)
    theirs[:] = x
    path = tmp_path / "theirs.zarr" / "zarr.json"
    meta = json.loads(path.read_text())
    meta["codecs"][0]["configuration"]["trusted_decode"] = True
    path.write_text(json.dumps(meta))
    n, here = calls["helper"], calls["here"]
    read = zarr.open_array(tmp_path / "theirs.zarr", mode="r")
    assert read.metadata.codecs[0].codec_config["trusted_decode"] is True  # the claim reached the codec
    assert np.max(np.abs(read[:] - x)) <= 1e-2
    assert calls["helper"] == n + 4 and calls["here"] == here


def test_shared_region_and_pipe_give_the_same_values_and_big_chunks_take_the_pipe(home) -> None:
    x = _field((256, 512))
    chunk = SZ3("abs", 1e-2).encode(x)
    shm, pipe = D._Child(shared=True), D._Child(shared=False, pipe_bytes=0)
    try:
        a = shm.decode(chunk, "sz3", x.shape, x.dtype)
        b = pipe.decode(chunk, "sz3", x.shape, x.dtype)
        np.testing.assert_array_equal(a, b)
        assert shm.shm_size >= x.nbytes and pipe.shm is None
        a[0, 0] = 12345.0  # the caller's array is private: the next reply does not touch it
        shm.decode(chunk, "sz3", x.shape, x.dtype)
        assert a[0, 0] == 12345.0
        size = shm.shm_size
        big = _field((2048, 2304))  # 18 MiB > SHM_MAX
        assert big.nbytes > D.SHM_MAX
        big_chunk = SZ3("abs", 1e-2).encode(big)
        np.testing.assert_array_equal(shm.decode(big_chunk, "sz3", big.shape, big.dtype),
                                      pipe.decode(big_chunk, "sz3", big.shape, big.dtype))
        assert shm.shm_size == size  # the region did not grow past SHM_MAX for it
    finally:
        shm.close()
        pipe.close()
    assert shm.shm is None and shm.shm_fd == -1
    assert os.environ.get(N.TRUSTED_DECODE_ENV) is None


def test_writers_racing_to_create_the_key_all_get_the_one_whole_key(home, monkeypatch) -> None:
    """zarr encodes a write's chunks on several threads, each asking for the key. A key made in
    place (O_EXCL, then the write) was read empty by a thread arriving between the two: 'the key
    is 0 bytes: it is damaged' on a fresh home (CI). The write is held open here so the race
    always happens: every thread must get the same 32 bytes, and the file is 0600."""
    import threading
    import time

    real = os.urandom

    def slow_urandom(n: int) -> bytes:
        time.sleep(0.2)  # the window between a create and its write, widened
        return real(n)

    monkeypatch.setattr(N.os, "urandom", slow_urandom)
    keys: list[bytes | None] = []
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            keys.append(N.trust_key(create=True))
        except BaseException as exc:  # noqa: BLE001 - the test reports what each thread met
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
        time.sleep(0.02)  # the later ones arrive while the first is still writing
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(keys) == 6 and len(set(keys)) == 1 and len(keys[0] or b"") == 32
    path = N.key_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind
    assert N.trust_key() == keys[0]  # what was handed out is what is on disk
