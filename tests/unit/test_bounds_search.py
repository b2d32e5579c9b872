"""psnr and ratio searches on real codecs: every codec lands in the window, or says honestly
that its control is too coarse (with the closest trials on both sides and no setting left
between them); the trial budget holds; the outcome has the shape the answers read."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfscout.codecs import Compressed, get_codec
from perfscout.codecs.registry import codec_class
from perfscout.datasets import synthetic
from perfscout.tools import bounds as B
from perfscout.tools.evaluate import evaluate_full

CPU_CODECS = [c for c in ("sz3", "sz2", "sz3-h5", "zfp") if codec_class(c).availability()[0]]
SUMMARY_KEYS = {"target", "metric", "tolerance", "window", "reached", "trials", "closest_below", "closest_above",
                "too_coarse"}


class Counted:
    """A codec's compress/decompress, counted (the budget is in calls, not in trials)."""

    def __init__(self, codec: str, x: np.ndarray) -> None:
        self.codec, self.x, self.compressions, self.decompressions = codec, x, 0, 0
        self.control = B.AbsControl(codec_class(codec).abs_control_step)

    def compress(self, eb: float) -> Compressed:
        self.compressions += 1
        return get_codec(self.codec, "abs", eb).compress(self.x)

    def decompress(self, c: Compressed) -> np.ndarray:
        self.decompressions += 1
        return get_codec(self.codec, "abs", c.bound).decompress(c)


def _psnr_search(codec: str, x: np.ndarray, target: float) -> tuple[B.SearchOutcome, Counted]:
    calls = Counted(codec, x)
    return B.search_psnr(x, target, calls.compress, calls.decompress, control=calls.control), calls


def assert_honest_psnr(out: B.SearchOutcome, target: float, step: float) -> None:
    """In the window, or too_coarse with a trial on each side and no setting between them."""
    lo, hi = out.window
    assert (lo, hi) == (target, target + B.PSNR_WINDOW_DB)
    assert out.trials and len(out.trials) == out.iterations <= B.PSNR_MAX_TRIALS
    assert (out.abs_bound, out.achieved) in out.trials
    if out.in_window:
        assert out.stop == "in_window" and out.reached and not out.too_coarse
        return
    assert out.stop in ("too_coarse", "unreachable", "budget", "non_monotone"), out.stop
    assert out.note("PSNR")  # a miss of the window is said
    if out.too_coarse:
        assert out.closest_below is not None and out.closest_above is not None
        assert out.closest_below[1] < lo and out.closest_above[1] > hi
        # the kept trial reaches the target with the least overshoot
        assert (out.abs_bound, out.achieved) == out.closest_above and out.reached
        below = [eb for eb, v in out.trials if v < lo]
        above = [eb for eb, v in out.trials if v > hi]
        # no setting of the control lies between some trial under and some trial over the window
        gap = min(max(a, b) / min(a, b) for a in above for b in below)
        assert gap <= (step if step > 1 else 1.01) * (1 + 1e-9)


@pytest.fixture(scope="module")
def fields() -> dict[str, np.ndarray]:
    return {"grf": synthetic("grf", (48, 64), dtype="f32", seed=3).array,
            "smooth3d": synthetic("smooth", (12, 24, 24), dtype="f32", seed=4).array}


@pytest.mark.parametrize("codec", CPU_CODECS)
@pytest.mark.parametrize("target", [40.0, 60.0, 80.0, 100.0])
@pytest.mark.parametrize("name", ["grf", "smooth3d"])
def test_psnr_search_lands_in_the_window_or_says_why(fields: dict[str, np.ndarray], codec: str,
                                                     target: float, name: str) -> None:
    x = fields[name]
    out, calls = _psnr_search(codec, x, target)
    assert_honest_psnr(out, target, codec_class(codec).abs_control_step)
    # the budget is the number of compress+decompress calls, one pair per trial
    assert calls.compressions == calls.decompressions == out.iterations <= B.PSNR_MAX_TRIALS
    # the kept stream is the chosen trial's, and its PSNR is the record's definition
    from perfscout.analysis.metrics import psnr

    assert out.compressed is not None and out.compressed.bound == out.abs_bound
    assert psnr(x, out.reconstructed) == pytest.approx(out.achieved)
    if codec != "zfp":  # a continuous control: in the window, or a jump across it within 1 %
        assert out.in_window or out.too_coarse


def test_zfp_is_searched_on_powers_of_two_and_says_when_it_cannot_land(fields: dict[str, np.ndarray]) -> None:
    x = fields["grf"]
    for target in (40.0, 60.0, 80.0):
        out, _ = _psnr_search("zfp", x, target)
        assert all(math.frexp(eb)[0] == 0.5 for eb, _ in out.trials)  # only settings zfp distinguishes
        assert len({eb for eb, _ in out.trials}) == len(out.trials)  # no setting tried twice
        assert_honest_psnr(out, target, 2.0)
        # far closer than the old first-trial-that-reaches (20-35 dB over): within one 2x step
        assert out.achieved - target < 8.0


def test_the_outcome_summary_has_the_contract_shape(fields: dict[str, np.ndarray]) -> None:
    out, _ = _psnr_search("zfp", fields["grf"], 60.0)
    doc = out.summary()
    assert SUMMARY_KEYS <= set(doc)
    assert doc["metric"] == "psnr" and doc["tolerance"] == B.PSNR_WINDOW_DB and doc["window"] == [60.0, 60.5]
    assert doc["trials"] == [[eb, v] for eb, v in out.trials] and doc["too_coarse"] == out.too_coarse
    for side in ("closest_below", "closest_above"):
        assert doc[side] is None or (isinstance(doc[side], list) and len(doc[side]) == 2)
    assert [p[0] for p in doc["points"]] == [eb for eb, _ in out.trials]
    assert all(p[1] > 0 and p[2] == v for p, (_, v) in zip(doc["points"], out.trials))
    import json

    assert json.loads(json.dumps(doc)) == doc  # plain JSON values


@pytest.mark.parametrize("codec", CPU_CODECS)
@pytest.mark.parametrize("target", [6.0, 12.0, 25.0])
def test_ratio_search_lands_within_one_percent_or_says_why(fields: dict[str, np.ndarray], codec: str,
                                                           target: float) -> None:
    x = fields["grf"]
    calls = Counted(codec, x)
    out = B.search_ratio(x, target, calls.compress, control=calls.control)
    assert calls.compressions == out.iterations <= B.RATIO_MAX_ITER and calls.decompressions == 0
    assert out.window == pytest.approx((target * 0.99, target * 1.01))
    if out.reached:
        assert abs(out.achieved - target) <= B.RATIO_TOLERANCE * target and out.stop == "in_window"
    elif out.stop == "unreachable":  # beyond what the loosest bound gives (zfp's bound stops at R)
        assert all(v < out.window[0] for _, v in out.trials) and out.closest_above is None
        assert (out.abs_bound, out.achieved) == out.closest_below and "not reached" in out.note("ratio")
    else:
        assert out.too_coarse, out.stop
        assert "not reached" in out.note("ratio")
        assert out.closest_below is not None and out.closest_above is not None
        assert out.closest_below[1] < out.window[0] and out.closest_above[1] > out.window[1]
        assert (out.abs_bound, out.achieved) == out.closest_above  # reaches the target, least overshoot
    assert x.nbytes / out.compressed.nbytes == pytest.approx(out.achieved)


def test_an_unreachable_ratio_keeps_the_closest_and_stops_early() -> None:
    x = synthetic("grf", (32, 32), dtype="f32", seed=0).array
    out = B.search_ratio(x, 1e6, lambda eb: get_codec("sz3", "abs", eb).compress(x))
    assert not out.reached and out.stop == "unreachable" and out.iterations <= 4
    assert (out.abs_bound, out.achieved) == max(out.trials, key=lambda t: t[1]) == out.closest_below


def test_a_stepped_control_is_too_coarse_and_keeps_both_sides() -> None:
    """A codec whose PSNR moves in 10 dB steps: no setting lands in a 0.5 dB window."""
    x = synthetic("grf", (16, 16), dtype="f32", seed=1).array
    control = B.AbsControl(2.0)

    def compress(eb: float) -> Compressed:
        return Compressed(data=b"\0" * 64, codec_id="step", shape=x.shape, dtype="float32", mode="abs", bound=eb)

    def decompress(c: Compressed) -> np.ndarray:
        rng = np.random.default_rng(0)
        return (x + rng.uniform(-1, 1, x.shape) * c.bound * 0.4).astype(np.float32)

    out = B.search_psnr(x, 61.2, compress, decompress, control=control)
    assert out.too_coarse and out.stop == "too_coarse" and out.reached
    assert out.closest_below[1] < 61.2 < 61.7 < out.closest_above[1]
    assert out.closest_below[0] == 2 * out.closest_above[0]  # adjacent settings
    assert "too coarse" in out.note("PSNR") and "closest trials" in out.note("PSNR")


def test_abs_control_settings() -> None:
    c = B.AbsControl(2.0)
    assert c.snap(1.0) == 1.0 and c.snap(1.99) == 1.0 and c.snap(2.0) == 2.0 and c.snap(3e-7) == 2.0 ** -22
    assert c.between(2.0 ** -22, 2.0 ** -21, 3e-7) is None  # adjacent: nothing between
    assert c.between(2.0 ** -22, 2.0 ** -20, 2.0 ** -22) == 2.0 ** -21
    free = B.AbsControl()
    assert free.snap(0.3) == 0.3 and free.between(1.0, 1.005, 1.002) is None
    assert 1.0 < free.between(1.0, 2.0, 1.0) < 2.0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["smooth", "noise"]), seed=st.integers(0, 2 ** 16),
       target=st.floats(30.0, 110.0), codec=st.sampled_from(CPU_CODECS))
def test_psnr_search_on_smooth_and_noisy_fields(kind: str, seed: int, target: float, codec: str) -> None:
    rng = np.random.default_rng(seed)
    if kind == "smooth":
        x = synthetic("smooth", (24, 32), dtype="f32", seed=seed).array
    else:  # white noise: the hardest field to predict, the flattest curve
        x = rng.standard_normal((24, 32)).astype(np.float32) * float(rng.uniform(1e-3, 1e3))
    out, _ = _psnr_search(codec, x, target)
    assert_honest_psnr(out, target, codec_class(codec).abs_control_step)


@pytest.mark.parametrize("codec", ["zfp", "sz3"])
def test_evaluate_records_the_search(codec: str) -> None:
    x = synthetic("grf", (48, 64), dtype="f32", seed=3).array
    ev = evaluate_full(x, codec, "psnr", 70.0, repeats=1, isolate=False)
    doc = ev.extra["search"]
    assert SUMMARY_KEYS <= set(doc) and doc["metric"] == "psnr" and doc["window"] == [70.0, 70.5]
    assert ev.result.abs_bound == doc["chosen"][0] and ev.result.psnr == pytest.approx(doc["chosen"][1])
    assert ev.result.psnr >= 70.0 and (ev.result.psnr <= 70.5 or doc["too_coarse"])
    assert any(n.startswith("psnr search: ") and "of at most 12" in n for n in ev.notes)
    ev = evaluate_full(x, codec, "ratio", 10.0, repeats=1, isolate=False)
    doc = ev.extra["search"]
    assert doc["metric"] == "ratio" and doc["tolerance"] == 0.01
    if doc["reached"]:
        assert abs(ev.result.ratio - 10.0) <= 0.1 and ev.result.error == ""
    else:
        assert doc["too_coarse"] and "not reached" in ev.result.error
