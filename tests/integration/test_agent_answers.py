"""The report's first lines answer the question asked, from what the run measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfscout import agent
from perfscout.graph.context import Context

ROOT = Path(__file__).resolve().parents[2]


def _ctx(home: Path) -> Context:
    return Context(home=str(home), planner="deterministic", noise_threshold=1e9)


def _answer(report: str) -> str:
    return report.split("## Answer", 1)[1].split("\n## ", 1)[0]


def _claims(out) -> list[dict]:
    return json.loads((Path(out.run_dir) / "claims.json").read_text())["claims"]


def _records(out) -> list[dict]:
    return json.loads((Path(out.run_dir) / "results.json").read_text())["records"]


def test_best_ratio_names_the_codec_with_the_highest_measured_ratio(perfscout_home):
    out = agent.run("which of sz3, sz2 and zfp gives the best ratio on synthetic:grf:32,32 at abs 1e-2? 1 repeat",
                    thread_id="best", context=_ctx(perfscout_home))
    assert out.status == "done"
    recs = _records(out)
    best = max((r for r in recs if r["bound_ok"]), key=lambda r: r["ratio"])
    answer = _answer(out.report)
    claims = _claims(out)
    ranking = next(c for c in claims if c["kind"] == "ranking" and c["figure"] == "ratio")
    assert ranking["subjects"][0] == best["codec"] and ranking["values"][best["codec"]] == best["ratio"]
    assert f"{best['codec']} gives the highest ratio, {best['ratio']:.4g}" in answer
    held = next(c for c in claims if c["kind"] == "bounds")
    assert held["verdict"] == "held" and sorted(held["subjects"]) == sorted(r["codec"] for r in recs)
    assert f"all {len(recs)} results held their bound" in answer
    # the Answer is exactly the claims' texts, in order
    assert [p.strip() for p in answer.strip().split("\n\n")] == [c["text"] for c in claims]
    # the report ends with how to use the best verified setting, as the libraries take it
    use_it = out.report.split("## Use it", 1)[1]
    assert f"{best['codec']} abs 0.01" in use_it and "numcodecs" in use_it and "```python" in use_it
    page = Path(out.html_path).read_text(encoding="utf-8")
    assert "<h2>Use it</h2>" in page and "<pre><code>" in page


def test_one_repeat_gives_no_speed_winner_only_both_figures(perfscout_home):
    out = agent.run("which is the fastest compressor, sz3 or zfp, on synthetic:smooth:64,64 at rel 1e-3, 1 repeat",
                    thread_id="fast", context=_ctx(perfscout_home))
    recs = _records(out)
    speed = next(c for c in _claims(out) if c["figure"] == "compress_MBps")
    # one timed repeat has no spread: the repeats cannot separate the two, whatever the medians
    assert speed["kind"] == "too_close" and speed["verdict"] == "too_close_to_call"
    assert speed["values"] == {r["codec"]: r["compress_MBps"] for r in recs}
    answer = _answer(out.report)
    assert "too close to call on this machine" in answer
    assert all(f"{r['codec']} {r['compress_MBps']:.4g} MB/s" in answer for r in recs)


def test_a_chinese_request_is_answered_in_chinese(perfscout_home):
    out = agent.run("在 synthetic:grf:16,16 上用绝对误差 1e-2 比较 sz3 和 zfp，重复 1 次", thread_id="zh",
                    context=_ctx(perfscout_home))
    answer = _answer(out.report)
    assert "压缩比最高" in answer and "满足误差界" in answer
    assert json.loads((Path(out.run_dir) / "claims.json").read_text())["language"] == "zh"


def test_a_codec_that_cannot_run_here_is_said_with_what_ran_instead(perfscout_home):
    from perfscout.codecs.registry import list_codecs

    absent = next((i for i in list_codecs() if not i.available), None)
    if absent is None:
        pytest.skip("every registered codec is usable on this machine")
    out = agent.run(f"compare {absent.id} and zfp at abs 1e-2 on synthetic:grf:16,16 with 1 repeat",
                    thread_id="absent", context=_ctx(perfscout_home))
    answer = _answer(out.report)
    first = _claims(out)[0]
    assert first["kind"] == "could_not_run" and first["subjects"][0] == absent.id
    assert first["detail"]["instead"] == ["zfp"]
    first_sentence = answer.strip().split("\n\n")[0]
    assert first_sentence.startswith(f"{absent.id} could not run here") and "what ran instead: zfp" in first_sentence
    assert {r["codec"] for r in _records(out)} == {"zfp"}


def test_machine_and_codec_questions_are_answered_from_the_tools(perfscout_home):
    out = agent.run("what is this machine?", thread_id="mach", context=_ctx(perfscout_home))
    platform = json.loads((Path(out.run_dir) / "platform.json").read_text())
    assert f"This machine: {platform['cpu']['model']}" in _answer(out.report)
    out = agent.run("which codecs are installed?", thread_id="cod", context=_ctx(perfscout_home))
    assert "Usable here: " in _answer(out.report) and "zfp (cpu)" in _answer(out.report)


def test_a_profile_file_is_diagnosed_and_the_answer_names_the_limiter(perfscout_home, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = agent.run("why are the kernels in tests/fixtures/ncu/h200_transpose_raw.csv slow?", thread_id="diag",
                    context=_ctx(perfscout_home))
    assert out.status == "done"
    obs = out.values["observations"][0]
    assert obs["tool"] == "diagnose_file" and obs["kind"] == "result"
    primary = obs["data"]["kernels"][0]["primary"]
    assert f"the primary limiter is {primary['title']}" in _answer(out.report)


def test_a_profile_file_outside_the_working_directory_that_the_request_did_not_name_is_refused(
        perfscout_home, tmp_path, monkeypatch):
    from perfscout.graph.tools import diagnose_file

    monkeypatch.chdir(tmp_path)
    reply = diagnose_file.invoke({"path": str(ROOT / "tests/fixtures/ncu/h200_transpose_raw.csv")})
    assert reply.startswith("refused") and "outside" in reply


def test_a_netcdf_variable_named_in_words_is_evaluated_with_its_bound_verified(perfscout_home, tmp_path):
    import netCDF4
    import numpy as np

    path = tmp_path / "era5.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("lat", 32)
        nc.createDimension("lon", 64)
        z = nc.createVariable("z", "i2", ("lat", "lon"))
        z.long_name, z.standard_name = "Geopotential", "geopotential"
        z.scale_factor, z.add_offset = np.float32(0.5), np.float32(5000.0)
        z[:] = 5000.0 + np.cumsum(np.random.default_rng(3).standard_normal((32, 64)), axis=1) * 40
        t = nc.createVariable("t", "f4", ("lat", "lon"))
        t[:] = 280.0
    out = agent.run(f"compare sz3 and zfp at rel 1e-3 on the geopotential z in {path}, 1 repeat", thread_id="nc",
                    context=_ctx(perfscout_home))
    assert out.status == "done", out.question
    recs = _records(out)
    assert {r["codec"] for r in recs} == {"sz3", "zfp"} and all(r["bound_ok"] for r in recs)
    assert all(r["shape"] == "32,64" for r in recs)
    assert "held their bound" in _answer(out.report)


def test_is_run_b_faster_than_run_a_compares_two_agent_runs(perfscout_home):
    ctx = _ctx(perfscout_home)
    for tid in ("runa", "runb"):
        out = agent.run("evaluate sz3 at abs 1e-2 on synthetic:grf:32,32 with 5 repeats", thread_id=tid, context=ctx)
        assert out.status == "done"
    out = agent.run("is run runb faster than run runa?", thread_id="cmp", context=ctx)
    assert out.status == "done", out.question
    task = out.values["plan"]["tasks"][0]
    assert task["tool"] == "compare_runs"
    assert task["args"]["baseline"].endswith("runa") and task["args"]["candidate"].endswith("runb")
    obs = out.values["observations"][0]
    assert obs["kind"] == "result", obs
    assert "regressed" not in obs["summary"].lower().replace("not regressed", "")  # same configuration
    assert "## Regression check" in out.report and obs["summary"][:60] in out.report


@pytest.fixture
def cpu_load():
    """A busy-loop process for the length of a test (what a shared machine does to timings)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(10)


def test_the_same_speed_question_twice_under_load_never_names_two_winners(perfscout_home, cpu_load):
    from perfscout.state.claims import answer_differences, read_claims

    ctx = _ctx(perfscout_home)
    request = "which compresses faster, sz3 or zfp, on synthetic:grf:256,256 at abs 1e-3? 5 repeats"
    outs = [agent.run(request, thread_id=f"load{i}", context=ctx) for i in range(2)]
    assert all(o.status == "done" for o in outs)
    claims = [read_claims(o.run_dir).claims for o in outs]
    speeds = [next(c for c in cs if c.figure == "compress_MBps") for cs in claims]
    for s in speeds:  # a winner only with the repeats' statistics behind it; otherwise both figures and spreads
        assert (s.kind, s.verdict) in (("ranking", "faster"), ("too_close", "too_close_to_call"))
        assert sorted(s.subjects) == ["sz3", "zfp"] and set(s.spread) == {"sz3", "zfp"}
    winners = {s.subjects[0] for s in speeds if s.verdict == "faster"}
    assert len(winners) <= 1, f"two runs named different winners: {[s.text for s in speeds]}"
    assert answer_differences(claims[0], claims[1]) == []


def test_perfscout_run_prints_the_run_id_first_then_the_answer_a_table_and_the_report_path(tmp_path):
    import os
    import subprocess
    import sys

    from perfscout.state.claims import read_claims

    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERFSCOUT_HOME": str(tmp_path / "home"),
           "PERFSCOUT_PLANNER": "deterministic", "PERFSCOUT_NOISE_THRESHOLD": "1e9", "COLUMNS": "80"}
    p = subprocess.run([sys.executable, "-m", "perfscout", "run", "compare sz3 and zfp at abs 1e-2 on "
                        "synthetic:grf:24,24 with 2 repeats", "--thread-id", "term"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-2000:]
    said = " ".join(p.stderr.split())
    # the id and the resume command come before anything ran
    assert said.startswith("run term started; if it stops, resume it with: perfscout resume term")
    assert said.index("perfscout resume term") < said.index("act ")
    out = p.stdout
    assert "<details>" not in out and "## " not in out and "|---" not in out
    claims = read_claims(tmp_path / "home" / "runs" / "term").claims
    assert claims and all(c.text in out.splitlines() for c in claims)  # the Answer: the claims' texts, one a line
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["sz3"], ["zfp"])]
    assert sorted(r[0] for r in rows) == ["sz3", "zfp"] and all("abs" in r for r in rows)  # the compact table
    assert f"Report: {tmp_path / 'home' / 'runs' / 'term' / 'report.md'} (HTML: " in out  # whole, not folded
