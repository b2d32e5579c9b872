"""The CPU codecs' ``threads`` option: independent chunks compressed in parallel processes.

Real pysz, zfpy and hdf5plugin round trips: the bound holds on every element, the chunk
count is recorded, the container is the same bytes every time, and a damaged container or a
crashing chunk process is a CodecError, never garbage.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from perfscout import datasets
from perfscout.codecs import chunked
from perfscout.codecs.framing import from_bytes, seal, to_bytes
from perfscout.codecs.registry import get_codec
from perfscout.errors import CodecError


@pytest.fixture(scope="module")
def field() -> np.ndarray:
    f = datasets.synthetic("smooth", (24, 40, 36), "float32", 3)
    return np.asarray(getattr(f, "array", f))


CASES = [("sz3", "abs", 1e-3), ("sz3", "rel", 1e-3), ("zfp", "abs", 1e-3), ("zfp", "fixed_rate", 8.0),
         ("sz2", "abs", 1e-3), ("sz2", "pw_rel", 1e-2), ("sz3-h5", "abs", 1e-3)]


@pytest.mark.parametrize("threads", [2, 4])
@pytest.mark.parametrize(("codec_id", "mode", "bound"), CASES)
def test_chunked_round_trip_holds_the_bound(field: np.ndarray, codec_id: str, mode: str, bound: float,
                                            threads: int) -> None:
    codec = get_codec(codec_id, mode=mode, bound=bound, threads=threads)
    z = codec.compress(field)
    assert z.meta["chunks"] == threads and z.meta["chunk_axis"] == 0
    assert chunked.is_chunked(z)
    # a fresh instance decodes it, through the file container too
    back, _ = from_bytes(to_bytes(z))
    out = get_codec(codec_id, mode=mode, bound=bound, threads=threads).decompress(back)
    assert out.shape == field.shape and out.dtype == field.dtype
    err = np.abs(out.astype(np.float64) - field)
    if mode == "abs":
        assert err.max() <= bound
    elif mode == "rel":
        value_range = float(field.max()) - float(field.min())
        assert z.abs_bound == pytest.approx(bound * value_range)  # the whole array's range, not a slab's
        assert err.max() <= z.abs_bound
    elif mode == "pw_rel":
        assert (err <= bound * np.abs(field.astype(np.float64))).all()
    else:  # fixed_rate: the rate per value (of zfp's 4^d padded blocks) is what each stream spends
        padded = sum(-(-r // 4) * 4 for r in chunked.chunk_rows(24, threads, 4)) * 40 * 36
        assert padded == field.size  # boundaries on zfp's block edges: no padding between chunks
        assert field.size * bound / 8 <= len(z.data) <= field.size * bound / 8 + 1024


@pytest.mark.parametrize(("codec_id", "mode", "bound"), [c for c in CASES if c[:2] != ("sz2", "pw_rel")])
def test_chunked_output_is_the_same_bytes_every_time(field: np.ndarray, codec_id: str, mode: str,
                                                     bound: float) -> None:
    # (SZ 2.1's pw_rel stream differs between two calls even as one stream: the library's, not the chunking's)
    codec = get_codec(codec_id, mode=mode, bound=bound, threads=3)
    assert codec.compress(field).data == codec.compress(field).data


def test_chunks_are_slabs_of_the_slowest_axis_and_their_streams_are_the_codecs_own(field: np.ndarray) -> None:
    assert chunked.chunk_rows(24, 4) == [6, 6, 6, 6] and chunked.chunk_rows(10, 4) == [3, 3, 2, 2]
    assert chunked.chunk_rows(3, 8) == [1, 1, 1]  # never more chunks than rows
    assert chunked.chunk_rows(24, 4, 4) == [8, 8, 4, 4] and chunked.chunk_rows(10, 4, 4) == [4, 4, 2]
    for n in range(1, 40):
        for k in range(1, 9):
            for align in (1, 4):
                rows = chunked.chunk_rows(n, k, align)
                assert sum(rows) == n and min(rows) >= 1 and len(rows) <= k
                assert all(r % align == 0 for r in rows[:-1])
    z = get_codec("sz3", mode="abs", bound=1e-3, threads=2).compress(field)
    header, streams = chunked._parse(z, field.shape)
    one = get_codec("sz3", mode="abs", bound=1e-3)
    assert streams[0] == one.compress(field[:12]).data and streams[1] == one.compress(field[12:]).data
    assert [c["rows"] for c in header["chunks"]] == [12, 12]


def test_one_thread_is_the_plain_stream(field: np.ndarray) -> None:
    plain = get_codec("zfp", mode="abs", bound=1e-3).compress(field)
    one = get_codec("zfp", mode="abs", bound=1e-3, threads=1).compress(field)
    assert one.data == plain.data and "chunks" not in one.meta and not chunked.is_chunked(one)
    row = get_codec("sz3", mode="abs", bound=1e-3, threads=4).compress(field[:1])  # one row: nothing to split
    assert not chunked.is_chunked(row)


def test_chunked_ratio_is_the_honest_one(field: np.ndarray) -> None:
    one = get_codec("sz3", mode="abs", bound=1e-3).compress(field)
    four = get_codec("sz3", mode="abs", bound=1e-3, threads=4).compress(field)
    # four headers and four predictor restarts: never free, recorded as such
    assert four.nbytes > sum(len(s) for s in chunked._parse(four, field.shape)[1]) > 0
    assert four.nbytes != one.nbytes


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True, 10_000])
def test_bad_threads_are_refused(value: object) -> None:
    with pytest.raises(CodecError, match="threads must be an integer"):
        get_codec("sz3", mode="abs", bound=1e-3, threads=value)


def _reseal(z, data: bytes):
    z.data = data
    z.meta.update(seal(data))
    return z


def test_a_damaged_container_is_refused(field: np.ndarray) -> None:
    codec = get_codec("zfp", mode="abs", bound=1e-3, threads=2)
    good = codec.compress(field)
    flipped = bytearray(good.data)
    flipped[-5] ^= 0xFF  # inside the last chunk's stream, outer seal recomputed: the chunk's CRC catches it
    with pytest.raises(CodecError, match="CRC-32"):
        codec.decompress(_reseal(codec.compress(field), bytes(flipped)))
    with pytest.raises(CodecError, match="do not add up"):
        codec.decompress(_reseal(codec.compress(field), good.data[:-7]))
    forged = codec.compress(field)
    forged.meta["chunks"] = 3
    with pytest.raises(CodecError, match="holds 2 chunks"):
        codec.decompress(forged)
    wrong_shape = codec.compress(field)
    wrong_shape.shape = (field.shape[0] + 1, *field.shape[1:])
    with pytest.raises(CodecError, match="do not tile"):
        codec.decompress(wrong_shape)


def test_a_crashing_chunk_process_is_a_codec_error_naming_it() -> None:
    def work(i: int) -> bytes:
        if i == 1:
            ctypes.string_at(0)  # SIGSEGV in native code, in the chunk's process only
        return b"fine"

    with pytest.raises(CodecError, match=r"chunk 1 of 3 died from SIGSEGV"):
        chunked._fork_map(work, 3, "test")

    def fails(i: int) -> bytes:
        raise ValueError(f"no chunk {i}")

    with pytest.raises(CodecError, match="chunk 0 of 2: ValueError: no chunk 0"):
        chunked._fork_map(fails, 2, "test")
    big = chunked._fork_map(lambda i: bytes([i]) * (3 << 20), 2, "test")  # more than a pipe holds
    assert [len(b) for b in big] == [3 << 20] * 2 and big[1][:1] == b"\x01"


def test_evaluate_records_the_chunk_count(field: np.ndarray) -> None:
    from perfscout.tools.evaluate import evaluate

    one = evaluate(field, "sz3", "rel", 1e-3, repeats=1, isolate=False)
    two = evaluate(field, "sz3", "rel", 1e-3, repeats=1, isolate=False, options={"threads": 2})
    assert one.chunks == 1 and two.chunks == 2
    assert one.status == two.status == "ok" and one.bound_ok and two.bound_ok
    assert two.abs_bound == pytest.approx(one.abs_bound)
