"""The agent's evaluate_codec runs through the sweep engine (sweep/runner.run_tasks): each call is
a sweep task in a contained child, its record committed to the agent run directory's
results.sqlite with raw/<task_key>/ files, and the observation it returns keeps its shape
(record, timing with cv/samples, notes, field facts, search). Real codecs, real processes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

import tests.fakes.crashing_codec  # noqa: F401 - registers fake-crash (at run time: the task carries it)
from perfscout.graph.nodes import make_act_node
from perfscout.graph.state import AgentState
from perfscout.sweep.api import report
from perfscout.tools.results_store import open_results

SYNTH = {"dataset": "synthetic:grf:16,16", "codec": "sz3", "mode": "rel", "bound": 1e-3, "repeats": 2}


def _call(args: dict, run_dir: Path, call_id: str = "t01-sz3.a1", **state):
    graph = StateGraph(AgentState)
    graph.add_node("act", make_act_node())
    graph.add_edge(START, "act")
    graph.add_edge("act", END)
    msg = AIMessage(content="", tool_calls=[{"name": "evaluate_codec", "args": args, "id": call_id,
                                             "type": "tool_call"}])
    out = graph.compile().invoke({"request": "", "messages": [msg], "run_dir": str(run_dir), "run_id": "r1",
                                  **state})
    return out["messages"][-1].artifact


def _attempts(run_dir: Path) -> list[tuple]:
    conn = sqlite3.connect(run_dir / "results.sqlite")
    try:
        return conn.execute("SELECT task_key, tag, outcome FROM attempts ORDER BY id").fetchall()
    finally:
        conn.close()


def test_an_evaluation_is_a_stored_sweep_task_and_its_observation_keeps_its_shape(tmp_path: Path) -> None:
    art = _call(SYNTH, tmp_path)
    assert art["kind"] == "result", art
    data = art["data"]
    assert set(data) >= {"record", "timing", "notes", "field", "store_task_key"}
    rec = data["record"]
    assert rec["status"] == "ok" and rec["bound_ok"] is True and rec["dataset"] == "grf:16x16"
    assert rec["task_key"] == "t01-sz3" and rec["run_id"] == "r1"  # the agent's task, as reflect and claims read it
    compress = data["timing"]["compress"]
    assert compress["repeats"] == 2 and len(compress["samples_s"]) == 2 and compress["cv"] >= 0
    assert data["field"]["size"] == 256 and data["field"]["dtype"] == "float32"
    # the sweep engine's store and files, in the agent's run directory
    df = open_results(tmp_path)
    assert list(df.task_key) == [data["store_task_key"]] and float(df.ratio[0]) == rec["ratio"]
    work = tmp_path / "raw" / data["store_task_key"]
    assert {p.name for p in work.iterdir()} >= {"task.json", "result.json", "log.txt", "evaluation.json"}
    # a psnr target's search outcome rides in the observation and in raw/<key>/search.json, as in a sweep
    art = _call({**SYNTH, "mode": "psnr", "bound": 60.0}, tmp_path, call_id="t02-sz3.a1")
    assert art["kind"] == "result" and art["data"]["search"]["trials"]
    assert (tmp_path / "raw" / art["data"]["store_task_key"] / "search.json").is_file()


def test_a_resumed_call_is_not_measured_twice_and_a_retry_is_a_new_attempt(tmp_path: Path) -> None:
    first = _call(SYNTH, tmp_path, call_id="t01-sz3.a1")["data"]
    again = _call(SYNTH, tmp_path, call_id="t01-sz3.a1")["data"]  # the same call, re-run after a resume
    assert again["record"] == first["record"] and len(_attempts(tmp_path)) == 1
    retry = _call(SYNTH, tmp_path, call_id="t01-sz3.a2")["data"]  # reflect's retry of the same configuration
    key = first["store_task_key"]
    assert retry["store_task_key"] == key and retry["record"]["started_at"] >= first["record"]["started_at"]
    attempts = _attempts(tmp_path)
    assert [(k, o) for k, _, o in attempts] == [(key, "ok"), (key, "ok")]
    assert len(open_results(tmp_path)) == 1  # one row per configuration: the latest attempt's
    work = tmp_path / "raw" / key
    old_tag = attempts[0][1]
    # the first attempt's record is kept under its tag, not overwritten
    kept = json.loads((work / f"result.{old_tag}.json").read_text())
    assert kept["started_at"] == first["record"]["started_at"]


def test_a_crashing_codec_is_a_codec_crashed_record_and_the_agent_lives_on(tmp_path: Path) -> None:
    art = _call({"dataset": "synthetic:grf:16,16", "codec": "fake-crash", "mode": "abs", "bound": 1e-2,
                 "repeats": 1, "options": {"behaviour": "segfault"}}, tmp_path, call_id="t01-crash.a1")
    assert art["kind"] == "result"
    rec = art["data"]["record"]
    assert rec["status"] == "codec_crashed" and "SIGSEGV" in rec["error"] and rec["task_key"] == "t01-crash"
    assert open_results(tmp_path).status.tolist() == ["codec_crashed"]


def test_nan_in_the_data_is_asked_about_with_its_count(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    field = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
    field[2, 3] = np.nan
    np.save("holes.npy", field)
    art = _call({"dataset": "holes.npy", "codec": "zfp", "mode": "abs", "bound": 1e-3, "repeats": 1},
                tmp_path / "run", call_id="t01-zfp.a1")
    assert art["kind"] == "needs_input" and set(art["needs"]) == {"nonfinite"}
    assert "1 NaN/Inf" in art["needs"]["nonfinite"]
    art = _call({"dataset": "holes.npy", "codec": "zfp", "mode": "abs", "bound": 1e-3, "repeats": 1,
                 "nonfinite": "passthrough"}, tmp_path / "run", call_id="t01-zfp.a2")
    assert art["kind"] == "result" and art["data"]["record"]["bound_ok"] is True
    assert art["data"]["record"]["dataset"] == "holes.npy"


def test_what_the_evaluation_raises_in_its_child_is_the_reply_it_gave_in_process(tmp_path: Path) -> None:
    # a codec's own error (CodecError): a failed call, not a measurement nor a crash
    art = _call({**SYNTH, "options": {"no_such_option": 1}}, tmp_path, call_id="t01-x.a1")
    assert art["kind"] == "error" and "unknown option(s) no_such_option" in art["error"], art
    # bad input (an InputError): refused, as when it raised in this process
    art = _call({**SYNTH, "mode": "ratio", "bound": 1e9}, tmp_path, call_id="t02-x.a1")
    assert art["kind"] == "refused", art


def test_perfscout_report_on_an_agent_run_keeps_the_agents_own_report(tmp_path: Path) -> None:
    (tmp_path / "request.json").write_text(json.dumps({"request": {"datasets": ["synthetic:grf:16,16"]}}))
    (tmp_path / "report.md").write_text("the agent's answer\n")
    _call(SYNTH, tmp_path)
    html = report(tmp_path)
    assert html == tmp_path / "store-report" / "report.html" and html.is_file()
    assert (tmp_path / "report.md").read_text() == "the agent's answer\n"
    assert "grf:16x16" in (tmp_path / "store-report" / "report.md").read_text()


def test_the_agents_gpu_calls_on_one_run_share_one_gpu_worker(tmp_path: Path) -> None:
    """A run's CUDA evaluations are tasks of one GPU worker kept between the agent's calls
    (CuPy imported and the CUDA context made once per run, not once per call); on a machine
    without a GPU szp-gpu runs its NumPy reference in that worker and says so."""
    from perfscout.sweep.runner import close_kept_servers

    gpu = {**SYNTH, "codec": "szp-gpu", "device": "cuda", "mode": "abs"}
    try:
        first = _call({**gpu, "bound": 1e-2}, tmp_path, call_id="t01-szp.a1")
        second = _call({**gpu, "bound": 1e-3}, tmp_path, call_id="t02-szp.a1")
        third = _call({**gpu, "bound": 1e-4}, tmp_path, call_id="t03-szp.a1")  # kept again after reuse
    finally:
        close_kept_servers()
    for art in (first, second, third):
        assert art["kind"] == "result" and art["data"]["record"]["status"] in ("ok", "gpu_unavailable"), art
    conn = sqlite3.connect(tmp_path / "results.sqlite")
    try:
        rows = conn.execute("SELECT worker, detail FROM attempts ORDER BY id").fetchall()
    finally:
        conn.close()
    assert [w for w, _ in rows] == ["gpuworker"] * 3, rows
    details = [json.loads(d) for _, d in rows]
    assert len({d["worker_pid"] for d in details}) == 1, details
    assert [d["task_no"] for d in details] == [1, 2, 3], details  # each call the next task of one worker
