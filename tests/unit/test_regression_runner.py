"""The regression runner on real measurements: real codec evaluations, the agent's real
observation format (written by the real evaluate_codec tool), stored baselines, pairing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from perfscout.datasets import synthetic
from perfscout.errors import InputError
from perfscout.state.agent import Observation
from perfscout.tools import regress as G
from perfscout.graph.tools import evaluate_codec
from perfscout.tools.evaluate import evaluate_full

FIELD = synthetic("grf", (48, 64, 64), dtype="f32", seed=3)  # ~0.8 MB: codec times well above 100 us


def _run(*evs_keys, source: str = "mem") -> G.RunSamples:
    return G.RunSamples(source=source, tasks=[G.task_from_evaluation(ev, key) for ev, key in evs_keys])


@pytest.fixture(scope="module")
def sz3_two_bounds():
    loose = evaluate_full(FIELD, "sz3", "rel", 1e-2, repeats=5, dataset="grf")
    tight = evaluate_full(FIELD, "sz3", "rel", 1e-4, repeats=5, dataset="grf")
    return loose, tight


def test_two_settings_of_a_real_codec(sz3_two_bounds) -> None:
    """sz3 at rel 1e-4 against rel 1e-2 on the same field: the CR drops (a regression of
    quality), the max error improves; the keys and bounds differ, so pair on dataset+codec."""
    loose, tight = sz3_two_bounds
    base, cand = _run((loose, "a")), _run((tight, "b"))
    with_ids = G.compare_runs(base, cand)
    assert with_ids.tasks == [] and with_ids.baseline_only == ["a"] and with_ids.candidate_only == ["b"]
    res = G.compare_runs(base, cand, match=["dataset", "codec", "mode"])
    assert len(res.tasks) == 1 and res.verdict == "regressed"
    by = {m.metric: m for m in res.tasks[0].metrics}
    assert by["ratio"].verdict == "regressed" and by["ratio"].change < -0.3
    assert by["ratio"].baseline == pytest.approx(loose.result.ratio)
    assert by["max_abs_err"].verdict == "improved"
    assert by["bound_ok"].verdict == "unchanged" and by["ran"].verdict == "unchanged"
    assert by["compress_s"].n_baseline == 5 and by["compress_s"].n_candidate == 5
    assert res.tasks[0].identity_changes == {"bound": [repr(1e-2), repr(1e-4)]}
    assert "regressed" in res.sentence and "ratio" in res.sentence


def _interleaved_runs(n: int) -> tuple[G.RunSamples, G.RunSamples]:
    """Two runs of one configuration, their n repeats taken in turns (a, b, a, b, ...): a load
    step on the machine (another xdist worker, another user) then lands in both runs alike,
    as it does in an interleaved `perfscout bench`; two back-to-back runs would differ by it."""
    runs: dict[str, G.TaskSamples] = {}
    for _ in range(n):
        for side in ("a", "b"):
            task = G.task_from_evaluation(evaluate_full(FIELD, "zfp", "abs", 1e-3, repeats=1, dataset="grf"), "t")
            if side not in runs:
                runs[side] = task
            else:
                for name, samples in task.measured.items():
                    runs[side].measured.setdefault(name, []).extend(samples)
    return G.RunSamples(source="mem", tasks=[runs["a"]]), G.RunSamples(source="mem", tasks=[runs["b"]])


def test_same_real_configuration_is_never_a_regression() -> None:
    """Two runs of one configuration, on this (shared, noisy) machine."""
    res = G.compare_runs(*_interleaved_runs(7))
    assert res.verdict != "regressed", res.sentence
    by = {m.metric: m for m in res.tasks[0].metrics}
    assert by["ratio"].verdict == "unchanged" and by["max_abs_err"].verdict == "unchanged"
    assert by["compress_s"].verdict in ("unchanged", "too_noisy") and by["compress_s"].n_baseline == 7


def test_a_faster_codec_that_breaks_its_bound_is_a_regression() -> None:
    """Values spanning 60 decades: sz3 holds abs 1e-3, zfp's accuracy mode does not."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(20_000) * 10.0 ** rng.integers(-30, 30, 20_000)).astype(np.float32)
    good = evaluate_full(x, "sz3", "abs", 1e-3, repeats=5, dataset="decades")
    bad = evaluate_full(x, "zfp", "abs", 1e-3, repeats=5, dataset="decades")
    assert good.result.bound_ok is True and bad.result.bound_ok is False
    res = G.compare_runs(_run((good, "t")), _run((bad, "t")))
    by = {m.metric: m for m in res.tasks[0].metrics}
    assert by["bound_ok"].verdict == "regressed" and res.verdict == "regressed"
    assert res.tasks[0].identity_changes["codec"] == ["sz3", "zfp"]


def test_a_candidate_that_fails_is_a_regression(sz3_two_bounds) -> None:
    base = _run((sz3_two_bounds[0], "t"))
    failed = G.TaskSamples(key="t", identity=base.tasks[0].identity, ran=False, status="codec_crashed",
                           error="codec exited with SIGSEGV")
    res = G.compare_runs(base, G.RunSamples(source="c", tasks=[failed]))
    assert res.verdict == "regressed"
    ran = res.tasks[0].metrics[0]
    assert ran.metric == "ran" and "SIGSEGV" in ran.reason


def _agent_run(run_dir: Path, key: str, *, repeats: int, bound: float = 1e-3, attempts: int = 1) -> Path:
    """A run directory holding what the real evaluate_codec tool returned, stored as the
    observe node stores it (results/<seq>-<call_id>.json)."""
    for a in range(1, attempts + 1):
        summary, art = evaluate_codec.func(dataset="synthetic:grf:64,64,64", codec="sz3", mode="rel",
                                           bound=bound, repeats=repeats)
        obs = Observation(seq=a, task_key=key, call_id=f"{key}.a{a}", tool="evaluate_codec",
                          args={"bound": bound}, kind=art["kind"], summary=summary, data=art["data"])
        (run_dir / "results").mkdir(parents=True, exist_ok=True)
        (run_dir / "results" / f"{a:03d}-{key}.a{a}.json").write_text(obs.model_dump_json())
    return run_dir


def test_agent_run_directories_pool_every_attempt(tmp_path: Path) -> None:
    a = _agent_run(tmp_path / "A", "t01", repeats=3, attempts=2)  # a re-run for noise: 6 repeats
    b = _agent_run(tmp_path / "B", "t01", repeats=6)
    run = G.load_run(a)
    assert run.kind == "agent" and len(run.tasks) == 1
    assert len(run.tasks[0].measured["compress_s"]) == 6
    res = G.compare_runs(a, b)
    assert res.tasks[0].paired_by == "task_key"
    assert res.verdict != "regressed"
    assert {m.metric for m in res.tasks[0].metrics} >= {"ran", "bound_ok", "compress_s", "decompress_s",
                                                         "ratio", "max_abs_err"}


def test_stored_baselines(tmp_path: Path, perfscout_home: Path) -> None:
    run = _agent_run(tmp_path / "A", "t01", repeats=5)
    path = G.save_baseline("main", run)
    assert path.parent == perfscout_home / "baselines" and G.list_baselines() == ["main"]
    import shutil

    shutil.rmtree(run)  # the baseline is a copy: the run may go
    loaded = G.load_run("main")
    assert loaded.name == "main" and len(loaded.tasks[0].measured["compress_s"]) == 5
    res = G.compare_runs("main", _agent_run(tmp_path / "B", "t01", repeats=5))
    assert res.baseline.name == "main" and "baseline 'main'" in res.sentence
    with pytest.raises(InputError, match="stored baselines: main"):
        G.load_run("nosuch")
    with pytest.raises(InputError, match="baseline name"):
        G.save_baseline("../escape", tmp_path / "B")


def test_bad_sources_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="is not a run directory"):
        G.load_run(tmp_path / "empty")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(InputError, match="cannot read samples"):
        G.load_run(tmp_path / "x.json")
    (tmp_path / "y.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(InputError, match="not a perfscout samples file"):
        G.load_run(tmp_path / "y.json")
    (tmp_path / "z.json").write_text(json.dumps({"format": G.SAMPLES_FORMAT, "tasks": [{"key": 3, "measured": 5}]}))
    with pytest.raises(InputError, match="malformed"):
        G.load_run(tmp_path / "z.json")
    with pytest.raises(InputError, match="no task measured speed; the runs have t"):
        G.compare_runs(G.RunSamples(tasks=[G.TaskSamples(key="a", measured={"t": [1.0]})]),
                       G.RunSamples(tasks=[G.TaskSamples(key="a", measured={"t": [1.0]})]), metrics=["speed"])
    with pytest.raises(InputError, match="cannot match on nosuch"):
        G.compare_runs(G.RunSamples(tasks=[G.TaskSamples(key="a", identity={"codec": "sz3"})]),
                       G.RunSamples(tasks=[G.TaskSamples(key="b", identity={"codec": "sz3"})]), match=["nosuch"])


def test_ambiguous_identities_are_not_paired() -> None:
    same = {"codec": "sz3", "dataset": "d"}
    base = G.RunSamples(tasks=[G.TaskSamples(key="a1", identity=same), G.TaskSamples(key="a2", identity=same)])
    cand = G.RunSamples(tasks=[G.TaskSamples(key="b1", identity=same)])
    res = G.compare_runs(base, cand)
    assert res.tasks == [] and any("ambiguous" in n for n in res.notes)


def test_report_section_markdown_and_html(sz3_two_bounds, tmp_path: Path) -> None:
    loose, tight = sz3_two_bounds
    res = G.compare_runs(_run((loose, "a"), source="<b>base</b>"), _run((tight, "a")))
    md, html = G.write_regression_report(res, md=tmp_path / "r.md", html=tmp_path / "r.html")
    text = md.read_text()
    assert "## Regression check" in text and "| a | regressed | ratio |" in text
    page = html.read_text()
    assert "<b>base</b>" not in page and "&lt;b&gt;base&lt;/b&gt;" in page  # every value escaped
    assert "Mann–Whitney" in page
    section = G.regression_markdown(res, level=3)
    assert section.startswith("### Regression check") and "# perfscout" not in section
    doc = json.loads(res.model_dump_json())
    assert doc["verdict"] == "regressed" and doc["tasks"][0]["metrics"][0]["metric"] == "ran"
