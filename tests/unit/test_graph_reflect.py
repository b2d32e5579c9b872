"""Reflect's rules as a pure decision over a state (interrupts are tested in integration)."""

from __future__ import annotations

import time

from perfscout.graph.context import Context
from perfscout.graph.reflect import decide, validate_answer
from perfscout.state.agent import Observation, Task

TASK = Task(key="t01-x", tool="evaluate_codec",
            args={"dataset": "synthetic:grf:8,8", "codec": "sz3", "mode": "rel", "bound": 1e-3,
                  "device": "cpu", "repeats": 3})
NEXT = Task(key="t02-y", tool="list_codecs", args={})


def _state(obs: Observation, task: Task = TASK, queue=(NEXT,), steps: int = 1, started: float | None = None):
    return {"observations": [obs.model_dump()], "current": task.model_dump(),
            "queue": [t.model_dump() for t in queue], "plan": {"tasks": [task.model_dump()]},
            "steps": steps, "started_at": started or time.time()}


def _result(task=TASK, *, status="ok", bound_ok=True, cv=0.01, error=""):
    rec = {"status": status, "bound_ok": bound_ok, "codec": task.args["codec"], "mode": "rel",
           "bound": 1e-3, "error": error}
    timing = {"compress": {"cv": cv}, "decompress": {"cv": cv / 2}}
    return Observation(task_key=task.key, call_id=task.call_id, tool=task.tool, kind="result",
                       data={"record": rec, "timing": timing})


def test_ok_result_moves_on():
    d = decide(_state(_result()), Context(home="/tmp/x"))
    assert d.next_task.key == "t02-y" and d.queue == [] and d.notes == []


def test_bound_violation_is_recorded_and_the_run_goes_on():
    d = decide(_state(_result(status="bound_violated", bound_ok=False, error="max err 2e-3")), Context())
    assert d.next_task.key == "t02-y"
    assert [n.kind for n in d.notes] == ["bound_violated"]


def test_noisy_timing_doubles_repeats_up_to_the_cap():
    ctx = Context(noise_threshold=0.2, max_repeats=5)
    d = decide(_state(_result(cv=0.5)), ctx)
    assert d.next_task.key == TASK.key and d.next_task.attempt == 2
    assert d.next_task.args["repeats"] == 5 and d.queue[0].key == "t02-y"
    capped = TASK.model_copy(update={"args": {**TASK.args, "repeats": 5}})
    d2 = decide(_state(_result(capped, cv=0.5), task=capped), ctx)
    assert d2.next_task.key == "t02-y" and "at the cap" in d2.notes[0].message


def test_gpu_unavailable_falls_back_to_the_cpu_twin_or_says_there_is_none():
    gpu = TASK.model_copy(update={"key": "t03-g", "args": {**TASK.args, "codec": "zfp", "device": "cuda"}})
    d = decide(_state(_result(gpu, status="gpu_unavailable", bound_ok=None, error="no CUDA"), task=gpu),
               Context())
    assert d.next_task.args["device"] == "cpu" and d.next_task.args["codec"] == "zfp"
    assert d.notes[0].kind == "gpu_unavailable" and "falling back" in d.notes[0].message
    # the CPU twin already planned: not run twice
    twin = TASK.model_copy(update={"args": {**TASK.args, "codec": "zfp"}})
    st = _state(_result(gpu, status="gpu_out_of_memory", bound_ok=None), task=gpu)
    st["plan"]["tasks"].append(twin.model_dump())
    d2 = decide(st, Context())
    assert d2.next_task.key == "t02-y" and "already task" in d2.notes[0].message


def test_transient_failures_retry_then_give_up():
    obs = Observation(task_key=TASK.key, call_id=TASK.call_id, tool=TASK.tool, kind="error",
                      error="TimeoutError: busy", transient=True)
    d = decide(_state(obs), Context(max_retries=1))
    assert d.next_task.attempt == 2 and d.notes[0].kind == "retry"
    second = TASK.model_copy(update={"attempt": 2})
    d2 = decide(_state(obs, task=second), Context(max_retries=1))
    assert d2.next_task.key == "t02-y" and d2.notes[0].kind == "gave_up"


def test_budgets_stop_the_run_and_name_what_was_not_run():
    d = decide(_state(_result(), steps=5), Context(max_steps=5))
    assert d.next_task is None and "step budget" in d.notes[0].message and "t02-y" in d.notes[0].message
    d2 = decide(_state(_result(), started=time.time() - 100), Context(time_budget_s=10))
    assert d2.next_task is None and "time budget" in d2.notes[0].message


def test_answers_are_validated_field_by_field():
    needs = {"shape": "...", "dtype": "..."}
    assert validate_answer(needs, {"shape": [64, 32], "dtype": "f32"}) == ({"shape": "64,32", "dtype": "f32"}, "")
    assert validate_answer(needs, '{"shape": "64x32", "dtype": "f64"}')[0] == {"shape": "64,32", "dtype": "f64"}
    assert validate_answer(needs, {"skip": True}) == (None, "")
    assert "no 'dtype'" in validate_answer(needs, {"shape": "4"})[1]
    assert "bad shape '4,a'" in validate_answer(needs, {"shape": "4,a", "dtype": "f32"})[1]  # the one parser's words
    # answers in words work too; words that hold no shape are asked again
    assert validate_answer(needs, "48x40 float32") == ({"shape": "48,40", "dtype": "f32"}, "")
    assert validate_answer(needs, "skip") == (None, "")
    assert "must be a JSON object" in validate_answer(needs, "shape please")[1]


def test_context_falls_back_to_environment(monkeypatch):
    monkeypatch.setenv("PERFSCOUT_HOME", "/srv/ps")
    monkeypatch.setenv("PERFSCOUT_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("PERFSCOUT_MAX_STEPS", "7")
    ctx = Context()
    assert (ctx.home, ctx.llm_base_url, ctx.max_steps) == ("/srv/ps", "http://127.0.0.1:9/v1", 7)
    assert ctx.wants_llm() and not Context(planner="deterministic").wants_llm()
    assert Context(home="/explicit").home == "/explicit"


def test_gpu_codec_that_fell_back_itself_is_reported_not_rerun():
    gpu = TASK.model_copy(update={"key": "t03-g", "args": {**TASK.args, "codec": "szp-gpu", "device": "cuda"}})
    obs = _result(gpu, status="gpu_unavailable", error="szp-gpu ran its CPU reference instead")
    obs.data["record"].update(ratio=3.5, device="cpu")
    d = decide(_state(obs, task=gpu), Context())
    assert d.next_task.key == "t02-y"
    assert d.notes[0].kind == "gpu_unavailable" and "measured on cpu" in d.notes[0].message


def test_gpu_out_of_memory_chunks_a_streaming_codec_first():
    gpu = TASK.model_copy(update={"key": "t03-g", "args": {**TASK.args, "codec": "szp-gpu", "device": "cuda"}})
    d = decide(_state(_result(gpu, status="gpu_out_of_memory", bound_ok=None, error="OutOfMemoryError"),
                      task=gpu), Context())
    assert d.next_task.key == "t03-g" and d.next_task.args["chunk_mb"] == 256
    assert d.next_task.args["device"] == "cuda" and "slabs" in d.notes[0].message


def test_codec_failure_naming_a_timeout_is_retried():
    d = decide(_state(_result(status="error", bound_ok=None, error="sz3 failed: TimeoutError: busy")),
               Context(max_retries=1))
    assert d.next_task.key == TASK.key and d.next_task.attempt == 2 and d.notes[0].kind == "retry"
    d2 = decide(_state(_result(status="error", bound_ok=None, error="sz3 failed: ValueError: bad")), Context())
    assert d2.next_task.key == "t02-y" and d2.notes[0].kind == "codec_crashed"
