"""The agent asks how to treat missing values, and measures what the answer says.

A netCDF variable with fill values, or a raw field holding NaN, is refused by the
evaluation until the user chooses a policy: evaluate the unmasked values only (the mask
kept losslessly beside the stream), fill the masked points with a stated value, or keep
NaN/Inf beside the stream. The choice changes what is measured, so the graph asks
(``interrupt``), never assumes; the answer applies to every task on the same data.
Real netCDF file (xarray), real pysz and zfpy, the real graph with its SQLite checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perfscout import agent
from perfscout.graph.context import Context
from perfscout.graph.reflect import validate_answer

xr = pytest.importorskip("xarray")


def _ctx(home: Path) -> Context:
    return Context(home=str(home), planner="deterministic", noise_threshold=1e9)


@pytest.fixture
def masked_nc(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A temperature-like variable with a land mask stored as _FillValue 1e20."""
    rng = np.random.default_rng(0)
    t = (280 + np.cumsum(rng.standard_normal((6, 40, 64)), axis=2)).astype(np.float32)
    land = np.zeros((40, 64), bool)
    land[10:25, 20:40] = True
    t[:, land] = np.nan
    ds = xr.Dataset({"tas": (("time", "lat", "lon"), t, {"units": "K"})})
    path = tmp_path / "tas.nc"
    ds.to_netcdf(path, encoding={"tas": {"_FillValue": np.float32(1e20)}})
    return path, land


def _records(out: agent.RunOutcome) -> list[dict]:
    return json.loads((Path(out.run_dir) / "results.json").read_text())["records"]


def test_masked_points_are_asked_about_and_unmasked_only_is_measured(perfscout_home, masked_nc):
    path, land = masked_nc
    ctx = _ctx(perfscout_home)
    out = agent.run(f"compare sz3 and zfp at rel 1e-3 on the tas variable of {path}", thread_id="mask1",
                    context=ctx)
    assert out.status == "interrupted"
    assert set(out.question["needs"]) == {"masked"}
    n_masked = 6 * int(land.sum())
    assert f"{n_masked} masked points" in out.question["question"]
    out = agent.resume("mask1", "only the unmasked values, please", context=ctx)
    assert out.status == "done"
    recs = _records(out)
    assert sorted(r["codec"] for r in recs) == ["sz3", "zfp"]  # the answer reached the queued task too
    assert all(r["status"] == "ok" and r["bound_ok"] is True for r in recs)
    assert "masked" in out.report.lower()


def test_a_request_in_chinese_is_asked_in_chinese_and_answered_in_words(perfscout_home, masked_nc):
    path, land = masked_nc
    ctx = _ctx(perfscout_home)
    out = agent.run(f"在 {path} 的 tas 变量上用 sz3 压缩，绝对误差 0.05", thread_id="mask3", context=ctx)
    assert out.status == "interrupted"
    q = out.question["question"]
    assert "被掩码的点" in q and f"{6 * int(land.sum())} 个" in q and "跳过" in q
    assert "Answer with" not in q
    out = agent.resume("mask3", "只评估有效值", context=ctx)
    assert out.status == "done"
    (rec,) = _records(out)
    assert rec["status"] == "ok" and rec["bound_ok"] is True


@pytest.mark.parametrize(("words", "masked"), [
    ("compare sz3 and zfp at rel 1e-3 on the tas variable of {path}, only the valid values", "nan"),
    ("在 {path} 的 tas 变量上比较 sz3 和 zfp，相对误差 1e-3，忽略缺测值", "nan"),
    ("compare sz3 and zfp at rel 1e-3 on the tas variable of {path} and fill the missing values with 280", 280.0),
    ("在 {path} 的 tas 变量上比较 sz3 和 zfp，相对误差 1e-3，缺测值用 280 填充", 280.0),
])
def test_a_request_that_says_how_to_treat_missing_values_is_not_asked(perfscout_home, masked_nc, words, masked):
    path, _ = masked_nc
    out = agent.run(words.format(path=path), thread_id="said", context=_ctx(perfscout_home))
    assert out.status == "done", out.question
    recs = _records(out)
    assert sorted(r["codec"] for r in recs) == ["sz3", "zfp"]
    assert all(r["status"] == "ok" and r["bound_ok"] is True for r in recs)
    said = ("filled with 280", "填成 280") if masked == 280.0 else ("kept aside", "放在一边")
    assert any(w in out.report for w in said)  # the report says what was done with them


def test_a_fill_value_answer_is_compressed_and_checked_like_data(perfscout_home, masked_nc):
    path, _ = masked_nc
    ctx = _ctx(perfscout_home)
    out = agent.run(f"evaluate sz3 at abs 0.05 on the tas variable of {path}", thread_id="mask2", context=ctx)
    assert out.status == "interrupted"
    out = agent.resume("mask2", {"masked": "zero"}, context=ctx)  # neither 'nan' nor a number: asked again
    assert out.status == "interrupted" and "masked must be 'nan' or a finite number" in out.question["question"]
    out = agent.resume("mask2", {"masked": 280.0}, context=ctx)
    assert out.status == "done"
    (rec,) = _records(out)
    assert rec["status"] == "ok" and rec["bound_ok"] is True and rec["max_abs_err"] <= 0.05


def test_nan_in_a_raw_field_is_asked_about_and_passthrough_keeps_it(perfscout_home, tmp_path):
    x = np.cumsum(np.random.default_rng(2).standard_normal((48, 40)), axis=1).astype("<f4")
    x[3, 5] = np.nan
    x[7, :4] = np.inf
    raw = tmp_path / "with_nan.f32"
    x.tofile(raw)
    ctx = _ctx(perfscout_home)
    out = agent.run(f"evaluate zfp at abs 1e-2 on {raw}, shape 48x40 float32", thread_id="nan1", context=ctx)
    assert out.status == "interrupted"
    assert set(out.question["needs"]) == {"nonfinite"} and "5 NaN/Inf" in out.question["question"]
    out = agent.resume("nan1", "yes, keep them", context=ctx)
    assert out.status == "done"
    (rec,) = _records(out)
    assert rec["status"] == "ok" and rec["bound_ok"] is True


@pytest.mark.parametrize(("needs", "answer", "want"), [
    ({"masked": ""}, {"masked": "NaN"}, {"masked": "nan"}),
    ({"masked": ""}, {"masked": "-999"}, {"masked": -999.0}),
    ({"masked": ""}, "fill them with -9.5e3", {"masked": -9500.0}),
    ({"masked": ""}, "只评估有效值", {"masked": "nan"}),
    ({"nonfinite": ""}, "保留", {"nonfinite": "passthrough"}),
    ({"nonfinite": ""}, {"nonfinite": "passthrough"}, {"nonfinite": "passthrough"}),
])
def test_policy_answers_in_words_or_json(needs, answer, want) -> None:
    assert validate_answer(needs, answer) == (want, "")


@pytest.mark.parametrize(("needs", "answer", "problem"), [
    ({"masked": ""}, {"masked": "inf"}, "masked must be 'nan' or a finite number"),
    ({"masked": ""}, {"masked": True}, "masked must be 'nan' or a finite number"),
    ({"nonfinite": ""}, {"nonfinite": "refuse"}, "nonfinite must be 'passthrough'"),
])
def test_bad_policy_answers_say_what_is_wrong(needs, answer, problem) -> None:
    updates, why = validate_answer(needs, answer)
    assert updates is None and problem in why
