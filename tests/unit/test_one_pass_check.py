"""The bound check carried by the metric pass (tools.bounds.verify_and_measure) against the
two separate calls it replaces (verify_bound, quality_metrics: the oracles), and the
metric pass's threads (analysis.tile_pool): the same figures whatever their number."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfscout.analysis import streaming as S
from perfscout.analysis import tile_pool
from perfscout.analysis.metrics import quality_metrics
from perfscout.errors import InputError
from perfscout.tools import bounds as B


def _same(a: object, b: object) -> bool:
    """Equality that treats NaN as equal to NaN (Pearson of a constant pair), recursively."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(u, v) for u, v in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _assert_matches_oracles(x: np.ndarray, y: np.ndarray, *, threads: int = 1, **bound: float | None) -> B.VerifiedMetrics:
    got = B.verify_and_measure(x, y, 1000, threads=threads, **bound)
    assert got.check == B.verify_bound(x, y, **bound)  # status, counts, indices, message
    try:
        want = quality_metrics(x, y, 1000, threads=1)
    except (ArithmeticError, InputError) as exc:
        assert type(got.metrics_error) is type(exc) and str(got.metrics_error) == str(exc)
        assert got.metrics == {}
    else:
        assert got.metrics_error is None
        assert _same(got.metrics, want)
    return got


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 64 elements: a small field spans many chunks, seams and tiles."""
    monkeypatch.setattr(S, "STREAM_CHUNK_ELEMENTS", 64)
    monkeypatch.setattr(S, "SSIM_FAST_TILE_ELEMENTS", 2000)


def _field(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, offset: float) -> np.ndarray:
    grid = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    return (sum(np.sin(g * (i + 1)) for i, g in enumerate(grid)) + offset
            + 0.01 * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.usefixtures("small_chunks")
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), dtype=st.sampled_from(["float32", "float64"]),
       shape=st.sampled_from([(700,), (9, 50), (11, 12, 13), (3, 40, 8)]),
       offset=st.sampled_from([0.0, 5.0, -5.0]), mode=st.sampled_from(["abs", "pw_rel", "none"]),
       spoil=st.sampled_from(["none", "overshoot", "violate", "zero", "both"]))
def test_one_pass_verdict_and_metrics_equal_the_two_calls(seed: int, dtype: str, shape: tuple[int, ...],
                                                           offset: float, mode: str, spoil: str) -> None:
    rng = np.random.default_rng(seed)
    x = _field(rng, shape, dtype, offset)
    eb = 1e-3
    noise = rng.uniform(-eb, eb, shape)
    y = (x + (noise * np.abs(x) if mode == "pw_rel" else noise)).astype(dtype)
    flat = y.reshape(-1)
    k = rng.integers(0, flat.size, 3)
    if spoil in ("overshoot", "both"):  # beyond the bound by a rounding step only
        base = x.reshape(-1)[k[0]]
        allowed = eb * abs(float(base)) if mode == "pw_rel" else eb
        flat[k[0]] = np.nextafter(np.asarray(base + allowed, dtype=dtype), np.asarray(np.inf, dtype=dtype))
    if spoil in ("violate", "both"):  # well beyond it, twice (ties: the first counts)
        flat[k[1]] = x.reshape(-1)[k[1]] + 10 * eb * (1 + abs(float(x.reshape(-1)[k[1]])))
        flat[k[2]] = x.reshape(-1)[k[2]] - 10 * eb * (1 + abs(float(x.reshape(-1)[k[2]])))
    if spoil == "zero":  # an exact zero in the original, changed: point-wise infinite
        x.reshape(-1)[k[0]] = 0
        flat[k[0]] = eb
    bound = {"abs": {"abs_bound": eb}, "pw_rel": {"pw_rel_bound": eb}, "none": {}}[mode]
    got = _assert_matches_oracles(x, y, **bound)
    assert got.one_pass  # finite pair, no rescale: the fast path carried the check
    assert _same(B.verify_and_measure(x, y, 1000, threads=3, **bound).metrics, got.metrics)
    # The range a rel bound was resolved with, shared with the pass: nothing changes.
    shared = B.verify_and_measure(x, y, 1000, threads=2, x_extremes=B.finite_extremes(x), **bound)
    assert shared.check == got.check and _same(shared.metrics, got.metrics)


@pytest.mark.usefixtures("small_chunks")
@pytest.mark.parametrize("case", ["nan_back", "inf_back", "huge_f64", "tiny_f64", "overflow_f64", "constant", "exact"])
def test_general_paths_keep_the_same_verdict(case: str) -> None:
    rng = np.random.default_rng(7)
    x = _field(rng, (10, 30), "float64", 1.0)
    y = x + rng.uniform(-1e-3, 1e-3, x.shape)
    if case == "nan_back":
        y[3, 4] = np.nan
    elif case == "inf_back":
        y[5, 6] = -np.inf
    elif case == "huge_f64":  # rescaled metrics: past 2^200
        x, y = x * 1e300, y * 1e300
    elif case == "tiny_f64":
        x, y = x * 1e-300, y * 1e-300
    elif case == "overflow_f64":  # y - x overflows float64
        x[0, 0], y[0, 0] = 1.7e308, -1.7e308
    elif case == "constant":
        x[:] = 2.5
    elif case == "exact":
        y = x.copy()
    for bound in ({"abs_bound": 1e-3 * (1e300 if case == "huge_f64" else 1e-300 if case == "tiny_f64" else 1)},
                  {"pw_rel_bound": 1e-2}, {}):
        got = _assert_matches_oracles(x, y, threads=2, **bound)
        # Non-finite or overflowing pairs leave the fast path before it has read every chunk:
        # the check then ran its own scan.
        assert got.one_pass == (case not in ("nan_back", "inf_back", "overflow_f64"))


def test_one_pass_refuses_what_verify_bound_refuses() -> None:
    x = np.ones((4, 4), np.float32)
    with pytest.raises(InputError, match="shape"):
        B.verify_and_measure(x, np.ones((4, 5), np.float32), 10, abs_bound=1.0)
    with pytest.raises(InputError, match="finite and >= 0"):
        B.verify_and_measure(x, x, 10, abs_bound=math.inf)
    with pytest.raises(InputError, match="empty"):
        B.verify_and_measure(x[:0], x[:0], 10, abs_bound=1.0)
    with pytest.raises(InputError, match="compressed size"):
        B.verify_and_measure(x, x, 0, abs_bound=1.0)
    with pytest.raises(InputError, match="metric threads"):
        B.verify_and_measure(x, x, 10, abs_bound=1.0, threads=0)


def test_threads_change_nothing_on_a_field_of_many_chunks_and_tiles() -> None:
    # Real chunk and tile sizes: 2 Mi elements, 8 chunks, a few hundred SSIM tiles.
    rng = np.random.default_rng(3)
    x = _field(rng, (32, 256, 256), "float32", 2.0)
    y = (x + rng.uniform(-1e-3, 1e-3, x.shape)).astype(np.float32)
    y[5, 6, 7] += 0.01  # a violation, in one chunk only
    one = B.verify_and_measure(x, y, 12345, abs_bound=1e-3, threads=1)
    assert one.check.status == "bound_violated" and one.check.n_violations == 1
    for n in (2, 3):
        other = B.verify_and_measure(x, y, 12345, abs_bound=1e-3, threads=n)
        assert other.check == one.check
        assert _same(other.metrics, one.metrics)  # bit for bit: reduced in chunk/tile order


def test_resolve_threads_follows_argument_environment_and_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tile_pool, "usable_cores", lambda: 4)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert tile_pool.resolve_threads(None) == 4
    assert tile_pool.resolve_threads(2) == 2
    assert tile_pool.resolve_threads(16) == 4  # never more than the cores it may use
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what a sweep child gets for its share
    assert tile_pool.resolve_threads(None) == 1
    assert tile_pool.resolve_threads(3) == 3  # an explicit value wins
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert tile_pool.resolve_threads(None) == 4
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InputError, match="metric threads"):
            tile_pool.resolve_threads(bad)  # type: ignore[arg-type]


def test_usable_cores_is_the_affinity_mask() -> None:
    import os

    assert tile_pool.usable_cores() == len(os.sched_getaffinity(0))


def test_map_ordered_keeps_item_order_and_raises_the_first_error() -> None:
    import time

    def slow_first(i: int) -> int:
        time.sleep(0.02 if i == 0 else 0.0)
        return i * i

    assert tile_pool.map_ordered(slow_first, range(8), 3) == [i * i for i in range(8)]

    def fails(i: int) -> int:
        if i in (2, 5):
            raise ValueError(f"item {i}")
        return i

    with pytest.raises(ValueError, match="item 2"):
        tile_pool.map_ordered(fails, range(8), 2)


def test_evaluate_metric_threads_same_record_and_refused_when_bad() -> None:
    pytest.importorskip("pysz")
    from perfscout.tools.evaluate import evaluate_full

    rng = np.random.default_rng(5)
    x = _field(rng, (24, 64, 64), "float32", 1.0)
    a = evaluate_full(x, "sz3", "rel", 1e-3, repeats=1, isolate=False, metric_threads=1)
    b = evaluate_full(x, "sz3", "rel", 1e-3, repeats=1, isolate=False, metric_threads=2)
    assert a.result.status == b.result.status == "ok"
    assert a.check == b.check
    assert _same(a.metrics, b.metrics)
    assert a.metrics == quality_metrics(x, a.reconstructed, a.compressed.nbytes)
    assert a.check == B.verify_bound(x, a.reconstructed, abs_bound=a.result.abs_bound)
    with pytest.raises(InputError, match="metric threads"):
        evaluate_full(x, "sz3", "rel", 1e-3, repeats=1, isolate=False, metric_threads=0)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int16"])
@pytest.mark.parametrize("where", [None, 0, 17, 99])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_range_and_nonfinite_scans_match_their_definitions(dtype: str, where: int | None, bad: float) -> None:
    """finite_extremes / find_nonfinite read min and max first (finite extremes prove a
    finite array); the answers are those of the isfinite mask."""
    a = np.linspace(-3, 7, 100).astype(dtype).reshape(10, 10)
    if where is not None and np.issubdtype(a.dtype, np.floating):
        a.flat[where] = bad
    finite = np.isfinite(a)
    assert B.finite_extremes(a) == (float(a[finite].min()), float(a[finite].max()))
    count = int((~finite).sum())
    first = tuple(int(i) for i in np.unravel_index(int(np.argmax(~finite.reshape(-1))), a.shape)) if count else ()
    assert B.find_nonfinite(a) == (count, first)
    assert B.find_nonfinite(a[:0]) == (0, ())


def test_evaluate_takes_its_metric_threads_from_the_sweep_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a sweep task gets: OMP_NUM_THREADS (child_env: its share of the cores) or the
    codec's own threads option; an explicit metric_threads wins."""
    pytest.importorskip("pysz")
    from perfscout.analysis import stream_fast as F
    from perfscout.tools.evaluate import evaluate_full

    used: list[int] = []
    real = F.map_ordered

    def spy(fn, items, threads):  # type: ignore[no-untyped-def]
        used.append(threads)
        return real(fn, items, threads)

    monkeypatch.setattr(F, "map_ordered", spy)
    compiled = S._compiled_module()
    if compiled is not None:  # the compiled kernels (large pairs, or when asked for) use the same pool
        monkeypatch.setattr(compiled, "map_ordered", spy)
    monkeypatch.setattr(tile_pool, "usable_cores", lambda: 4)
    x = _field(np.random.default_rng(2), (16, 40, 40), "float32", 1.0)

    def threads_of(**kw: object) -> set[int]:
        used.clear()
        ev = evaluate_full(x, "sz3", "abs", 1e-3, repeats=1, isolate=False, **kw)  # type: ignore[arg-type]
        assert ev.result.status == "ok"
        return set(used)

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads_of() == {1}
    assert threads_of(metric_threads=3) == {3}
    assert threads_of(options={"threads": 2}) == {2}  # the codec's threads: the cores the sweep gave it
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert threads_of() == {4}
