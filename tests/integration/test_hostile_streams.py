"""Forged compressed files for `perfscout decompress`: an attacker recomputes every checksum.

A container's outer CRC-32 and the stream's seal only catch accidents; a forger recomputes
both. What must hold then (real pysz, zfpy and hdf5plugin streams, the real CLI app):

- whatever was changed (header fields, the library's own bytes, lengths, a chunk
  container's framing), the outcome is a decoded file or exit 2 with one ``error:`` line,
  never a traceback, never a crashed CLI (decoders run in a child process);
- a claimed size of petabytes is refused before anything is allocated for it, and a
  compressed side section that inflates far beyond what the shape needs (a zlib bomb) is
  refused after inflating no more than that;
- a stream saved with the ``threads`` option (a chunk container) decodes again.
"""

from __future__ import annotations

import json
import random
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from perfscout.cli import app
from perfscout.codecs.base import Codec, Compressed, crc32
from perfscout.codecs.framing import _PREFIX, to_bytes
from perfscout.datasets import synthetic
from perfscout.errors import CodecError
from perfscout.tools.evaluate import evaluate_full
from tests.integration.forgery import pack, split, sz3_claiming

runner = CliRunner()


def _container(codec: str, nonfinite: bool = False, **options: object) -> tuple[bytes, np.ndarray]:
    x = synthetic("grf", (24, 40), dtype="f32", seed=1).array.copy()
    if nonfinite:
        x.flat[::7] = np.nan
    ev = evaluate_full(x, codec, "abs", 1e-3, repeats=1, options=dict(options),
                       nonfinite="passthrough" if nonfinite else "refuse")
    return to_bytes(ev.compressed, ev.sections()), ev.reconstructed


def _with_stream(header: dict, parts: list[bytes], stream: bytes) -> bytes:
    """The container with its stream replaced, every checksum recomputed (a forger's)."""
    h = json.loads(json.dumps(header))
    h["meta"]["crc32"], h["meta"]["stream_nbytes"] = crc32(stream), len(stream)
    h["sections"][0][1] = len(stream)
    return pack(h, [stream, *parts[1:]])


def _decompress(buf: bytes, tmp_path: Path):  # noqa: ANN202 - click's Result
    src, out = tmp_path / "forged.pscz", tmp_path / "out.raw"
    src.write_bytes(buf)
    out.unlink(missing_ok=True)
    return runner.invoke(app, ["decompress", str(src), "--out", str(out)]), out


def _decoded_or_refused(result, out: Path) -> str:  # noqa: ANN001
    exc = result.exception
    assert exc is None or isinstance(exc, SystemExit), f"escaped: {exc!r}"
    said = " ".join(result.stderr.split())
    assert "Traceback" not in said and "unexpected" not in said, said
    if result.exit_code == 0:
        assert out.is_file()
        return "decoded"
    assert result.exit_code == 2 and said.startswith("error:"), (result.exit_code, said)
    assert not out.exists(), "a refused decode left an output file"
    return "refused"


@pytest.mark.parametrize("codec", ["sz3", "zfp", "sz2", "sz3-h5"])
def test_forged_streams_never_crash_the_cli(codec: str, tmp_path: Path) -> None:
    good, _ = _container(codec)
    header, parts = split(good)
    rng = random.Random(codec)
    seen = set()
    stream = parts[0]
    for _ in range(12):  # bytes of the library's own header and body, lengths cut
        s = bytearray(stream)
        at = rng.randrange(min(len(s), 64)) if rng.random() < 0.7 else rng.randrange(len(s))
        for j in range(rng.choice([1, 2, 4, 8])):
            if at + j < len(s):
                s[at + j] = rng.randrange(256)
        if rng.random() < 0.25:
            s = s[:rng.randrange(len(s))]
        seen.add(_decoded_or_refused(*_decompress(_with_stream(header, parts, bytes(s)), tmp_path)))
    for key, value in [("shape", [2**40]), ("shape", [-24, 40]), ("shape", []), ("dtype", "object"),
                       ("dtype", "int32"), ("codec_id", "nvcomp-lz4"), ("codec_id", "../x"), ("meta", None),
                       ("sections", [["stream", 10**15]])]:
        h = json.loads(json.dumps(header))
        h[key] = value
        assert _decoded_or_refused(*_decompress(pack(h, parts), tmp_path)) == "refused", (key, value)
    assert "refused" in seen


def test_a_consistent_petabyte_claim_is_refused_before_allocating(tmp_path: Path) -> None:
    """SZ3's own header forged to agree with the container (2**48 values): every header
    check passes; the size is refused against this machine's memory, at once."""
    good, _ = _container("sz3")
    header, parts = split(good)
    n = 2**48
    forged = sz3_claiming(parts[0], n)
    header["shape"] = [n]
    result, out = _decompress(_with_stream(header, parts, forged), tmp_path)
    assert _decoded_or_refused(result, out) == "refused"
    assert "is available here" in " ".join(result.stderr.split())


def test_a_zlib_bomb_in_the_nonfinite_sections_is_refused(tmp_path: Path) -> None:
    good, _ = _container("zfp", nonfinite=True)
    header, parts = split(good)
    names = [name for name, _ in header["sections"]]
    bomb = zlib.compress(b"\xff" * (256 * 2**20), 9)  # 256 MiB of mask from ~250 KiB
    for section in ("nonfinite_mask", "nonfinite_values"):
        i = names.index(section)
        forged = list(parts)
        forged[i] = bomb
        h = json.loads(json.dumps(header))
        h["sections"][i][1] = len(bomb)
        result, out = _decompress(pack(h, forged), tmp_path)
        assert _decoded_or_refused(result, out) == "refused"
        assert "inflates to more" in " ".join(result.stderr.split()), section


@pytest.mark.parametrize("codec", ["sz3", "zfp"])
def test_a_threads_stream_decodes_again(codec: str, tmp_path: Path) -> None:
    packed, reconstructed = _container(codec, threads=2)
    assert json.loads(packed[_PREFIX.size:_PREFIX.size + _PREFIX.unpack_from(packed)[2]])["meta"]["chunks"] == 2
    result, out = _decompress(packed, tmp_path)
    assert _decoded_or_refused(result, out) == "decoded", result.stderr
    back = np.fromfile(out, dtype="<f4").reshape(24, 40)
    assert np.array_equal(back, reconstructed)
    # ... and a damaged chunk inside it (the outer checksums recomputed) is refused: each
    # chunk's CRC-32 in the chunk container's own header still names the original bytes
    header, parts = split(packed)
    stream = bytearray(parts[0])
    stream[len(stream) - 1] ^= 0xFF  # the last chunk's last byte
    forged = _with_stream(header, parts, bytes(stream))
    assert _decoded_or_refused(*_decompress(forged, tmp_path)) == "refused"


def test_every_decoder_failure_is_a_codec_error() -> None:
    """The decoder contract holds for any backend, plug-ins included: whatever a library
    raises on bytes it cannot decode becomes CodecError naming the codec; running out of
    memory keeps its type (callers report it as such)."""

    class Fragile(Codec):
        codec_id = "fragile-test"
        family = "test"
        native_modes = ("abs",)

        def compress(self, array: np.ndarray) -> Compressed:  # pragma: no cover - not used
            raise NotImplementedError

        def decompress(self, compressed: Compressed) -> np.ndarray:
            raise self.options["error"]

    blob = Compressed(data=b"", shape=(1,), dtype="float32", codec_id="fragile-test", mode="abs", bound=1.0)
    for error in (IndexError("list index out of range"), struct.error("unpack requires a buffer"),
                  OverflowError("too big"), ValueError("bad")):
        with pytest.raises(CodecError, match=f"fragile-test stream could not be decoded: {type(error).__name__}"):
            Fragile(error=error).decompress(blob)
    with pytest.raises(MemoryError):
        Fragile(error=MemoryError()).decompress(blob)
    with pytest.raises(CodecError, match="^mine$"):
        Fragile(error=CodecError("mine")).decompress(blob)
