"""The agent's compare_runs tool: real runs, confined paths, stored baselines by name,
failures as error artifacts (never an exception)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfscout.datasets import synthetic
from perfscout.tools import regress as G
from perfscout.tools.evaluate import evaluate_full
from perfscout.graph.regress_tools import compare_runs, tune_command
from perfscout.graph.toolbox import COMPARE_RUNS, TUNE


@pytest.fixture()
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, perfscout_home: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    field = synthetic("grf", (32, 64, 64), dtype="f32", seed=2)
    for name, bound in (("a", 1e-2), ("b", 1e-4)):
        ev = evaluate_full(field, "sz3", "rel", bound, repeats=5, dataset="grf")
        G.write_samples(G.RunSamples(kind="samples", tasks=[G.task_from_evaluation(ev, "sz3")]),
                        tmp_path / name / G.SAMPLES_NAME)
    return tmp_path


def test_the_tools_are_typed_with_the_artifact_contract() -> None:
    assert (COMPARE_RUNS.tool, TUNE.tool) == (compare_runs, tune_command)  # both in the whitelist
    assert compare_runs.response_format == "content_and_artifact"
    schema = compare_runs.tool_call_schema.model_json_schema()
    assert set(schema["required"]) == {"baseline", "candidate"}
    assert "runtime" not in schema["properties"]
    tune_schema = tune_command.tool_call_schema.model_json_schema()
    assert "runtime" not in tune_schema["properties"] and "space" in tune_schema["properties"]


def test_compare_runs_answers_in_a_sentence(runs: Path) -> None:
    summary, art = compare_runs.func(baseline="a", candidate="b")
    assert art["kind"] == "result" and art["error"] == ""
    assert art["data"]["verdict"] == "regressed"  # CR drops at the tighter bound
    assert "regressed" in summary and "ratio" in summary
    summary, art = compare_runs.func(baseline="a", candidate="a", threshold=0.1)
    assert art["data"]["verdict"] != "regressed" and art["data"]["threshold"] == 0.1


def test_stored_baselines_pass_by_name_and_paths_are_confined(runs: Path) -> None:
    G.save_baseline("nightly", runs / "a")
    _, art = compare_runs.func(baseline="nightly", candidate="b")
    assert art["kind"] == "result" and art["data"]["baseline"]["name"] == "nightly"
    _, art = compare_runs.func(baseline="/etc", candidate="b")
    assert art["kind"] == "error" and "outside" in art["error"]
    _, art = compare_runs.func(baseline="a", candidate="nosuch")
    assert art["kind"] == "error" and "neither a run directory" in art["error"]
