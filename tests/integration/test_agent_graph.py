"""The agent end to end on real codecs, with SQLite checkpoints (deterministic planner)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from perfscout import agent
from perfscout.codecs.base import Codec, Compressed
from perfscout.graph.context import Context
from perfscout.graph.rundir import read_ledger

ROOT = Path(__file__).resolve().parents[2]


def _ctx(home: Path, **kw) -> Context:
    # timing noise on a shared CI box would add re-runs; its rule has its own unit test
    return Context(home=str(home), planner="deterministic", noise_threshold=1e9, **kw)


def test_exported_graph_is_named_has_the_six_nodes_and_no_checkpointer():
    from perfscout.graph.graph import graph

    assert graph.name == "perfscout"
    assert graph.checkpointer is None
    assert {"snapshot", "plan", "act", "observe", "reflect", "report"} <= set(graph.nodes)
    spec = json.loads((ROOT / "langgraph.json").read_text())
    assert spec["graphs"]["perfscout"] == "perfscout.graph.graph:graph"


def test_spec_on_real_field_runs_to_a_report_from_stored_results(shared_data, perfscout_home):
    spec = {"goal": "sz3 vs zfp", "datasets": ["vorticity.512_512"], "codecs": ["sz3", "zfp"],
            "mode": "rel", "bounds": [1e-3], "repeats": 2}
    out = agent.run(spec, thread_id="real1", context=_ctx(perfscout_home))
    assert out.status == "done" and out.planner == "deterministic"
    run_dir = Path(out.run_dir)
    doc = json.loads((run_dir / "results.json").read_text())
    recs = {r["codec"]: r for r in doc["records"]}
    assert set(recs) == {"sz3", "zfp"}
    for r in recs.values():
        assert r["bound_ok"] is True and r["status"] == "ok" and r["ratio"] > 1
        assert r["shape"] == "512,512" and r["run_id"] == "real1" and r["platform_id"]
        assert r["max_rel_err"] <= 1e-3 * (1 + 1e-6)
    # the report cites exactly the stored figures
    report = out.report
    assert "deterministic planner" in report
    for r in recs.values():
        assert f"{r['ratio']:.4g}" in report
    stored = sorted(p.name for p in (run_dir / "results").glob("*.json"))
    assert stored == ["001-t01-sz3-cpu-rel-1e-3.a1.json", "002-t02-zfp-cpu-rel-1e-3.a1.json"]
    starts = [c for e, c, _ in read_ledger(run_dir) if e == "start"]
    assert starts == ["t01-sz3-cpu-rel-1e-3.a1", "t02-zfp-cpu-rel-1e-3.a1"]
    assert (run_dir / "platform.json").is_file() and (run_dir / "plan.json").is_file()
    runs = agent.list_runs(context=_ctx(perfscout_home))
    assert [(r.thread_id, r.status) for r in runs] == [("real1", "done")]


def test_raw_file_without_shape_interrupts_and_resumes(tmp_path, perfscout_home):
    field = np.cumsum(np.random.default_rng(1).standard_normal((48, 40)), axis=1).astype("<f4")
    raw = tmp_path / "field.raw"
    field.tofile(raw)
    ctx = _ctx(perfscout_home)
    out = agent.run(f"evaluate sz3 at abs 1e-2 on {raw}", thread_id="ask1", context=ctx)
    assert out.status == "interrupted"
    assert set(out.question["needs"]) == {"shape", "dtype"}
    assert "field.raw" in out.question["question"] and f"{field.nbytes:,}" in out.question["question"]
    # a bad answer is refused with the reason, and asked again
    out = agent.resume("ask1", {"shape": "48,zz", "dtype": "f32"}, context=ctx)
    assert out.status == "interrupted" and "not a list of positive integers" in out.question["question"]
    out = agent.resume("ask1", {"shape": [48, 40], "dtype": "f32"}, context=ctx)
    assert out.status == "done"
    rec = json.loads((Path(out.run_dir) / "results.json").read_text())["records"][0]
    assert rec["shape"] == "48,40" and rec["bound_ok"] is True and rec["max_abs_err"] <= 1e-2
    assert "Asked: " in out.report and "48, 40" in out.report  # the question and its answer


def test_raw_file_shape_asked_as_a_guess_from_its_size_and_yes_accepts_it(tmp_path, perfscout_home):
    field = np.cumsum(np.random.default_rng(2).standard_normal((24, 24, 24)), axis=2).astype("<f4")
    raw = tmp_path / "wmag24.f32"
    field.tofile(raw)
    ctx = _ctx(perfscout_home)
    out = agent.run(f"evaluate zfp at abs 1e-2 on {raw} with 1 repeat", thread_id="guess", context=ctx)
    assert out.status == "interrupted"
    assert f"{field.nbytes:,} bytes" in out.question["question"] and "24×24×24 float32" in out.question["question"]
    out = agent.resume("guess", "yes", context=ctx)
    assert out.status == "done"
    rec = json.loads((Path(out.run_dir) / "results.json").read_text())["records"][0]
    assert rec["shape"] == "24,24,24" and rec["bound_ok"] is True


def test_ambiguous_dataset_asks_which_one_and_cancel_runs_nothing(perfscout_home):
    ctx = _ctx(perfscout_home)
    out = agent.run("compare sz3 at rel 1e-2 on vorticity", thread_id="amb", context=ctx)
    assert out.status == "interrupted"
    assert out.question["candidates"] == ["vorticity.128_128_41", "vorticity.512_512"]
    assert "vorticity.512_512" in out.question["question"]
    out = agent.resume("amb", {"skip": True}, context=ctx)
    assert out.status == "done" and "cancelled" in out.report
    assert not out.values.get("observations")


def test_ambiguous_dataset_answered_by_name_runs_that_field(perfscout_home, shared_data):
    ctx = _ctx(perfscout_home)
    out = agent.run("compare sz3 at rel 1e-2 on vorticity with 1 repeat", thread_id="amb2", context=ctx)
    out = agent.resume("amb2", "2", context=ctx)  # the second candidate
    assert out.status == "done"
    rec = json.loads((Path(out.run_dir) / "results.json").read_text())["records"][0]
    assert rec["dataset"] == "vorticity.512_512" and rec["bound_ok"] is True


def test_unknown_tools_and_bad_arguments_become_observations_not_crashes(perfscout_home):
    spec = {"tasks": [{"tool": "run_shell", "args": {"cmd": "id"}},
                      {"tool": "evaluate_codec", "args": {"dataset": "synthetic:grf:8,8", "codec": "sz3",
                                                          "mode": "rel", "bound": "small"}},
                      {"tool": "list_codecs", "args": {}}]}
    out = agent.run(spec, thread_id="bad", context=_ctx(perfscout_home))
    assert out.status == "done"
    obs = {o["task_key"]: o for o in out.values["observations"]}
    assert obs["t01-run_shell"]["kind"] == "refused" and "not a valid tool" in obs["t01-run_shell"]["error"]
    assert obs["t02-evaluate_codec"]["kind"] == "refused" and "bound" in obs["t02-evaluate_codec"]["error"]
    assert obs["t03-list_codecs"]["kind"] == "result"
    assert "run_shell" in out.report and "refused" in out.report


def test_a_request_with_nothing_actionable_asks_and_cancel_ends_with_a_report(perfscout_home):
    out = agent.run("make it faster", thread_id="np", context=_ctx(perfscout_home))
    assert out.status == "interrupted" and out.question["slot"] == "question"  # what to find out, on which data
    out = agent.resume("np", "cancel", context=_ctx(perfscout_home))
    assert out.status == "done" and "cancelled" in out.report and not out.values.get("observations")


def test_a_dangerous_request_is_refused_whole_and_nothing_runs(perfscout_home):
    out = agent.run("compare sz3 and zfp at rel 1e-3 on synthetic:grf:16,16; then run rm -rf / to clean up",
                    thread_id="rf", context=_ctx(perfscout_home))
    assert out.status == "done" and out.refusal and "shell command" in out.refusal
    assert not out.values.get("observations") and "## Refused" in out.report


def test_time_travel_fork_a_past_state_and_continue(perfscout_home):
    ctx = _ctx(perfscout_home)
    spec = {"datasets": ["synthetic:grf:16,16"], "codecs": ["sz3"], "mode": "abs",
            "bounds": [1e-1, 1e-2, 1e-3], "repeats": 1}
    out = agent.run(spec, thread_id="tt", context=ctx)
    assert len(out.values["observations"]) == 3
    hist = agent.history("tt", context=ctx)
    after_plan = next(s for s in reversed(hist) if s.next == ("act",))
    assert len(after_plan.values["queue"]) == 2
    fork_id = agent.fork("tt", after_plan.config["configurable"]["checkpoint_id"], {"queue": []}, context=ctx)
    assert fork_id != after_plan.config["configurable"]["checkpoint_id"]
    forked = agent.resume("tt", context=ctx)
    assert forked.status == "done"
    assert [o["task_key"] for o in forked.values["observations"]] == ["t01-sz3-cpu-abs-0.1"]


def test_profile_intent_runs_the_program_under_a_profiler(perfscout_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the profiled program's working directory
    out = agent.run("why is my kernel slow: profile python3 -c 'print(sum(range(300000)))'",
                    thread_id="prof", context=_ctx(perfscout_home))
    assert out.status == "done"
    obs = out.values["observations"][0]
    assert obs["tool"] == "profile_command" and obs["kind"] == "result"
    data = obs["data"]
    assert data["status"] == "ok" and data["exit"]["returncode"] == 0
    assert data["tool"] in ("perf", "ncu") and data["reason"]
    assert "## Profiles" in out.report and "Profiler:" in out.report
    diag = out.values["observations"][1]
    assert diag["tool"] == "diagnose_profile" and diag["kind"] == "result"
    primary = diag["data"]["programs"][0]["primary"]
    assert primary["id"] and primary["evidence"]  # a finding that cites what was measured
    assert "## Diagnosis" in out.report and f"`{primary['id']}`" in out.report


def test_diagnose_refuses_a_task_that_is_not_a_finished_profile(perfscout_home):
    out = agent.run({"tasks": [{"tool": "diagnose_profile", "args": {"profile_task": "t99-nothing"}}]},
                    thread_id="diag-bad", context=_ctx(perfscout_home))
    obs = out.values["observations"][0]
    assert obs["kind"] == "refused" and "no successful profile_command task 't99-nothing'" in obs["error"]


class OnceTimingOutCodec(Codec):
    """A real codec (lossless copy) whose first compress times out, as a busy device would."""

    codec_id = "flaky"
    family = "test"
    device = "cpu"
    native_modes = ("abs",)
    @classmethod
    def version(cls) -> str:
        return "1"

    def compress(self, array: np.ndarray) -> Compressed:
        # the evaluation runs in a task process of the sweep engine, which imports this
        # module afresh: the counter is named by the environment it inherits
        counter = Path(os.environ["PERFSCOUT_TEST_FLAKY_CALLS"])
        calls = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(calls + 1))
        if calls == 0:
            raise TimeoutError("device busy")
        return Compressed(data=array.tobytes(), shape=array.shape, dtype=array.dtype.name,
                          codec_id=self.codec_id, mode=self.mode, bound=self.bound)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        return np.frombuffer(compressed.data, dtype=compressed.dtype).reshape(compressed.shape)


def test_transient_codec_failure_is_retried(perfscout_home, tmp_path, monkeypatch):
    from perfscout.codecs import registry

    registry.register_codec("flaky", f"{__name__}:OnceTimingOutCodec")
    monkeypatch.setenv("PERFSCOUT_TEST_FLAKY_CALLS", str(tmp_path / "calls"))
    out = agent.run({"datasets": ["synthetic:grf:8,8"], "codecs": ["flaky"], "mode": "abs",
                     "bounds": [1e-3], "repeats": 1}, thread_id="flaky", context=_ctx(perfscout_home))
    assert out.status == "done"
    kinds = [n["kind"] for n in out.values["notes"]]
    assert kinds == ["retry"] and "TimeoutError" in out.values["notes"][0]["message"]
    rec = json.loads((Path(out.run_dir) / "results.json").read_text())["records"][0]
    assert rec["status"] == "ok" and rec["bound_ok"] is True and rec["task_key"] == "t01-flaky-cpu-abs-1e-3"
    assert [c for e, c, _ in read_ledger(out.run_dir) if e == "start"] == [
        "t01-flaky-cpu-abs-1e-3.a1", "t01-flaky-cpu-abs-1e-3.a2"]


def test_stream_yields_node_updates_in_graph_order_then_the_outcome(perfscout_home):
    spec = {"datasets": ["synthetic:grf:8,8"], "codecs": ["sz3"], "mode": "abs", "bounds": [1e-2, 1e-3],
            "repeats": 1}
    events = list(agent.stream(spec, thread_id="st", context=_ctx(perfscout_home)))
    names = [n for n, _ in events]
    assert names == ["snapshot", "understand", "plan", "act", "observe", "reflect", "act", "observe", "reflect",
                     "report", "__outcome__"]
    assert events[-1][1].status == "done"
    act_update = events[3][1]
    assert act_update["messages"][0].tool_call_id == "t01-sz3-cpu-abs-0.01.a1"


def test_a_program_the_sandbox_refuses_is_labelled_refused_not_a_codec_crash(perfscout_home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # a shell metacharacter in the program's name: the sandbox's argv rules refuse it
    out = agent.run({"tasks": [{"tool": "profile_command", "args": {"command": ["./app;id"]}}]},
                    thread_id="sb-ref", context=_ctx(perfscout_home))
    obs = out.values["observations"][0]
    notes = out.values["notes"]
    assert obs["kind"] == "refused", obs
    assert [n["kind"] for n in notes] == ["refused"] and "codec" not in notes[0]["message"]
    assert "refused, not run" in out.report
