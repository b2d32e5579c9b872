"""Forged containers: the container's shape, dtype and codec id must agree with the inner
stream's own header (perfscout.codecs.streams), or decoding is refused before any native
decoder sees the bytes. The forgeries keep a valid seal and container CRC, as an attacker
who recomputes them would."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from perfscout.codecs import Compressed, get_codec
from perfscout.codecs.framing import from_bytes, seal, to_bytes
from perfscout.codecs.streams import check_stream_header, squeezed
from perfscout.errors import CodecError

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

CASES = [("sz3", "abs", {}), ("sz2", "abs", {}), ("sz3-h5", "abs", {}), ("zfp", "abs", {}),
         ("szp-gpu", "abs", {"device": "cpu"})]


def make(codec: str, mode: str, opts: dict, shape: tuple[int, ...], dtype: str = "float32",
         kind: str = "noise") -> tuple[np.ndarray, Compressed]:
    rng = np.random.default_rng(7)
    n = int(np.prod(shape))
    x = rng.standard_normal(n) if kind == "noise" else np.cumsum(rng.standard_normal(n))
    x = x.astype(dtype).reshape(shape)
    return x, get_codec(codec, mode, 1e-3, **opts).compress(x)


def forged(c: Compressed, **changes: object) -> Compressed:
    out = dataclasses.replace(c, **changes)  # type: ignore[arg-type]
    return dataclasses.replace(out, meta={**out.meta, **seal(out.data)}) if "crc32" in c.meta else out


@pytest.mark.parametrize(("codec", "mode", "opts"), CASES)
@pytest.mark.parametrize("shape", [(600,), (20, 30), (4, 10, 15)])
def test_genuine_streams_pass(codec: str, mode: str, opts: dict, shape: tuple[int, ...]) -> None:
    for dtype in ("float32", "float64"):
        x, c = make(codec, mode, opts, shape, dtype)
        check_stream_header(c)
        y = get_codec(codec, mode, 1e-3, **opts).decompress(c)
        assert y.shape == x.shape and y.dtype == x.dtype


@pytest.mark.parametrize(("codec", "mode", "opts"), CASES)
def test_a_forged_shape_is_refused(codec: str, mode: str, opts: dict) -> None:
    x, c = make(codec, mode, opts, (20, 30))
    decoder = get_codec(codec, mode, 1e-3, **opts)
    shapes = [(40, 30), (20, 31), (7,)]
    if codec != "sz2":  # SZ 2.1 records the element count only (see perfscout.codecs.streams)
        shapes += [(30, 20), (600,), (10, 60), (2, 10, 30)]
    for shape in shapes:
        bad = forged(c, shape=shape)
        with pytest.raises(CodecError, match="does not match its container|stream (is|holds)"):
            decoder.decompress(bad)


@pytest.mark.parametrize(("codec", "mode", "opts"), CASES)
def test_a_forged_dtype_is_refused(codec: str, mode: str, opts: dict) -> None:
    if codec == "sz3":
        pytest.skip("pysz streams do not record their element type (SZ3's dataType stays at its default)")
    _, c = make(codec, mode, opts, (20, 30), "float32")
    with pytest.raises(CodecError, match="does not match its container"):
        get_codec(codec, mode, 1e-3, **opts).decompress(forged(c, dtype="float64"))


@pytest.mark.parametrize(("codec", "mode", "opts"), CASES)
@pytest.mark.parametrize(("other", "other_opts"), [(c, o) for c, _, o in CASES])
def test_a_forged_codec_id_is_refused(codec: str, mode: str, opts: dict, other: str, other_opts: dict) -> None:
    if other == codec:
        return
    _, c = make(codec, mode, opts, (20, 30))
    with pytest.raises(CodecError):
        get_codec(other, "abs", 1e-3, **other_opts).decompress(forged(c, codec_id=other))


def test_length_one_axes_are_the_same_layout() -> None:
    # The SZ libraries drop axes of length 1; such a container is the same C-order layout.
    assert squeezed((1, 26, 1, 12)) == (26, 12) and squeezed((1, 1)) == (1,)
    x, c = make("sz3", "abs", {}, (26, 1, 12))
    check_stream_header(forged(c, shape=(1, 26, 12)))


def test_zfp_sizes_are_capped_by_the_header() -> None:
    _, c = make("zfp", "abs", {}, (20, 30))
    cut = c.data[:16]  # a header with (nearly) no blocks behind it
    with pytest.raises(CodecError, match="cannot fit"):
        check_stream_header(forged(c, data=cut))


def test_sz3_sizes_must_add_up() -> None:
    _, c = make("sz3", "abs", {}, (20, 30))
    with pytest.raises(CodecError, match="configuration"):
        check_stream_header(forged(c, data=c.data[:-3]))
    with pytest.raises(CodecError, match="magic"):
        check_stream_header(forged(c, data=b"\0" * 4 + c.data[4:]))


def test_a_forged_container_file_round_trips_the_check() -> None:
    # Through the file container: CRC recomputed by to_bytes, then read back.
    _, c = make("sz2", "abs", {}, (20, 30), "float64")
    blob = to_bytes(forged(c, shape=(30, 20), dtype="float32"))
    back, _ = from_bytes(blob)
    with pytest.raises(CodecError, match="does not match its container"):
        check_stream_header(back)
