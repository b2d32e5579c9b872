"""CPU side from perf stat: real counter-less output from this machine, and a with-counters sample."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfscout.analysis.diagnosis import diagnose_perf
from perfscout.tools.perf_stat import counters_unavailable_finding, load_perf_file, parse_perf_csv

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "perf"

# perf stat -x, as printed on a host with a PMU (the format of perf 6.x; the counts are a
# test sample, not a measurement: this container has no PMU to measure them).
WITH_COUNTERS = """# started on Mon Nov 30 05:00:00 2026

1523.41,msec,task-clock,1523410000,100.00,0.998,CPUs utilized
12,,context-switches,1523410000,100.00,7.877,/sec
0,,cpu-migrations,1523410000,100.00,0.000,/sec
2451,,page-faults,1523410000,100.00,1.609,K/sec
5912345678,,cycles,1523410000,100.00,3.881,GHz
2612345678,,instructions,1523410000,100.00,0.44,insn per cycle
412345678,,branches,1523410000,100.00,270.676,M/sec
61234567,,branch-misses,1523410000,100.00,14.85,of all branches
98765432,,cache-references,1523410000,100.00,64.832,M/sec
23456789,,cache-misses,1523410000,100.00,23.75,of all cache refs
"""


def _prog(profile):
    out = diagnose_perf(profile)
    assert set(out) == {"programs", "platform"}
    (p,) = out["programs"]
    assert set(p) == {"name", "primary", "findings", "metrics"}
    return p


def test_counters_unavailable_is_primary_and_reports_software_events():
    p = _prog(load_perf_file(FIX / "cpu_loop_x.csv"))
    f = p["primary"]
    assert f["id"] == "cpu_counters_unavailable"
    metrics = {e["metric"] for e in f["evidence"]}
    assert {"cycles", "instructions", "task-clock", "context-switches", "page-faults"} <= metrics
    assert "Software events still say" in f["recommendation"] and "page faults" in f["recommendation"]
    assert p["metrics"]["cycles"]["value"] == "<not supported>"


def test_json_perf_output_gives_the_same_verdict():
    prof = load_perf_file(FIX / "default_events_j.jsonl")
    primary = _prog(prof)["primary"]
    assert primary["id"] == "cpu_counters_unavailable"
    # `perfscout profile` reports this finding through perf_stat: the very same one.
    assert counters_unavailable_finding(prof).model_dump() == primary
    cited = {e["metric"] for e in primary["evidence"]}
    assert cited and cited <= set(prof.events) | set(prof.unavailable)


def test_with_counters_ipc_cache_and_branch_findings():
    prof = parse_perf_csv(WITH_COUNTERS)
    assert prof.hardware_counters
    p = _prog(prof)
    ids = [f["id"] for f in p["findings"]]
    assert {"cpu_low_ipc", "cpu_cache_misses", "cpu_branch_misses"} <= set(ids)
    assert "cpu_counters_unavailable" not in ids
    assert p["primary"]["id"] == "cpu_cache_misses"  # largest sized cause
    ipc = next(e for f in p["findings"] if f["id"] == "cpu_low_ipc" for e in f["evidence"]
               if e["metric"] == "derived:ipc")
    assert abs(ipc["value"] - 2612345678 / 5912345678) < 1e-6
    for f in p["findings"]:
        for e in f["evidence"]:
            names = e["inputs"] if e["metric"].startswith("derived:") else [e["metric"]]
            assert all(n in prof.events for n in names)


def test_topdown_shares_pick_the_category():
    td = WITH_COUNTERS + "\n".join([
        "41.2,%,tma_backend_bound,1523410000,100.00,,",
        "12.0,%,tma_frontend_bound,1523410000,100.00,,",
        "30.5,%,tma_retiring,1523410000,100.00,,",
        "16.3,%,tma_bad_speculation,1523410000,100.00,,",
    ])
    p = _prog(parse_perf_csv(td))
    ids = [f["id"] for f in p["findings"]]
    assert "cpu_backend_bound" in ids and "cpu_bad_speculation" in ids
    assert "cpu_frontend_bound" not in ids and "cpu_retiring" not in ids


def test_a_small_percentage_share_is_not_read_as_a_fraction():
    # perf prints TopDown shares in percent: 0.8 % backend-bound must not become 80 %.
    td = WITH_COUNTERS + "0.8,%,tma_backend_bound,1523410000,100.00,,\n"
    p = _prog(parse_perf_csv(td))
    assert "cpu_backend_bound" not in [f["id"] for f in p["findings"]]


def test_high_retiring_is_at_roof_with_dont_list():
    td = WITH_COUNTERS.replace("2612345678,,instructions", "17612345678,,instructions")
    td = td.replace("23456789,,cache-misses", "2345,,cache-misses").replace("61234567,,branch-misses", "61,,branch-misses")
    td += "72.0,%,tma_retiring,1523410000,100.00,,\n"
    p = _prog(parse_perf_csv(td))
    assert p["primary"]["id"] == "cpu_retiring"
    assert p["primary"]["extra"]["what_not_to_do"]


def _topdown_rules():
    from perfscout.analysis.diagnosis.rules._topdown import TOPDOWN_RULES

    return sorted(TOPDOWN_RULES.items())


@pytest.mark.parametrize("rule_id,row", _topdown_rules(), ids=[r for r, _ in _topdown_rules()])
@pytest.mark.parametrize("spelling", [0, 1])
def test_each_topdown_rule_fires_at_its_level_and_not_below(rule_id, row, spelling):
    """One template, five rows: each share is read under either perf spelling
    (tma_* metric or topdown-* event) and fires from its own flag level up."""
    from perfscout.analysis.diagnosis.cpu_context import TOPDOWN

    event = TOPDOWN[row.key][spelling]
    for pct, fires in ((row.share_min * 100 + 0.5, True), (row.share_min * 100 - 0.5, False)):
        prof = parse_perf_csv(WITH_COUNTERS + f"{pct:.1f},%,{event},1523410000,100.00,,\n")
        found = {f["id"]: f for f in _prog(prof)["findings"]}
        assert (rule_id in found) is fires, (event, pct)
        if fires:
            f = found[rule_id]
            assert f["extra"]["role"] == row.role and f["evidence"][0]["metric"] == event
            gain = (1 - pct / 100) if row.role == "roof" else pct / 100
            assert abs(f["expected_gain"] - round(gain, 3)) < 1e-9
