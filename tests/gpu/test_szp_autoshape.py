"""szp's automatic block shape on the GPU: the device chooses what the NumPy reference
chooses on the same array (the same sample, byte-identical sample streams), the codec and
the GPU evaluation record it, and what one choice costs on a large field.

Runs only where CuPy sees a CUDA device (the ``gpu`` marker skips it elsewhere). The cost is
recorded as the test's ``szp_auto_choice_us`` property (``--junitxml``); the measured figures
come from ``benchmarks/gpu_codec.py autoshape``, never from a timed assertion.
"""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from perfscout.codecs.szp import autoshape as A
from perfscout.codecs.szp import format as F
from perfscout.codecs.szp.codec import SZPGpuCodec
from tests.unit.test_szp_autoshape import SYNTHETIC, TOLERANCE, smooth3d_slab, stacked_levels

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy", reason="CuPy is needed for the GPU codec tests")
from perfscout.codecs.szp import gpu as G  # noqa: E402

#: The format the kernels write (the reference writes the sample in the same one).
V = getattr(G, "WRITE_VERSION", F.VERSION)


def _same_choice(dev: A.ShapeChoice, ref: A.ShapeChoice) -> None:
    assert (dev.block_ndim, dev.sample_bytes, dev.sample_elems, dev.estimated_bytes) == \
           (ref.block_ndim, ref.sample_bytes, ref.sample_elems, ref.estimated_bytes)


@pytest.mark.parametrize("rel", [1e-2, 1e-4])
@pytest.mark.parametrize("name", ["smooth3d_slab", "stacked_levels", "image2d", "last_axis_3", "last_axis_33",
                                  "odd_planes_4d", "float64", "with_nonfinite", "noise", "levels_of_short_rows"])
def test_the_gpu_chooses_what_the_reference_chooses(name, rel) -> None:
    x = SYNTHETIC[name]()
    xd = cp.asarray(x)
    eb = A.resolved_abs_bound(x, "rel", rel)
    assert A.resolved_abs_bound(xd, "rel", rel) == eb  # the device's range is the host's
    _same_choice(A.choose_block_ndim(xd, eb), A.choose_block_ndim(x, eb, version=V))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_kernel_only_sizes_equal_whole_streams(dtype) -> None:
    """autoshape sizes a device sample by the compress kernels alone (no outlier sort, corner
    packing or header): those sizes are compress_device's streams' lengths, outliers included
    (more of them than the first launch has room for, too)."""
    x = SYNTHETIC["with_nonfinite"]().astype(dtype)
    many = x.copy()
    many.reshape(-1)[::3] = np.nan  # a third outliers: beyond the first launch's room (n / 64)
    for arr in (x, many):
        xd = cp.asarray(arr)
        eb = A.resolved_abs_bound(arr, "rel", 1e-3)
        heads = A._device_headers(dict.fromkeys(A.candidates(arr.ndim), xd), eb)
        for b, h in heads.items():
            full = G.compress_device(xd, "abs", eb, b).header
            assert F.layout(h).total == F.layout(full).total
            assert (h.payload_words, h.n_outliers, h.corner_bytes, h.nblocks) == \
                   (full.payload_words, full.n_outliers, full.corner_bytes, full.nblocks)


def test_small_and_strided_device_arrays() -> None:
    x = stacked_levels(12, 90, 180)
    eb = A.resolved_abs_bound(x, "rel", 1e-3)
    ref = A.choose_block_ndim(x, eb, version=V)
    _same_choice(A.choose_block_ndim(cp.asfortranarray(cp.asarray(x)), eb), ref)  # gathered in place
    small = x[:2, :40, :50].copy()  # compressed whole with each candidate
    _same_choice(A.choose_block_ndim(cp.asarray(small), eb), A.choose_block_ndim(small, eb, version=V))


def test_real_fields(shared_fields: dict[str, np.ndarray]) -> None:
    for name, x in shared_fields.items():
        for rel in (1e-2, 1e-3, 1e-4):
            eb = A.resolved_abs_bound(x, "rel", rel)
            dev = A.choose_block_ndim(cp.asarray(x), eb)
            _same_choice(dev, A.choose_block_ndim(x, eb, version=V))
            full = {b: F.layout(G.compress_device(cp.asarray(x), "rel", rel, b).header).total
                    for b in A.candidates(x.ndim)}
            assert full[dev.block_ndim] <= (1 + TOLERANCE) * min(full.values()), (name, rel, full)


def test_the_codec_on_the_gpu_chooses_on_the_device_and_records_it() -> None:
    x = stacked_levels()
    codec = SZPGpuCodec("rel", 1e-3)
    c = codec.compress(cp.asarray(x))
    ref = A.choose_for(x, "rel", 1e-3, version=V)
    assert c.meta["device"] == "cuda" and c.meta["block_ndim_auto"] is True
    assert c.meta["block_ndim"] == ref.block_ndim == F.parse_header(c.data).block_ndim
    assert c.meta["block_sample_bytes"] == {str(k): v for k, v in ref.sample_bytes.items()}
    assert c.data == F.encode(x, "rel", 1e-3, ref.block_ndim, version=V, auto_block=True)
    ds = G.compress_device(cp.asarray(x), "rel", 1e-3, choose=A.choose_block_ndim)  # after its range pass
    assert ds.shape_choice.block_ndim == ref.block_ndim and ds.header.auto_block
    y = codec.decompress(c)
    assert np.max(np.abs(x.astype(np.float64) - y)) <= c.abs_bound
    # a host array on the GPU path (uploaded whole, then chosen on the device): the same shape
    assert codec.compress(x).meta["block_ndim"] == ref.block_ndim
    t = codec.timed_run(x, repeats=2)
    assert t is not None and t.compressed.meta["block_ndim"] == ref.block_ndim


def test_gpu_evaluation_compresses_with_the_auto_shape() -> None:
    from perfscout.tools.evaluate import evaluate_full

    x = stacked_levels()
    ev = evaluate_full(x, "szp-gpu", "rel", 1e-3, device="cuda", repeats=2, isolate=False)
    assert ev.result.bound_ok, ev.result.error
    meta = ev.compressed.meta
    eb = float(ev.result.abs_bound)
    assert meta["block_ndim_auto"] is True
    assert meta["block_ndim"] == A.choose_block_ndim(x, eb, version=V).block_ndim
    assert set(meta["block_sample_bytes"]) == {"1", "2", "3"}


def test_the_cost_of_a_choice_on_a_256_mib_field(record_property) -> None:
    """64 x 1024 x 1024 float32 on the device: the choice agrees with the reference's on the
    host copy, and its median wall time (synchronized) is recorded, not asserted."""
    x = cp.asarray(smooth3d_slab(64, 1024, 1024))
    eb = A.resolved_abs_bound(x, "rel", 1e-3)
    A.choose_block_ndim(x, eb)  # warm-up: the kernels compile for each block shape
    runs = [A.choose_block_ndim(x, eb) for _ in range(10)]
    assert len({(r.block_ndim, tuple(sorted(r.sample_bytes.items()))) for r in runs}) == 1
    _same_choice(runs[0], A.choose_block_ndim(x.get(), eb, version=V))
    assert runs[0].sample_elems <= 0.02 * x.size
    us = statistics.median(r.seconds for r in runs) * 1e6
    record_property("szp_auto_choice_us", round(us, 1))
    assert us > 0


@pytest.mark.parametrize("name", ["smooth3d_slab", "stacked_levels", "image2d", "last_axis_33", "float64"])
def test_one_launch_gathers_the_samples_draw_sample_draws(name) -> None:
    """The choice's gather kernel (szp_gather2 into reused buffers) gives draw_sample's
    arrays, bit for bit, and a second field of the same shape does not see the first's."""
    x = SYNTHETIC[name]()
    geo = A.sample_geometry(x.shape)
    if geo is None:
        pytest.skip("compressed whole: no sample")
    for arr in (x, x[::-1].copy()):
        xd = cp.asarray(arr)
        want = A.draw_sample(xd, geo)
        got = A._device_sample(xd, geo)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            assert np.array_equal(cp.asnumpy(g).view(np.uint8), cp.asnumpy(w).view(np.uint8))
