"""Planning sweeps: the intent form, a spec's ``sweep:`` key, a sweep spec given whole,
and the checks an LLM plan with run_sweep must pass."""

from __future__ import annotations

import pytest

from perfscout.graph.llm import LLMPlan, _task_schemas, validate_plan
from perfscout.graph.planner import PlanningError, plan_request, requested_sweep

SWEEP_SPEC = {"name": "tiny", "datasets": [{"synthetic": "grf:16,16"}], "codecs": ["sz3", "zfp"],
              "modes": ["abs"], "bounds": [1e-2, 1e-3], "repeats": 1}


def _calls(plan):
    return [(t.tool, t.args) for t in plan.tasks]


@pytest.mark.parametrize(("text", "args"), [
    ("sweep examples/sweep_quick.yaml", {"spec": "examples/sweep_quick.yaml"}),
    ("Run the sweep in `examples/sweep_quick.yaml` into runs/quick.",
     {"spec": "examples/sweep_quick.yaml", "out": "runs/quick"}),
    ("sweep ./specs/a.yml --out out/a", {"spec": "./specs/a.yml", "out": "out/a"}),
])
def test_sweep_intents_become_one_run_sweep_task(text, args):
    plan = plan_request(text)
    assert _calls(plan) == [("run_sweep", args)]
    assert plan.planner == "deterministic" and plan.tasks[0].key.startswith("t01-sweep-")
    assert requested_sweep(text) == args


def test_words_that_only_contain_sweep_are_not_sweep_intents():
    assert requested_sweep("compare sz3 at rel 1e-3 on synthetic:grf:8,8") is None
    assert requested_sweep("look at sweep_quick.yaml") is None  # no word "sweep"
    assert requested_sweep("sweep everything") is None  # no spec file
    with pytest.raises(PlanningError, match="Which sweep spec"):
        plan_request("sweep everything")


def test_profile_intents_still_win_over_sweep_words():
    plan = plan_request("profile ./sweep a.yaml")
    assert [t.tool for t in plan.tasks] == ["profile_command", "diagnose_profile"]


def test_spec_sweep_key_forms_and_mixing_with_evaluations():
    assert _calls(plan_request({"sweep": "examples/sweep_quick.yaml"})) == [
        ("run_sweep", {"spec": "examples/sweep_quick.yaml"})]
    plan = plan_request({"goal": "both", "sweep": [{"spec": "a.yaml", "out": "runs/a", "jobs": 2}, "b.yml"],
                         "datasets": ["synthetic:grf:8,8"], "codecs": ["sz3"], "mode": "abs", "bounds": [1e-2]})
    assert _calls(plan) == [
        ("evaluate_codec", {"dataset": "synthetic:grf:8,8", "codec": "sz3", "mode": "abs", "bound": 1e-2,
                            "device": "cpu", "repeats": 3}),
        ("run_sweep", {"spec": "a.yaml", "out": "runs/a", "jobs": 2}),
        ("run_sweep", {"spec": "b.yml"})]
    assert len({t.key for t in plan.tasks}) == 3 and plan.goal == "both"
    for bad, why in (({"sweep": 3}, r"sweep: Input should be a valid string"),
                     ({"sweep": {"out": "x"}}, r"sweep\.spec: Field required"),
                     ({"sweep": {"spec": "a.yaml", "resume": False}}, r"sweep\.resume: Extra inputs")):
        with pytest.raises(PlanningError, match=why):
            plan_request(bad)


def test_a_sweep_spec_given_to_the_agent_runs_its_grid_as_evaluations():
    """No guessing by shape: a spec's grid is the agent's evaluate tasks, each point once."""
    plan = plan_request(SWEEP_SPEC)
    assert [(t.tool, t.args["codec"], t.args["bound"]) for t in plan.tasks] == [
        ("evaluate_codec", c, b) for c in ("sz3", "zfp") for b in (1e-2, 1e-3)]
    assert {t.args["dataset"] for t in plan.tasks} == {"synthetic:grf:16,16"}
    assert plan.goal == "sweep tiny"
    # experiments and per-mode bounds expand as a sweep expands them; a shared point runs once
    plan = plan_request({"datasets": [{"synthetic": "grf:8,8"}], "codecs": ["sz3"], "bounds": {"rel": [1e-2]},
                         "experiments": [{"name": "a"}, {"name": "b", "codecs": ["sz3", "zfp"]}]})
    assert [(t.args["codec"], t.args["mode"]) for t in plan.tasks] == [("sz3", "rel"), ("zfp", "rel")]
    # the settings only a sweep uses are named, not silently dropped
    plan = plan_request({**SWEEP_SPEC, "jobs": 4})
    assert any("not used by the agent: jobs" in n for n in plan.notes)


def test_a_sweep_spec_with_plugins_is_one_run_sweep_task():
    spec = {**SWEEP_SPEC, "plugins": ["my_codecs"]}
    plan = plan_request(spec)
    assert _calls(plan) == [("run_sweep", {"spec_doc": spec})] and "plug-ins" in plan.notes[0]
    with pytest.raises(PlanningError, match="runs as a sweep"):
        plan_request({**spec, "goal": "x"})


def test_llm_plan_schema_offers_run_sweep_typed():
    (schema,) = [s for s in _task_schemas() if s["properties"]["tool"]["enum"] == ["run_sweep"]]
    props = schema["properties"]
    assert props["spec"] == {"type": "string"} and props["jobs"] == {"type": "integer"}
    assert props["spec_doc"] == {"type": "object"} and "runtime" not in props


def _check(request, *calls):
    return validate_plan(LLMPlan(tasks=list(calls)), request)


def test_llm_run_sweep_must_name_the_requested_spec_and_output():
    request = "sweep examples/sweep_quick.yaml"
    tasks, errors = _check(request, {"tool": "run_sweep", "spec": "./examples/sweep_quick.yaml"})
    assert errors == [] and [(t.tool, t.args) for t in tasks] == [
        ("run_sweep", {"spec": "./examples/sweep_quick.yaml"})]
    for call, why in [
        ({"tool": "run_sweep", "spec": "examples/other.yaml"}, "not the one the request names"),
        ({"tool": "run_sweep", "spec": "examples/sweep_quick.yaml", "out": "/tmp/x"}, "was not asked for"),
        ({"tool": "run_sweep", "spec_doc": SWEEP_SPEC}, "`spec_doc` is for YAML requests"),
        ({"tool": "run_sweep", "spec": "examples/sweep_quick.yaml", "jobs": 0}, "bad arguments for run_sweep"),
        ({"tool": "list_codecs"}, "no run_sweep task for examples/sweep_quick.yaml"),
    ]:
        tasks, errors = _check(request, call)
        assert tasks == [] and any(why in e for e in errors), (call, errors)
    _, errors = _check("compare sz3 at rel 1e-3 on synthetic:grf:8,8",
                       {"tool": "run_sweep", "spec": "examples/sweep_quick.yaml"})
    assert any("names no sweep spec" in e for e in errors)
    tasks, errors = _check("sweep a.yaml into runs/a", {"tool": "run_sweep", "spec": "a.yaml", "out": "runs/a/"})
    assert errors == [] and tasks[0].args["out"] == "runs/a/"


def test_llm_follow_up_may_not_run_the_sweep_again():
    plan = LLMPlan(tasks=[{"tool": "run_sweep", "spec": "examples/sweep_quick.yaml"}])
    tasks, errors = validate_plan(plan, "sweep examples/sweep_quick.yaml", key_prefix="f", allow_empty=True)
    assert tasks == [] and any("not a follow-up" in e for e in errors)
