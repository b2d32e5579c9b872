"""End to end on real fields: the real graph, real codecs (pysz, zfpy), the Answer's claims
re-derived again from what the run directory stored.

Fields are NCAR SPERR's test data in ../shared/data (see its README); each test says so and
skips when its field is absent.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perfscout import agent
from perfscout.graph.claims_check import problem
from perfscout.graph.claims_facts import facts_from
from perfscout.graph.context import Context
from perfscout.graph.report import final_observations
from perfscout.graph.rundir import stored_observations
from perfscout.state.claims import read_claims

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
VORTICITY = DATA / "vorticity.512_512"
FIELD_999 = DATA / "999x999.float"


def _need(path: Path) -> None:
    if not path.is_file():
        pytest.skip(f"real field {path.name} is not here ({path}; the shared data of ../shared/data)")


def _run(home: Path, request: str, tid: str):
    out = agent.run(request, thread_id=tid, context=Context(home=str(home), planner="deterministic",
                                                            noise_threshold=1e9))
    assert out.status == "done", out.question
    return out


def _rederived(out) -> list:
    """The run's claims, each re-derived from the records and observations the run stored."""
    run_dir = Path(out.run_dir)
    finals = final_observations(stored_observations(run_dir))
    records = json.loads((run_dir / "results.json").read_text())["records"]
    facts = facts_from(out.values, records, finals)
    claims = read_claims(run_dir).claims
    assert claims and [problem(c, facts) for c in claims] == [""] * len(claims)
    report = (run_dir / "report.md").read_text()
    answer = report.split("## Answer", 1)[1].split("\n## ", 1)[0]
    assert [p.strip() for p in answer.strip().split("\n\n")] == [c.text for c in claims]
    return claims


def test_fixed_rate_is_answered_with_its_psnr_and_the_header_is_within_the_rate(perfscout_home):
    _need(VORTICITY)
    out = _run(perfscout_home, f"zfp fixed-rate, 8 bits/value on {VORTICITY} (512x512 float32): what PSNR do I get? "
               "2 repeats", "fr")
    claims = _rederived(out)
    rec = json.loads((Path(out.run_dir) / "results.json").read_text())["records"][0]
    assert rec["mode"] == "fixed_rate" and rec["bound_ok"] is None and rec["bitrate"] > 8  # the header
    single = next(c for c in claims if c.kind == "single")
    assert f"PSNR {rec['psnr']:.4g} dB" in single.text and f"ratio {rec['ratio']:.4g}" in single.text
    rate = [c for c in claims if c.kind == "target" and c.figure == "bitrate"]
    assert [c.verdict for c in rate] in ([], ["met_within_tolerance"])  # never "missed" for a header
    if rate:
        assert rate[0].detail["margin"] == pytest.approx(rec["bitrate"] - 8)


def test_a_bound_wider_than_half_the_range_is_warned_with_the_range(perfscout_home):
    _need(VORTICITY)
    x = np.fromfile(VORTICITY, dtype="<f4")
    vrange = float(x.max()) - float(x.min())
    out = _run(perfscout_home, f"compare sz3 and zfp at abs 1e-3 on {VORTICITY} (512x512 float32), 2 repeats", "wide")
    claims = _rederived(out)
    warn = next(c for c in claims if c.kind == "warning" and c.detail["warning"] == "bound_vs_range")
    assert sorted(warn.subjects) == ["sz3", "zfp"]
    assert warn.detail["value_range"] == pytest.approx(vrange) and warn.detail["fraction"] == pytest.approx(1e-3 / vrange)


def test_a_chinese_request_on_a_real_field_is_answered_in_chinese_with_every_codec(perfscout_home):
    _need(FIELD_999)
    out = _run(perfscout_home, f"在 {FIELD_999} (999x999 float32) 上用相对误差 1e-3 比较 sz3 和 zfp，重复 3 次", "zh")
    claims = _rederived(out)
    assert read_claims(out.run_dir).language == "zh"
    assert {s for c in claims for s in c.subjects} >= {"sz3", "zfp"}
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in c.text) for c in claims)
    speed = next(c for c in claims if c.figure == "compress_MBps")
    assert speed.verdict in ("faster", "too_close_to_call") and set(speed.spread) == {"sz3", "zfp"}


def test_a_packed_int16_variable_gives_the_ratio_against_the_stored_bytes(perfscout_home, tmp_path):
    import netCDF4

    path = tmp_path / "packed.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("y", 64)
        nc.createDimension("x", 96)
        z = nc.createVariable("z", "i2", ("y", "x"))
        z.scale_factor, z.add_offset = np.float32(0.5), np.float32(5000.0)
        z[:] = 5000.0 + np.cumsum(np.random.default_rng(3).standard_normal((64, 96)), axis=1) * 40
    out = _run(perfscout_home, f"evaluate sz3 at rel 1e-3 on z in {path}, 2 repeats", "packed")
    claims = _rederived(out)
    rec = json.loads((Path(out.run_dir) / "results.json").read_text())["records"][0]
    warn = next(c for c in claims if c.kind == "warning" and c.detail["warning"] == "unpacked")
    assert warn.detail["dtype_on_disk"] == "int16"
    item = 8 if rec["dtype"] == "f64" else 4
    assert warn.detail["ratio_vs_stored"] == pytest.approx(rec["ratio"] * 2 / item)
    assert f"{rec['ratio'] * 2 / item:.4g}" in warn.text
