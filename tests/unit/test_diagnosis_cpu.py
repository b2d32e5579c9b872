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


def test_without_counters_the_software_events_answer_and_counters_unavailable_is_advice():
    # real output of this VM (no PMU, a busy machine): the loop got half a core
    p = _prog(load_perf_file(FIX / "cpu_loop_x.csv"))
    ids = [f["id"] for f in p["findings"]]
    assert p["primary"]["id"] == "cpu_waiting" and "cpu_counters_unavailable" in ids
    assert "53%" in p["primary"]["title"] and "busy with other work" in p["primary"]["title"]
    unavailable = next(f for f in p["findings"] if f["id"] == "cpu_counters_unavailable")
    assert unavailable["extra"]["role"] == "advice" and ids[-1] == "cpu_counters_unavailable"
    metrics = {e["metric"] for e in unavailable["evidence"]}
    assert {"cycles", "instructions", "task-clock", "context-switches", "page-faults"} <= metrics
    assert "Software events still say" in unavailable["recommendation"]
    assert p["metrics"]["cycles"]["value"] == "<not supported>"


def test_json_perf_output_gives_the_same_verdict():
    prof = load_perf_file(FIX / "default_events_j.jsonl")
    p = _prog(prof)
    assert p["primary"]["id"] == _prog(load_perf_file(FIX / "default_events_x.csv"))["primary"]["id"]
    # `perfscout profile` reports this finding through perf_stat: the very same one.
    found = next(f for f in p["findings"] if f["id"] == "cpu_counters_unavailable")
    assert counters_unavailable_finding(prof).model_dump() == found
    cited = {e["metric"] for e in found["evidence"]}
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


# ---- without counters: what the software events of this VM's real runs say (fixtures/perf/README.md)

@pytest.mark.parametrize(("name", "primary", "says"), [
    ("sleeping_x.csv", "cpu_waiting", "blocked in many short waits"),
    ("fsync_writes_x.csv", "cpu_waiting", "blocked in many short waits"),
    ("one_core_loop_x.csv", "cpu_waiting", "a machine busy with other work"),  # 0.32 of a core on the loaded VM
    ("two_procs_busy_x.csv", "cpu_waiting", "a machine busy with other work"),
    ("memory_growth_x.csv", "cpu_waiting", ""),
])
def test_software_events_name_a_limiter_never_counters_unavailable(name, primary, says):
    prof = load_perf_file(FIX / name)
    prof.command = ["/usr/bin/python3", "-c", "..."]  # what was run (a saved file does not hold it)
    p = _prog(prof)
    assert p["primary"]["id"] == primary and says in p["primary"]["title"]
    rec = p["primary"]["recommendation"]
    assert "perf trace -s" in rec and "py-spy record --idle" in rec  # the next step, for Python too


def test_memory_growth_names_the_pages_touched():
    prof = load_perf_file(FIX / "memory_growth_x.csv")
    growth = next(f for f in _prog(prof)["findings"] if f["id"] == "cpu_memory_growth")
    assert "heaptrack" in growth["recommendation"]  # a program of unknown language
    prof.command = ["python3", "-c", "..."]
    growth = next(f for f in _prog(prof)["findings"] if f["id"] == "cpu_memory_growth")
    assert "154,499 page faults" in growth["title"] and "604 MiB" in growth["title"]
    assert "memray" in growth["recommendation"] or "tracemalloc" in growth["recommendation"]
    assert growth["extra"]["role"] == "advice"


def _software_profile(task_clock_ms: float, wall_s: float, **rusage: float):
    from perfscout.state.profiles import PerfProfile

    prof = parse_perf_csv(f"{task_clock_ms},msec,task-clock,1,100.00,,\n12,,context-switches,1,100.00,,\n"
                          "<not supported>,,cycles,0,100.00,,\n", ["python3", "train.py"])
    return PerfProfile.model_validate({**prof.model_dump(), "elapsed_s": wall_s, "rusage": rusage})


def test_cpu_bound_on_one_core_names_the_sampling_profiler():
    p = _prog(_software_profile(1980.0, 2.0, voluntary_ctx_switches=3, involuntary_ctx_switches=9))
    f = p["primary"]
    assert f["id"] == "cpu_busy_cores" and "CPU-bound on 0.99 core" in f["title"]
    assert "py-spy record" in f["recommendation"] and "perf record -g" in f["recommendation"]
    assert "parallelize" in f["recommendation"]


def test_cpu_bound_on_several_cores():
    f = _prog(_software_profile(7900.0, 2.0))["primary"]
    assert f["id"] == "cpu_busy_cores" and "3.95 cores" in f["title"] and "4 cores busy" in f["recommendation"]


def test_preempted_by_other_work_is_told_apart_from_waiting():
    f = _prog(_software_profile(600.0, 2.0, voluntary_ctx_switches=4, involuntary_ctx_switches=900))["primary"]
    assert f["id"] == "cpu_waiting" and "the machine's other work had the CPU" in f["title"]
    f = _prog(_software_profile(600.0, 2.0, voluntary_ctx_switches=5000, involuntary_ctx_switches=20))["primary"]
    assert f["id"] == "cpu_waiting" and "blocked in many short waits" in f["title"]


def test_perf_missing_getrusage_still_answers():
    from perfscout.state.profiles import PerfProfile

    prof = PerfProfile(command=["./sim"], fallback="perf not installed: getrusage of the child only", elapsed_s=4.0,
                       rusage={"user_s": 3.9, "system_s": 0.05, "max_rss_kib": 900 * 1024})
    p = _prog(prof)
    assert p["primary"]["id"] == "cpu_busy_cores" and "py-spy" not in p["primary"]["recommendation"]
    assert any(f["id"] == "cpu_memory_growth" and "900 MiB" in f["title"] for f in p["findings"])


# ---- with counters: published perf stat -x, output of machines with a PMU (fixtures/perf/README.md)

def test_spr_topdown_metric_lines_are_read_and_decide():
    for name in ("spr_system_wide_x.csv", "spr_system_wide_j.jsonl"):
        prof = load_perf_file(FIX / name)
        shares = {e: prof.events[e].value for e in prof.events if e.startswith("tma_")}
        assert shares["tma_backend_bound"] == pytest.approx(70.1, abs=0.2)
        assert shares["tma_memory_bound"] == pytest.approx(50.4, abs=0.3) and len(shares) == 12
        p = _prog(prof)
        ids = [f["id"] for f in p["findings"]]
        assert p["primary"]["id"] == "cpu_backend_bound" and "cpu_memory_bound" in ids
        # system-wide: 224 CPUs' clocks at 0.000 GHz are idle CPUs, not a program busy on 224 cores
        assert "cpu_busy_cores" not in ids and "cpu_waiting" not in ids
        assert prof.elapsed_s == pytest.approx(1.006, abs=0.001)  # from perf's own "CPUs utilized"


def test_hybrid_topdown_keeps_each_core_type_and_skips_empty_shares():
    prof = load_perf_file(FIX / "adl_hybrid_system_wide_x.csv")
    tma = {e: m.value for e, m in prof.events.items() if "tma_" in e}
    assert tma["cpu_atom/tma_frontend_bound/"] == 41.3 and tma["cpu_core/tma_bad_speculation/"] == 0.0
    assert "cpu_core/tma_retiring/" not in tma  # printed empty: perf could not compute it
    assert not any(n.endswith("lines that are not perf stat counter lines were ignored") for n in prof.notes)
    assert _prog(prof)["primary"]["id"] == "cpu_frontend_bound"


def test_counters_without_topdown_read_ipc_and_branches():
    prof = load_perf_file(FIX / "haskell_main_x.csv")
    p = _prog(prof)
    ids = [f["id"] for f in p["findings"]]
    assert p["primary"]["id"] == "cpu_branch_misses" and "cpu_busy_cores" in ids
    busy = next(f for f in p["findings"] if f["id"] == "cpu_busy_cores")
    assert "1.00 core" in busy["title"]
    assert _prog(load_perf_file(FIX / "memcached_system_wide_x.csv"))["primary"]["id"] == "cpu_low_ipc"


def test_topdown_slot_counts_are_shares_of_the_slots():
    # the raw topdown-* events of an Intel machine with TOPDOWN.SLOTS, from perf's own -I output
    # with its timestamp column taken off (the slots are counts, not percentages)
    lines = [ln.split(",", 1)[1] for ln in (FIX / "icx_topdownl1_interval_x.csv").read_text().splitlines()
             if "topdown-" in ln or "TOPDOWN.SLOTS" in ln]
    lines = [ln if "TOPDOWN.SLOTS" not in ln else ln.split(",%")[0].rsplit(",", 1)[0] + ",," for ln in lines]
    prof = parse_perf_csv("\n".join(lines) + "\n")
    assert not any(e.startswith("tma_") for e in prof.events)
    from perfscout.analysis.diagnosis.cpu_context import CpuContext

    ctx = CpuContext(prof)
    assert ctx.share("frontend") == pytest.approx(2389693619 / 4677067630)
    assert ctx.share("retiring") == pytest.approx(476781750 / 4677067630)
    assert _prog(prof)["primary"]["id"] == "cpu_frontend_bound"  # 51 % of the slots, as perf's own metric said


def test_interval_output_is_refused_by_name():
    from perfscout.errors import InputError

    with pytest.raises(InputError, match="-I"):
        load_perf_file(FIX / "icx_topdownl1_interval_x.csv")
