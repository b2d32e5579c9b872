"""The deterministic planner and the validation of untrusted (LLM) plans."""

from __future__ import annotations

import pytest

from perfscout.graph.llm import LLMPlan, PlannedCall, validate_plan
from perfscout.graph.planner import DEMO_SPEC, PlanningError, plan_request


def _args(plan):
    return [(t.tool, t.args.get("codec"), t.args.get("device"), t.args.get("bound")) for t in plan.tasks]


def test_compare_intent_expands_codecs_bounds_and_devices():
    plan = plan_request("compare sz3 and zfp at rel 1e-3, 1e-4 on vorticity.512_512")
    assert _args(plan) == [("evaluate_codec", "sz3", "cpu", 1e-3), ("evaluate_codec", "sz3", "cpu", 1e-4),
                           ("evaluate_codec", "zfp", "cpu", 1e-3), ("evaluate_codec", "zfp", "cpu", 1e-4)]
    assert {t.args["dataset"] for t in plan.tasks} == {"vorticity.512_512"}
    assert len({t.key for t in plan.tasks}) == 4  # keys are unique
    assert plan.planner == "deterministic"


def test_gpu_request_keeps_cpu_codecs_on_the_cpu_and_says_so():
    plan = plan_request("compare sz3 and zfp at rel 1e-3 on vorticity.512_512 on the gpu")
    devices = {(t.args["codec"], t.args["device"]) for t in plan.tasks}
    assert devices == {("sz3", "cpu"), ("zfp", "cpu")}
    assert any("sz3 runs on the CPU only" in n for n in plan.notes)
    assert any("names the GPU but no GPU compressor" in n for n in plan.notes)


def test_a_family_name_shared_by_two_fields_is_asked_about_not_guessed():
    with pytest.raises(PlanningError, match="vorticity.128_128_41 or vorticity.512_512"):
        plan_request("compare sz3 and zfp at rel 1e-3 on vorticity")


def test_sz3_h5_is_not_mistaken_for_sz3():
    plan = plan_request("compare sz3-h5 at abs 1e-2 on synthetic:grf:16,16")
    assert [t.args["codec"] for t in plan.tasks] == ["sz3-h5"]


def test_raw_file_intent_keeps_shape_and_dtype(tmp_path):
    raw = tmp_path / "field.raw"
    raw.write_bytes(bytes(64 * 32 * 8))
    plan = plan_request(f"evaluate sz3 at rel 1e-2 on {raw} shape 64x32 f64")
    assert plan.tasks[0].args | {} == {**plan.tasks[0].args, "dataset": str(raw),
                                       "shape": "64,32", "dtype": "f64"}


def test_demo_spec_plans_every_installed_cpu_codec_at_three_bounds():
    from perfscout.codecs.registry import list_codecs

    cpu = [i.id for i in list_codecs() if i.available and i.device == "cpu"]
    plan = plan_request(DEMO_SPEC)
    assert len(plan.tasks) == 3 * len(cpu)
    assert {t.args["codec"] for t in plan.tasks} == set(cpu)
    assert sorted({t.args["bound"] for t in plan.tasks}) == [1e-4, 1e-3, 1e-2]


def test_spec_with_explicit_tasks_and_unknown_keys():
    plan = plan_request({"tasks": [{"tool": "list_codecs"}]})
    assert [t.tool for t in plan.tasks] == ["list_codecs"]
    with pytest.raises(PlanningError, match="colour: Extra inputs are not permitted"):
        plan_request({"colour": "blue"})


_EVAL = {"datasets": ["synthetic:grf:8,8"], "codecs": ["sz3"], "mode": "abs", "bounds": [1e-3]}


@pytest.mark.parametrize("spec, fragment", [
    ({**_EVAL, "bounds": ["abc"]}, "bounds.0: Input should be a valid number"),
    ({**_EVAL, "repeats": "many"}, "repeats: Input should be a valid integer"),
    ({**_EVAL, "codecs": [{"name": "sz3"}]}, "codecs.0.id: Field required"),
    ({"sweep": {"spec": "s.yaml", "jobs": "two"}}, "sweep.jobs: Input should be a valid integer"),
    ({"tasks": [{"tool": "list_codecs", "args": ["x"]}]}, "tasks.0.args: Input should be a valid dictionary"),
    ({**_EVAL, "mode": "abs", "modes": ["rel"]}, "give either 'mode' or 'modes'"),
])
def test_malformed_spec_values_are_planning_errors_not_crashes(spec, fragment):
    with pytest.raises(PlanningError, match=fragment):
        plan_request(spec)


@pytest.mark.parametrize("text, question", [
    ("", "empty request"), ("hello there", "What should I find out"),
    ("compare sz3 on vorticity.512_512", "Which error bound")])
def test_unplannable_intents_raise_the_question_to_ask(text, question):
    with pytest.raises(PlanningError, match=question):
        plan_request(text)


# ---- validation of untrusted plans -----------------------------------------------

REQUEST = "compare sz3 and zfp at rel 1e-3 on vorticity.512_512"


def _call(**args):
    base = {"dataset": "vorticity.512_512", "codec": "sz3", "mode": "rel", "bound": 1e-3}
    return PlannedCall(tool="evaluate_codec", args={**base, **args})


def test_a_correct_plan_validates():
    tasks, errors = validate_plan(LLMPlan(tasks=[_call(), _call(codec="zfp")]), REQUEST)
    assert errors == [] and [t.args["codec"] for t in tasks] == ["sz3", "zfp"]


@pytest.mark.parametrize("calls, fragment", [
    ([PlannedCall(tool="run_shell", args={"cmd": "rm -rf /"})], "'run_shell' is not a tool"),
    ([_call(bound="tiny")], "bad arguments for evaluate_codec: bound"),
    ([_call(repeats=[3])], "bad arguments for evaluate_codec: repeats"),
    ([_call(codec="gzip")], "unknown codec 'gzip'"),
    ([_call(dataset="passwords")], "unknown dataset 'passwords'"),
    ([_call()], "no task for zfp at rel 0.001"),
    ([_call(), _call(codec="zfp", bound=0.5)], "bound 0.5 was not asked for"),
    ([_call(), _call(codec="zfp", mode="abs")], "mode 'abs' but the request asks for 'rel'"),
    ([], "the plan has no tasks"),
])
def test_invalid_plans_are_rejected_with_reasons(calls, fragment):
    tasks, errors = validate_plan(LLMPlan(tasks=calls), REQUEST)
    assert tasks == []
    assert any(fragment in e for e in errors), errors


def test_profile_intent_plans_exactly_the_named_command():
    plan = plan_request("why is my kernel slow: profile ./app --size 4096")
    assert [(t.tool, t.args) for t in plan.tasks] == [
        ("profile_command", {"command": ["./app", "--size", "4096"]}),
        ("diagnose_profile", {"profile_task": "t01-profile"})]
    with pytest.raises(PlanningError, match="Which program should I profile"):
        plan_request("profile   ")


@pytest.mark.parametrize("command, ok", [
    (["./app", "--size", "4096"], True),
    (["rm", "-rf", "."], False),
    (["./app"], False),
])
def test_a_model_may_profile_only_the_command_the_user_named(command, ok):
    plan = LLMPlan(tasks=[PlannedCall(tool="profile_command", args={"command": command})])
    tasks, errors = validate_plan(plan, "why is my kernel slow: profile ./app --size 4096")
    assert bool(tasks) is ok and (not errors) is ok
    _, errors = validate_plan(plan, "compare sz3 at rel 1e-3 on vorticity.512_512")
    assert any("asks to profile no program" in e for e in errors)


def test_demo_says_whether_it_uses_the_real_field_or_the_synthetic_fallback(tmp_path, monkeypatch):
    monkeypatch.setenv("PERFSCOUT_SHARED_DATA", str(tmp_path))  # an empty data directory
    plan = plan_request(DEMO_SPEC)
    assert {t.args["dataset"] for t in plan.tasks} == {"synthetic:grf:512,512"}
    assert any("vorticity.512_512 is not available here" in n and "synthetic fallback" in n
               for n in plan.notes)


def test_demo_uses_the_real_field_when_present(shared_data):
    plan = plan_request(DEMO_SPEC)
    assert {t.args["dataset"] for t in plan.tasks} == {"vorticity.512_512"}
    assert any("found: using the real field" in n for n in plan.notes)


def test_model_diagnosis_is_tied_to_the_plans_own_profile_task():
    request = "why is my kernel slow: profile ./app"
    plan = LLMPlan(tasks=[PlannedCall(tool="profile_command", args={"command": ["./app"]}),
                          PlannedCall(tool="diagnose_profile", args={"profile_task": "whatever"})])
    tasks, errors = validate_plan(plan, request)
    assert errors == [] and tasks[1].args == {"profile_task": tasks[0].key}
    alone = LLMPlan(tasks=[PlannedCall(tool="diagnose_profile", args={"profile_task": "t01"})])
    assert any("needs an earlier profile_command task" in e for e in validate_plan(alone, request)[1])
