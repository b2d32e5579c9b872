"""szp-gpu's one-wait driver (issue #15 item 3): every way compress_device finishes a
stream gives the reference's bytes, and the asynchronous uploads from the pinned staging
buffer never let one call's bytes leak into another's.

The finishing paths, by outlier count: none; up to the sort kernel's capacity (gpu.SORT_MAX
on the H200: sorted by szp_sort_outliers before the one wait); more, up to the first
launch's room (sorted by CuPy after the wait); more than that room (a second launch, the
general CuPy path).
"""

from __future__ import annotations

import numpy as np
import pytest

from perfscout.codecs.szp import format as F

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy", reason="CuPy is needed for the GPU codec tests")
from perfscout.codecs.szp import gpu as G  # noqa: E402

V = G.WRITE_VERSION


def _with_outliers(n: int, n_out: int, dtype: type, seed: int) -> np.ndarray:
    """A smooth field of ``n`` elements with ``n_out`` outliers (NaNs and values too large
    for the quantiser at abs 1e-2) at random places."""
    rng = np.random.default_rng(seed)
    x = (np.cumsum(rng.standard_normal(n)) / 30).astype(dtype)
    at = rng.choice(n, n_out, replace=False)
    x[at[: n_out // 2]] = np.nan
    x[at[n_out // 2 :]] = np.array(3e7, dtype) * np.sign(rng.standard_normal(n_out - n_out // 2)).astype(dtype)
    return x


def _round_trip(x: np.ndarray, bnd: int, mode: str = "abs", bound: float = 1e-2) -> bytes:
    ds = G.compress_device(cp.asarray(x), mode, bound, bnd)
    data = G.to_host(ds)
    ref = F.encode(x, mode, bound, bnd, version=V)
    assert data == ref, f"stream differs from the reference ({len(data)} vs {len(ref)} bytes)"
    y = G.decompress_device(ds).get()
    assert np.array_equal(y.view(np.uint8), F.decode(ref).view(np.uint8))
    return data


#: (elements, planted outliers for float32 / float64, the path the stream's count takes);
#: float32's own rounding adds a few outliers of the smooth part, hence the two counts
PATHS = [
    (100_000, (0, 0), "none"), (100_000, (1, 1), "kernel"), (100_000, (2, 2), "kernel"),
    (100_000, (777, 777), "kernel"),
    (400_000, (4085, 4097), "kernel"),
    (400_000, (6000, 6000), "kernel"),  # the first launch's room is 6250
    (1_200_000, (16000, 16000), "kernel"),  # under SORT_MAX (16384), room 18750
    (1_200_000, (16400, 16400), "after"),  # past it: sorted after the wait
    (100_000, (3000, 3000), "relaunch"),  # beyond the first launch's room (1562)
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,planted,path", PATHS)
def test_every_outlier_path_gives_the_reference_bytes(dtype, n, planted, path) -> None:
    x = _with_outliers(n, planted[dtype == np.float64], dtype, seed=planted[dtype == np.float64])
    data = _round_trip(x, 1)
    count, cap = F.parse_header(data).n_outliers, G._outlier_cap(n)
    sort_max = G._sort_kernel(np.dtype(dtype).name, G._device_id())[1]
    assert sort_max == G.SORT_MAX  # the H200's opt-in shared memory holds it
    taken = ("none" if count == 0 else "kernel" if count <= min(sort_max, cap)
             else "after" if count <= cap else "relaunch")
    assert taken == path, (count, cap)


def test_outliers_with_corner_blocks_in_2d_and_3d() -> None:
    x = _with_outliers(64 * 96 * 100, 900, np.float32, seed=4).reshape(64, 96, 100)
    x[:, :, :40] = 0.0  # corner-only blocks (format 3) beside payload blocks
    x[:, ::7, 41] = np.nan  # and outliers between them
    for bnd in (2, 3):
        data = _round_trip(x, bnd)
        h = F.parse_header(data)
        assert h.n_outliers > 900 and (h.version < 3 or h.corner_bytes > 0)


def test_back_to_back_calls_keep_their_own_bytes() -> None:
    """Calls queued without a wait between them (each one's header and outliers still going
    up from the staging buffer when the next starts), on one stream and on two."""
    xs = [_with_outliers(50_000 + 1000 * k, 10 * k + 1, np.float32, seed=k) for k in range(4)]
    refs = [F.encode(x, "abs", 1e-2, 1, version=V) for x in xs]
    streams = [G.compress_device(cp.asarray(x), "abs", 1e-2, 1) for x in xs]
    assert [G.to_host(ds) for ds in streams] == refs
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    dev = [cp.asarray(x) for x in xs]
    cp.cuda.Device().synchronize()
    out = []
    for k, x in enumerate(dev):
        with s1 if k % 2 else s2:
            out.append(G.compress_device(x, "abs", 1e-2, 1))
    s1.synchronize()
    s2.synchronize()
    assert [G.to_host(ds) for ds in out] == refs
    ys = [G.decompress_device(ds) for ds in streams]  # back to back as well
    for y, ref in zip(ys, refs):
        assert np.array_equal(y.get().view(np.uint8), F.decode(ref).view(np.uint8))


def test_rel_mode_range_pass_and_empty_arrays() -> None:
    x = _with_outliers(70_001, 30, np.float64, seed=9)
    _round_trip(x, 1, "rel", 1e-3)
    assert G.device_range(cp.zeros(0, np.float32)) is None
    for shape, bnd in (((0,), 1), ((0, 5), 2), ((3, 0, 4), 3)):
        e = np.zeros(shape, np.float32)
        ds = G.compress_device(cp.asarray(e), "rel", 1e-3, bnd)
        assert G.to_host(ds) == F.encode(e, "rel", 1e-3, bnd, version=V)
        assert G.decompress_device(ds).shape == shape
