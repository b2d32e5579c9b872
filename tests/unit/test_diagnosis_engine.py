"""Engine: primary choice, ranking, JSON shape (DESIGN.md contract) and Markdown."""

from __future__ import annotations

import inspect
import json
import re

import pytest

from perfscout.analysis.diagnosis import classify as classify_mod
from perfscout.analysis.diagnosis import diagnose
from perfscout.analysis.diagnosis.engine import rank
from perfscout.analysis.diagnosis.render import markdown
from perfscout.analysis.diagnosis.rules import _occupancy
from perfscout.state.records import Finding
from tests.unit._planted import kernel

FINDING_KEYS = {"id", "title", "confidence", "evidence", "recommendation", "verify", "not_when",
                "expected_gain"}


def test_json_shape_is_the_design_contract():
    out = diagnose([kernel("pk_uncoalesced_transpose"), kernel("pk_ctl_copy_float4")])
    assert set(out) == {"kernels", "platform"}
    assert out["platform"]["device"] == "NVIDIA H200" and out["platform"]["compute_capability"] == "9.0"
    for k in out["kernels"]:
        assert set(k) == {"name", "primary", "findings", "metrics"}
        assert k["findings"][0] == k["primary"]
        for f in k["findings"]:
            assert FINDING_KEYS <= set(f)
            for e in f["evidence"]:
                assert {"metric", "value", "unit", "threshold"} <= set(e)
    json.dumps(out)  # plain JSON, nothing exotic


def test_cause_outranks_the_roof_it_explains():
    (k,) = diagnose([kernel("pk_smem_conflict")])["kernels"]
    ids = [f["id"] for f in k["findings"]]
    assert ids[0] == "shared_bank_conflicts" and "l1_bandwidth_bound" in ids
    gains = [f["expected_gain"] for f in k["findings"][1:]]
    assert gains == sorted(gains, reverse=True)


def _f(fid, role, gain, conf=0.5):
    return Finding(id=fid, title=fid, confidence=conf, expected_gain=gain, extra={"role": role})


def test_rank_rules():
    roof, small, big = _f("latency_bound", "roof", 0.9), _f("a", "cause", 0.02), _f("b", "cause", 0.4)
    assert rank([roof, small, big], "latency")[0] is big
    assert rank([roof, small], "latency")[0] is roof  # a 2 % cause is never primary
    launch = _f("launch_overhead", "cause", None, conf=0.5)
    assert rank([big, launch], "launch")[0] is launch
    assert rank([], "memory") == (None, [])


def test_metrics_section_holds_every_cited_metric_with_units():
    (k,) = diagnose([kernel("pk_local_array")])["kernels"]
    assert "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum" in k["metrics"]
    m = k["metrics"]["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]
    assert m["unit"] == "%" and isinstance(m["value"], float)


def test_markdown_rendering_shows_primary_evidence_and_dont_list():
    md = markdown(diagnose([kernel("pk_ctl_copy_float4"), kernel("pk_divergent_branch")]))
    assert "## pk_ctl_copy_float4" in md and "**Primary:** `dram_bandwidth_bound`" in md
    assert "Don't:" in md and "no compute tuning" in md
    assert "`smsp__thread_inst_executed_per_inst_executed.ratio` = 16.29" in md
    assert markdown({"kernels": [], "platform": {}}).endswith("No kernels or programs in the input.")


def test_profile_without_metrics_gives_no_primary_not_an_error():
    k = kernel("pk_ctl_copy_float4")
    k.metrics = {}
    (d,) = diagnose([k])["kernels"]
    assert d["primary"] is None and d["findings"] == []
    assert "No finding" in markdown({"kernels": [d]})


@pytest.mark.parametrize("mod", [classify_mod, _occupancy], ids=lambda m: m.__name__)
def test_engine_thresholds_are_commented(mod):
    src = inspect.getsource(mod)
    for m in re.finditer(r"^([A-Z][A-Z0-9_]+) = [0-9.]", src, re.M):
        before = src[: m.start()].rstrip().splitlines()[-1]
        assert before.lstrip().startswith("#"), m.group(1)


def test_ncu_says_records_ncu_top_rule_and_why_it_is_not_the_primary():
    from perfscout.tools.ncu_parse import attach_rules, load_details_csv
    from tests.unit._planted import PROFILES

    ks = [kernel("pk_ctl_copy_float4"), kernel("pk_divergent_branch")]
    assert attach_rules(ks, load_details_csv(PROFILES / "planted_details.csv")) > 0
    copy, div = diagnose(ks)["kernels"]
    said = copy["primary"]["extra"]["ncu_says"]
    assert said["rule"] == "MemoryL2Compression" and not said["agrees"]
    assert "compressible" in said["why_not_primary"]
    assert div["primary"]["extra"]["ncu_says"]["agrees"] is True  # ThreadDivergence
    assert "ncu's top rule: MemoryL2Compression" in markdown({"kernels": [copy]})
