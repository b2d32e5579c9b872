"""Invariants over ALL committed ncu fixtures (planted suite + tests/fixtures/ncu), and the
planted-suite accuracy the benchmark reports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from perfscout.analysis.diagnosis import diagnose
from perfscout.analysis.diagnosis.render import markdown
from perfscout.tools.ncu_parse import load_raw_csv

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests" / "fixtures" / "ncu").glob("*raw*.csv")) + \
    sorted((ROOT / "benchmarks" / "planted" / "profiles").glob("*raw*.csv")) + \
    sorted((ROOT / "benchmarks" / "planted_library" / "profiles").glob("*raw*.csv"))
FINDING_KEYS = ["id", "title", "confidence", "evidence", "recommendation", "verify", "not_when",
                "expected_gain", "arch", "extra"]


def library_accuracy():
    """benchmarks/planted_library/accuracy.py, loaded by path (the planted suite's module
    of the same name may already be imported as ``accuracy``)."""
    import importlib.util

    path = ROOT / "benchmarks" / "planted_library" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("library_accuracy", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_library_suite_scores_and_beats_ncu_top_rule():
    """The library suite as labelled before profiling (labels.yaml); the misses are the
    cases whose labels the measurements contradict (labels_revised.yaml documents each)."""
    acc = library_accuracy()
    s = acc.evaluate()["summary"]
    assert s["cases"] == 24 and not s["not_profiled"] and s["labels"] == "original"
    assert s["ours_false_alarms"] == 0 and s["cited_metrics_absent"] == 0
    assert s["ours_top1"] >= 0.75 and s["ours_top1"] - s["ncu_top1"] >= 0.5
    rows = acc.evaluate(label_set="revised")["rows"]
    revised = {r["name"] for r in acc.revisions()}
    # only the misses were revised, and each revision is what the scored launch measured
    assert {r["case"] for r in acc.evaluate()["rows"] if r["ours_primary"] != r["expected"]} == revised
    s = acc.evaluate(label_set="revised")["summary"]
    assert s["ours_top1"] == 1.0 and s["ours_false_alarms"] == 0 and s["cited_metrics_absent"] == 0
    assert all(r["ours_primary"] == r["expected"] for r in rows)


def test_library_label_revisions_quote_the_profile(monkeypatch):
    """labels_revised.yaml's metric values are checked against the profile before scoring:
    a value the profile does not hold (a typo, a drifted copy) stops the scoring."""
    acc = library_accuracy()
    assert acc.check_revision_evidence({k.id: k for k in load_raw_csv(
        ROOT / "benchmarks/planted_library/profiles/library_raw.csv").kernels}) == []
    revs = acc.revisions()
    revs[0]["evidence"] = {**revs[0]["evidence"], "launch__grid_size": 264}
    monkeypatch.setattr(acc, "revisions", lambda: revs)
    with pytest.raises(ValueError, match="launch__grid_size is 132 in the profile, quoted 264"):
        acc.evaluate(label_set="revised")


def test_library_closed_loop_on_the_committed_fixes_run():
    import importlib.util

    path = ROOT / "benchmarks" / "planted_library" / "closed_loop.py"
    spec = importlib.util.spec_from_file_location("library_closed_loop", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = {r["case"]: r for r in mod.run()}
    assert rows["raw_stream_regs_ilp2"]["finding"] == "low_occupancy_registers"
    assert rows["raw_stream_regs_ilp2"]["verdict"] == "hit"
    assert rows["torch_index_add_hot"]["finding"] == "atomic_contention"
    assert rows["torch_index_add_hot"]["verdict"] == "hit"


def test_fixtures_exist():
    assert len(FIXTURES) >= 3


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_cited_metric_exists_in_the_input_profile(path):
    kernels = load_raw_csv(path).kernels
    out = diagnose(kernels)
    assert len(out["kernels"]) == len(kernels)
    for k, d in zip(kernels, out["kernels"], strict=True):
        assert list(d) == ["name", "primary", "findings", "metrics"] and d["name"] == k.name
        for f in d["findings"]:
            assert list(f) == FINDING_KEYS
            assert 0.0 <= f["confidence"] <= 1.0
            assert f["expected_gain"] is None or 0.0 <= f["expected_gain"] < 1.0
            for e in f["evidence"]:
                if e["metric"].startswith("derived:"):
                    assert e["inputs"] and all(i in k.metrics for i in e["inputs"]), e
                else:
                    assert e["metric"] in k.metrics, e["metric"]
        for name, m in d["metrics"].items():
            assert k.metrics[name].value == m["value"]
    json.loads(json.dumps(out))
    assert markdown(out).startswith("# Diagnosis")


def test_planted_accuracy_beats_ncu_top_rule():
    sys.path.insert(0, str(ROOT / "benchmarks" / "planted"))
    import accuracy

    s = accuracy.evaluate()["summary"]
    assert s["ours_top1"] == 1.0 and s["ours_false_alarms"] == 0
    assert s["ours_top1"] - s["ncu_top1"] >= 0.5
    s = accuracy.evaluate(host_timing=False)["summary"]
    assert s["ours_top1"] == 1.0  # launch overhead is still flagged (unsized) without host timing


def test_planted_suite_covers_every_gpu_id_ncu_can_show():
    sys.path.insert(0, str(ROOT / "benchmarks" / "planted"))
    import suite

    from perfscout.analysis.diagnosis.rules import GPU_RULE_IDS

    # memory_bound needs a profile without the per-unit breakdown, which --set full never
    # is: it is covered by tests/unit/test_diagnosis_classify.py on a reduced profile. The
    # tensor-core ids are labelled in the library suite (benchmarks/planted_library); the
    # two never-primary roles (lever, advice) and the tile-quantization cause, which no
    # profiled library call showed (cuBLAS chose tiles that divide the problem), are tested
    # in tests/unit/test_diagnosis_mma.py.
    library_ids = {c["expected"] for c in library_accuracy().labels()}
    assert set(GPU_RULE_IDS) - suite.PLANTED_IDS - library_ids == {
        "memory_bound", "mma_pipeline_stalls", "mma_precision", "mma_epilogue_bound"}
    assert len(suite.CASES) >= 18 and sum(c.control for c in suite.CASES) >= 2
