"""Equal-quality figures from rate-distortion points: measured in the window, interpolated
(log ratio linear in PSNR) between the bracketing points and marked so, never extrapolated."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfscout.analysis import rate_distortion as rd
from perfscout.analysis.rate_distortion import RDPoint
from perfscout.analysis.report.blocks import plain
from perfscout.analysis.report.equal_quality import equal_quality_blocks
from perfscout.tools import bounds as B

CURVE = [RDPoint(40.0, 50.0, "t1"), RDPoint(10.0, 70.0, "t2"), RDPoint(4.0, 90.0, "t3")]


def test_a_point_in_the_window_is_measured() -> None:
    pts = CURVE + [RDPoint(12.0, 60.3, "t4"), RDPoint(11.0, 60.1, "t5")]
    res = rd.ratio_at_psnr(pts, 60.0)
    assert (res.value, res.how, res.points) == (12.0, "measured", (RDPoint(12.0, 60.3, "t4"),))
    assert rd.ratio_at_psnr([RDPoint(12.0, 60.6)], 60.0).how == "outside"  # 0.6 dB above: not in the window


def test_ratio_between_two_points_is_interpolated_in_log_ratio() -> None:
    res = rd.ratio_at_psnr(CURVE, 60.0)
    assert res.how == "interpolated" and res.points == (CURVE[0], CURVE[1])
    # halfway in PSNR between 50 dB (40x) and 70 dB (10x): the geometric mean of the ratios
    assert res.value == pytest.approx(math.sqrt(40.0 * 10.0))
    res = rd.ratio_at_psnr(CURVE, 85.0)
    assert res.value == pytest.approx(math.exp(math.log(10.0) + 0.75 * (math.log(4.0) - math.log(10.0))))


def test_psnr_at_a_ratio_is_measured_within_one_percent_else_interpolated() -> None:
    assert rd.psnr_at_ratio(CURVE, 10.09).how == "measured"
    assert rd.psnr_at_ratio(CURVE, 10.09).value == 70.0
    res = rd.psnr_at_ratio(CURVE, 20.0)  # log 20 is halfway between log 10 and log 40
    assert res.how == "interpolated" and res.value == pytest.approx(60.0)


@pytest.mark.parametrize("target", [45.0, 95.0, 200.0])
def test_a_target_outside_the_points_is_never_extrapolated(target: float) -> None:
    res = rd.ratio_at_psnr(CURVE, target)
    assert res.value is None and res.how == "outside" and res.span == (50.0, 90.0)
    assert rd.psnr_at_ratio(CURVE, 100.0).how == "outside" and rd.psnr_at_ratio(CURVE, 2.0).value is None


def test_non_finite_points_are_not_on_the_curve() -> None:
    pts = [RDPoint(3.0, math.inf, "lossless"), RDPoint(math.nan, 60.0), RDPoint(0.0, 61.0)]
    assert rd.ratio_at_psnr(pts, 60.0).how == "outside"
    assert rd.ratio_at_psnr(pts + CURVE, 95.0).how == "outside"  # the infinite PSNR brackets nothing


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(1.01, 1e4), st.floats(10.0, 150.0)), min_size=1, max_size=12),
       st.floats(0.0, 200.0))
def test_interpolation_stays_between_its_bracketing_points(raw: list[tuple[float, float]], target: float) -> None:
    pts = [RDPoint(r, p) for r, p in raw]
    res = rd.ratio_at_psnr(pts, target)
    lo, hi = min(p for _, p in raw), max(p for _, p in raw)
    if res.how == "outside":
        assert res.value is None
        assert target < lo or target > hi or not any(p < target for _, p in raw) or not any(p > target for _, p in raw)
    elif res.how == "measured":
        assert target <= res.points[0].psnr <= target + rd.PSNR_WINDOW_DB and res.value == res.points[0].ratio
    else:
        a, b = res.points
        assert a.psnr < target < b.psnr and lo < target < hi
        assert min(a.ratio, b.ratio) * (1 - 1e-9) <= res.value <= max(a.ratio, b.ratio) * (1 + 1e-9)


def test_series_take_records_and_their_search_trials() -> None:
    records = [
        {"task_key": "t1", "dataset": "d", "codec": "zfp", "device": "cpu", "mode": "psnr", "bound": 60.0,
         "ratio": 8.0, "psnr": 61.0, "status": "ok"},
        {"task_key": "t2", "dataset": "d", "codec": "sz3", "device": "cpu", "mode": "psnr", "bound": 60.0,
         "ratio": 20.0, "psnr": 60.2, "status": "ok"},
        {"task_key": "t3", "dataset": "d", "codec": "sz3", "device": "cpu", "mode": "abs", "bound": 1.0,
         "ratio": None, "psnr": None, "status": "error"},
    ]
    searches = {"t1": {"points": [[1e-3, 30.0, 40.0], [1e-4, 12.0, 55.0], [5e-5, 8.0, 61.0], [1e-9, 9.0, None]]}}
    series = rd.series_points(records, searches)
    assert sorted(series) == [("d", "sz3@cpu"), ("d", "zfp@cpu")]
    assert [p.source for p in series[("d", "zfp@cpu")]] == ["t1", "t1 trial 1", "t1 trial 2", "t1 trial 3"]
    assert rd.targets_of(records) == ([60.0], [])
    rows = rd.equal_quality(series, psnr_targets=[60.0])
    by = {r.series: r.result for r in rows}
    assert by["sz3@cpu"].how == "measured" and by["sz3@cpu"].value == 20.0
    assert by["zfp@cpu"].how == "interpolated" and 8.0 < by["zfp@cpu"].value < 12.0


def test_the_report_section_marks_every_figure() -> None:
    records = [
        {"task_key": "t1", "dataset": "d", "codec": "zfp", "device": "cpu", "mode": "psnr", "bound": 60.0,
         "ratio": 8.0, "psnr": 61.0, "status": "ok"},
        {"task_key": "t2", "dataset": "d", "codec": "sz3", "device": "cpu", "mode": "psnr", "bound": 60.0,
         "ratio": 20.0, "psnr": 60.2, "status": "ok"},
        {"task_key": "t3", "dataset": "d", "codec": "sz2", "device": "cpu", "mode": "abs", "bound": 1e-2,
         "ratio": 50.0, "psnr": 30.0, "status": "ok"},
    ]
    blocks = equal_quality_blocks(records, searches={"t1": {"points": [[1e-4, 12.0, 55.0]]}})
    text = "\n".join(plain(b.text) for b in blocks[:2])  # type: ignore[attr-defined]
    assert "At equal quality" in text and "never extrapolated" in text
    table = blocks[2]
    cells = {row[2]: [plain(c) for c in row] for row in table.rows}  # type: ignore[attr-defined]
    assert cells["sz3@cpu"][3] == "20" and cells["sz3@cpu"][5].startswith("measured: 60.2 dB (ratio 20), t2")
    assert cells["zfp@cpu"][3].startswith("≈") and cells["zfp@cpu"][5].startswith("interpolated between 55 dB")
    assert cells["sz2@cpu"][3] == "–" and "outside the measured range (30 dB to 30 dB)" in cells["sz2@cpu"][5]
    assert equal_quality_blocks([r for r in records if r["mode"] == "abs"]) == []  # nothing asked: no section


def test_the_window_is_the_one_the_search_uses() -> None:
    assert (B.PSNR_WINDOW_DB, B.RATIO_TOLERANCE) == (rd.PSNR_WINDOW_DB, rd.RATIO_TOLERANCE) == (0.5, 0.01)
