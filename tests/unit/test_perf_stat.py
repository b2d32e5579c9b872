"""perf stat parsers on real outputs of this (PMU-less) machine, and the wrapper for real."""

from __future__ import annotations

import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from perfscout.analysis.diagnosis import diagnose_perf
from perfscout.errors import InputError
from perfscout.tools.perf_stat import (
    HARDWARE_EVENTS,
    counters_unavailable_finding,
    event_base,
    load_perf_file,
    parse_perf_csv,
    parse_perf_json,
    run_perf_stat,
)
from perfscout.tools.sandbox import Sandbox, SandboxLimits

FX = Path(__file__).resolve().parents[1] / "fixtures" / "perf"
needs_perf = pytest.mark.skipif(shutil.which("perf") is None,
                                reason="perf is not installed (Debian: apt-get install linux-perf)")


def test_csv_without_pmu() -> None:
    p = load_perf_file(FX / "cpu_loop_x.csv")
    assert not p.hardware_counters
    assert set(p.unavailable) == set(HARDWARE_EVENTS)
    assert all(v == "<not supported>" for v in p.unavailable.values())
    tc = p.events["task-clock"]
    assert tc.unit == "second" and tc.raw_unit == "msec" and tc.value == pytest.approx(0.08273)
    assert p.events["page-faults"].value == 824
    assert p.events["context-switches"].value == 54
    assert p.multiplexing["task-clock"] == 100.0
    assert p.event_runtime_s["task-clock"] == pytest.approx(0.082733256)
    assert "software events only" in p.fallback and "task-clock" in p.fallback


def test_json_without_pmu_matches_csv_shape() -> None:
    j = load_perf_file(FX / "cpu_loop_j.jsonl")
    c = load_perf_file(FX / "cpu_loop_x.csv")
    assert set(j.events) == set(c.events) and set(j.unavailable) == set(c.unavailable)
    assert j.events["task-clock"].value == pytest.approx(0.080036919)
    assert j.events["page-faults"].value == 821
    assert j.event_runtime_s["task-clock"] == pytest.approx(0.080036919)


def test_default_event_set_and_repeat_variance_column() -> None:
    d = load_perf_file(FX / "default_events_x.csv")
    assert {"task-clock", "page-faults"} <= set(d.events)
    assert "cycles" in d.unavailable
    r = load_perf_file(FX / "sleep_r3_x.csv")  # perf stat -r 3: value,unit,event,variance,...
    assert r.events["task-clock"].value == pytest.approx(0.74e-3)
    assert r.event_runtime_s["task-clock"] == pytest.approx(743456e-9)  # after the variance column
    assert r.multiplexing["task-clock"] == 100.0
    assert r.unavailable == {"instructions": "<not supported>"}


def test_multiplexed_counts_are_reported() -> None:
    # A machine with a PMU and more events than counters prints pcnt-running < 100.
    # This machine has no PMU, so the line is written here in perf's documented -x, layout.
    text = "1234567,,cycles,500000,62.50,,\n4.20,msec,task-clock,4200000,100.00,0.9,CPUs utilized\n"
    p = parse_perf_csv(text)
    assert p.hardware_counters and p.multiplexing["cycles"] == 62.5
    assert p.event_runtime_s["cycles"] == pytest.approx(500000e-9)
    assert any("cycles 62.5%" in n for n in p.notes)
    assert counters_unavailable_finding(p) is None


def test_finding_cites_the_unsupported_events_and_the_software_ones() -> None:
    prof = load_perf_file(FX / "cpu_loop_x.csv")
    f = counters_unavailable_finding(prof)
    assert f is not None and f.id == "cpu_counters_unavailable"
    unsupported = {e.metric: e.value for e in f.evidence if e.metric in HARDWARE_EVENTS}
    assert unsupported == dict.fromkeys(HARDWARE_EVENTS, "<not supported>")
    counted = {e.metric: e.value for e in f.evidence if e.metric not in HARDWARE_EVENTS}
    assert counted == {"task-clock": pytest.approx(0.08273), "context-switches": 54,
                       "cpu-migrations": 0, "page-faults": 824}
    assert "824 page faults" in f.recommendation
    # The same finding as `perfscout diagnose` builds from the same profile (advice there, after
    # what the software events say).
    assert f.model_dump() == diagnose_perf(prof)["programs"][0]["findings"][-1]


@pytest.mark.parametrize("text", ["", "# started on Mon\n\n", "hello world\n"])
def test_garbage_is_a_clear_error(text: str) -> None:
    with pytest.raises(InputError):
        parse_perf_csv(text)
    with pytest.raises(InputError):
        parse_perf_json(text)


def _busy_script(run_dir: Path) -> str:
    (run_dir / "busy.py").write_text(textwrap.dedent("""
        import hashlib
        h = hashlib.sha256()
        for _ in range(100000):
            h.update(b"perfscout")
        print(h.hexdigest()[:8])
        """))
    return "busy.py"


@needs_perf
@pytest.mark.parametrize("use_json", [True, False])
def test_run_perf_stat_for_real(tmp_path: Path, use_json: bool) -> None:
    sb = Sandbox(tmp_path / "run")
    prof, res = run_perf_stat(sb, [sys.executable, _busy_script(sb.run_dir)], use_json=use_json,
                              limits=SandboxLimits(timeout_s=60))
    assert res.status == "ok" and len(res.stdout.strip()) == 8
    assert res.argv[0].endswith("perf")
    raw = sb.run_dir / ("perf_stat.jsonl" if use_json else "perf_stat.csv")
    assert raw.exists()  # the raw output is kept in the run directory
    # "task-clock:u" where perf counts user space only (inside the sandbox, paranoid 2)
    assert next(m for e, m in prof.events.items() if event_base(e) == "task-clock").value > 0
    assert prof.rusage["user_s"] > 0 and prof.elapsed_s and prof.elapsed_s > 0
    if not prof.hardware_counters:  # this machine: no PMU
        assert "getrusage" in prof.fallback
        assert counters_unavailable_finding(prof) is not None


def test_without_perf_the_command_still_runs_with_getrusage(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools-here"))
    sb = Sandbox(tmp_path / "run")
    prof, res = run_perf_stat(sb, [sys.executable, _busy_script(sb.run_dir)])
    assert res.status == "ok"
    assert prof.fallback.startswith("perf not installed")
    assert prof.rusage["user_s"] > 0 and not prof.events
    f = counters_unavailable_finding(prof)
    # Nothing counted, so nothing is cited as evidence; the text says what was used instead.
    assert f is not None and f.evidence == []
    assert "perf counted nothing (perf not installed" in f.recommendation
    assert "the child's getrusage: " in f.recommendation and " s user" in f.recommendation
    assert f.extra["fallback"] == prof.fallback


def test_refused_command_is_reported_not_raised(tmp_path: Path) -> None:
    sb = Sandbox(tmp_path / "run")
    prof, res = run_perf_stat(sb, ["bash", "-c", "id"])
    assert res.status == "refused"
    assert "did not run" in prof.fallback or "perf not installed" in prof.fallback


@needs_perf
def test_perf_killed_before_writing_counts_keeps_the_run(tmp_path: Path) -> None:
    # The wall-clock limit kills perf with the program, leaving its -o file empty: the
    # result and the child's getrusage must come back, not a parse error.
    sb = Sandbox(tmp_path / "run")
    (sb.run_dir / "sleepy.py").write_text("import time\ntime.sleep(60)\n")
    prof, res = run_perf_stat(sb, [sys.executable, str(sb.run_dir / "sleepy.py")], use_json=False,
                              limits=SandboxLimits(timeout_s=1))
    assert res.status == "timed_out"
    assert prof.fallback.startswith("perf stat wrote no counts (timed_out")
    assert not prof.events and prof.rusage


@pytest.mark.parametrize("text,needle", [
    ("     1.001137945,20.95,msec,task-clock,20952271,100.00,,\n"
     "     1.001137945,51234567,,cycles,20952271,100.00,,\n", "-I (interval)"),
    ("CPU0,20.95,msec,task-clock,20952271,100.00,,\nCPU1,51234567,,cycles,20952271,100.00,,\n", "-A"),
    ("S0,2,41.90,msec,task-clock,41904542,100.00,,\n", "--per-socket"),
    ("# README\nThe quick, brown, fox\n| a, b, c |\n1,000 kernels, 2 s, done\n", "no perf stat counter lines"),
    ("1,2,3\n4,5,6\n", "no perf stat counter lines"),
])
def test_text_that_is_not_plain_perf_stat_csv_is_refused(text, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        parse_perf_csv(text)


def test_stray_lines_among_counters_are_noted_not_read():
    text = "the program's own stderr, with, commas\n" + (FX / "cpu_loop_x.csv").read_text()
    prof = parse_perf_csv(text)
    assert "the program's own stderr" not in " ".join(prof.events) and prof.events
    assert any("1 line(s) that are not perf stat counter lines" in n for n in prof.notes)
