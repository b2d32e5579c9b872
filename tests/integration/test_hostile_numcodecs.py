"""Forged chunks through the numcodecs adapter (what a Zarr reader calls): a forger recomputes
every checksum, so the container's CRC and the stream's seal prove nothing.

What must hold for ``perfscout.codecs.numcodecs`` ``decode`` (real pysz, zfpy, hdf5plugin
and szp streams):

- every forged chunk is decoded or refused with :class:`~perfscout.errors.CodecError`;
  nothing else escapes, and the reading process never dies (the fuzz runs in a child
  process, so a death is counted, not fatal to the test run);
- no inflate goes past the size the container declares: a zlib bomb in the non-finite
  sections, or a container claiming more than this machine has, is refused with the
  reader's peak RSS growth under 2x the declared size.

The default run forges ``PERFSCOUT_FORGED_CHUNKS`` chunks (400); the ``slow`` test forges
10,000.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

from perfscout.codecs.base import crc32
from perfscout.codecs.numcodecs import SZ2, SZ3, SZ3H5, SZP, ZFP
from tests.integration.forgery import pack, split, sz3_claiming

REPO = Path(__file__).resolve().parents[2]
CODECS = {"sz3": SZ3, "sz2": SZ2, "sz3-h5": SZ3H5, "zfp": ZFP, "szp": SZP}


def _resealed(header: dict, parts: list[bytes]) -> bytes:
    """The container with the stream's seal and every length recomputed (a forger's)."""
    h = json.loads(json.dumps(header))
    if isinstance(h.get("meta"), dict):
        h["meta"]["crc32"], h["meta"]["stream_nbytes"] = crc32(parts[0]), len(parts[0])
    h["sections"] = [[name, len(p)] for (name, _), p in zip(header["sections"], parts)]
    return pack(h, parts)


def _good_chunks() -> list[bytes]:
    rng = np.random.default_rng(7)
    smooth = np.cumsum(rng.standard_normal((24, 40)), axis=0)
    out = []
    for name, cls in CODECS.items():
        for dtype in (np.float32, np.float64):
            x = smooth.astype(dtype)
            out.append(cls("abs", 1e-2).encode(x))
            y = x.copy()
            y.flat[::11] = np.nan
            out.append(cls("abs", 1e-2, nonfinite="passthrough").encode(y))
            if name == "zfp":
                out.append(cls("fixed_rate", 8).encode(x))
            if name == "sz2":
                out.append(cls("pw_rel", 1e-2).encode(x))
        out.append(cls("abs", 1e-3).encode(np.cumsum(rng.standard_normal((6, 10, 12)), axis=2)))
    return out


def forged_chunks(n: int, seed: int) -> list[bytes]:
    """``n`` forgeries of real chunks: bytes of the library stream changed or cut, header
    fields rewritten, section sizes and contents swapped, every checksum recomputed."""
    rng = random.Random(seed)
    good = _good_chunks()
    out: list[bytes] = []
    while len(out) < n:
        header, parts = split(rng.choice(good))
        parts = list(parts)
        kind = rng.random()
        if kind < 0.55:  # the library's own bytes: header region mostly, body sometimes
            s = bytearray(parts[0])
            for _ in range(rng.choice([1, 1, 2, 3, 8])):
                at = rng.randrange(min(len(s), 96)) if rng.random() < 0.7 else rng.randrange(len(s))
                s[at] = rng.randrange(256) if rng.random() < 0.7 else s[at] ^ (1 << rng.randrange(8))
            if rng.random() < 0.2:
                s = s[:rng.randrange(len(s))] if rng.random() < 0.7 else s + bytes(rng.randrange(64))
            parts[0] = bytes(s)
        elif kind < 0.8:  # the container's claims
            key = rng.choice(["shape", "dtype", "codec_id", "mode", "bound", "meta", "abs_bound"])
            value = rng.choice({
                "shape": [[2**40], [40, 24], [960], [24, 40, 1], [1, 960], [2, 480], [-24, 40], [], [0],
                          [2**31, 2**31], [6, 10, 12], [12, 10, 6]],
                "dtype": ["float32", "float64", "int32", "object", "<f8", ">f4"],
                "codec_id": ["sz3", "sz2", "sz3-h5", "zfp", "szp-gpu", "../x"],
                "mode": ["abs", "rel", "pw_rel", "fixed_rate", "nope"],
                "bound": [0.0, -1.0, 1e300, 1e-300, 64.0, 1e-2],
                "meta": [None, {}, {"chunks": 2}, {"filter_mask": 1}, {"stream_shape": [960]},
                         {"cd_values": [3, 1, 0]}],
                "abs_bound": [None, 1.0],
            }[key])
            header = json.loads(json.dumps(header))
            if key == "meta" and isinstance(value, dict) and isinstance(header.get("meta"), dict):
                header["meta"] = {**header["meta"], **value}
            else:
                header[key] = value
        elif kind < 0.92 and len(parts) > 1:  # the non-finite sections
            i = rng.randrange(1, len(parts))
            parts[i] = rng.choice([zlib.compress(b"\xff" * rng.choice([1, 97, 4096, 2**20]), 9), b"", b"x" * 9,
                                   zlib.compress(os.urandom(64)), parts[i][: len(parts[i]) // 2]])
        else:  # a stream of another chunk under this header
            parts[0] = split(rng.choice(good))[1][0]
        out.append(_resealed(header, parts))
    return out


CHILD = textwrap.dedent("""
    import pickle, resource, sys
    from perfscout.codecs.numcodecs import BY_BACKEND
    from perfscout.errors import CodecError
    chunks = pickle.load(open(sys.argv[1], "rb"))
    start = int(sys.argv[2])
    codecs = {name: cls("abs", 1.0) for name, cls in BY_BACKEND.items()}
    for i in range(start, len(chunks)):
        print("start", i, flush=True)
        outcome = "refused"
        for codec in codecs.values():  # each adapter: a Zarr array may name any of them
            try:
                codec.decode(chunks[i])
                outcome = "decoded" if outcome == "refused" else outcome
            except CodecError:
                pass
            except MemoryError:
                outcome = "memory"
            except BaseException as exc:
                outcome = "escaped:" + type(exc).__name__ + ":" + str(exc)[:200].replace(chr(10), " ")
        print("done", i, outcome, flush=True)
""")


def run_fuzz(chunks: list[bytes], tmp_path: Path) -> tuple[dict[str, int], list[int], list[str]]:
    """(outcomes, indices whose decode killed the process, escaped exceptions)."""
    path = tmp_path / "chunks.pkl"
    path.write_bytes(pickle.dumps(chunks))
    counts: dict[str, int] = {}
    deaths: list[int] = []
    escaped: list[str] = []
    start = 0
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    while start < len(chunks):
        proc = subprocess.run([sys.executable, "-c", CHILD, str(path), str(start)], capture_output=True,
                              text=True, env=env, timeout=1800)
        last = start
        for line in proc.stdout.splitlines():
            parts = line.split(" ", 2)
            if parts[0] == "start":
                last = int(parts[1])
            elif parts[0] == "done":
                outcome = parts[2]
                if outcome.startswith("escaped:"):
                    escaped.append(outcome)
                    outcome = "escaped"
                counts[outcome] = counts.get(outcome, 0) + 1
                last = int(parts[1]) + 1
        if proc.returncode == 0:
            break
        deaths.append(last)  # the chunk it was decoding when it died
        start = last + 1
    return counts, deaths, escaped


def _check_fuzz(n: int, tmp_path: Path) -> None:
    chunks = forged_chunks(n, seed=n)
    counts, deaths, escaped = run_fuzz(chunks, tmp_path)
    print(f"{n} forged chunks through every adapter: {counts}, {len(deaths)} process death(s)")  # -s shows it
    assert not deaths, f"{len(deaths)} of {n} forged chunks killed the reading process: first {deaths[:5]}"
    assert not escaped, escaped[:5]
    assert counts.get("refused", 0) > n // 4 and counts.get("decoded", 0) > 0 and sum(counts.values()) == n, counts


def test_forged_chunks_never_kill_the_reader(tmp_path: Path) -> None:
    _check_fuzz(int(os.environ.get("PERFSCOUT_FORGED_CHUNKS", "400")), tmp_path)


@pytest.mark.slow
def test_ten_thousand_forged_chunks_never_kill_the_reader(tmp_path: Path) -> None:
    _check_fuzz(10_000, tmp_path)


RSS_CHILD = textwrap.dedent("""
    import sys
    from perfscout.codecs.numcodecs import ZFP
    from perfscout.errors import CodecError

    def peak():  # VmHWM: this process's own peak RSS (ru_maxrss keeps the forking parent's across exec)
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

    blob, good = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
    codec = ZFP("abs", 1.0)
    codec.decode(ZFP("abs", 1.0).encode(__import__("numpy").zeros((4, 4))))  # the helper is started
    before = peak()
    codec.decode(good)
    print("good grew", peak() - before)
    before = peak()
    try:
        codec.decode(blob)
        print("decoded")
    except CodecError as exc:
        print("refused", str(exc).replace(chr(10), " "))
    print("grew", peak() - before)
""")


@pytest.mark.parametrize("trusted", ["", "1"], ids=["helper", "trusted"])
@pytest.mark.parametrize("section", ["nonfinite_mask", "nonfinite_values"])
def test_a_zlib_bomb_in_a_chunk_is_refused_without_inflating_it(section: str, trusted: str, tmp_path: Path) -> None:
    """A 32 MiB chunk (declared) whose non-finite section inflates to 1 GiB: refused, and the
    reader's peak RSS grows by less than twice the declared size; in the helper's mode and
    with PERFSCOUT_TRUSTED_DECODE=1 (the native decode in the reader: the cap is the same)."""
    x = np.cumsum(np.random.default_rng(1).standard_normal((2048, 4096)), axis=1).astype(np.float32)
    x[::97, ::89] = np.nan
    good = ZFP("abs", 1e-2, nonfinite="passthrough").encode(x)
    (tmp_path / "good.bin").write_bytes(good)
    header, parts = split(good)
    names = [name for name, _ in header["sections"]]
    z = zlib.compressobj(9)
    block = b"\xff" * 2**20
    bomb = b"".join(z.compress(block) for _ in range(1024)) + z.flush()  # 1 GiB from ~1 MiB
    parts[names.index(section)] = bomb
    path = tmp_path / "bomb.bin"
    path.write_bytes(_resealed(header, parts))
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PERFSCOUT_TRUSTED_DECODE": trusted}
    proc = subprocess.run([sys.executable, "-c", RSS_CHILD, str(path), str(tmp_path / "good.bin")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    good_grew = int(lines[0].split()[2])  # the sound chunk, decoded: its values and little else
    assert good_grew < 2 * x.nbytes, f"decoding grew peak RSS by {good_grew / 2**20:.1f} MiB"
    assert lines[1].startswith("refused") and "inflates to more" in lines[1], lines
    grew = int(lines[-1].split()[1])
    print(f"{section} ({'trusted' if trusted else 'helper'}): peak RSS grew {good_grew / 2**20:.2f} MiB decoding the sound {x.nbytes / 2**20:.0f} MiB "
          f"chunk, {grew / 2**20:.2f} MiB refusing the bomb")
    assert grew < 2 * x.nbytes, f"peak RSS grew by {grew / 2**20:.1f} MiB for a {x.nbytes / 2**20:.1f} MiB chunk"


def test_a_chunk_claiming_more_than_this_machine_has_is_refused_at_once() -> None:
    """SZ3's own header forged to agree with a container of 2**44 float64 values: every
    header check passes; the declared size is refused against available memory."""
    from perfscout.errors import CodecError

    chunk = SZ3("abs", 1e-2).encode(np.linspace(0, 1, 960).reshape(24, 40))
    header, parts = split(chunk)
    n = 2**44
    parts[0] = sz3_claiming(parts[0], n)
    header["shape"] = [n]
    with pytest.raises(CodecError, match="available"):
        SZ3("abs", 1e-2).decode(_resealed(header, parts))


def test_a_dead_decoder_process_is_an_error_then_replaced() -> None:
    """The helper killed under the adapter (SIGKILL, as a crashing decoder dies): the call
    that finds it dead is a CodecError naming the signal, and the next call starts a
    fresh helper and decodes."""
    import signal

    from perfscout.codecs import decoder_process as D
    from perfscout.errors import CodecError

    x = np.cumsum(np.random.default_rng(3).standard_normal((24, 40)), axis=0)
    chunk = SZ3("abs", 1e-2).encode(x)
    first = SZ3("abs", 1e-2).decode(chunk)
    proc = D._CHILD.proc
    assert proc is not None and proc.poll() is None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    original = D._CHILD._alive
    D._CHILD._alive = lambda: proc  # type: ignore[method-assign]  # as if it died with this request on its way
    try:
        with pytest.raises(CodecError, match="killed by SIGKILL"):
            SZ3("abs", 1e-2).decode(chunk)
    finally:
        D._CHILD._alive = original  # type: ignore[method-assign]
    np.testing.assert_array_equal(SZ3("abs", 1e-2).decode(chunk), first)
    assert D._CHILD.proc is not None and D._CHILD.proc.pid != proc.pid
