"""A tool is one object (perfscout/graph/toolbox.py): what the nodes know of a tool, they ask it.

The scan below fails when a string spelled like a tool's name is used anywhere in
perfscout/graph/ outside the tool objects' module: such a string is knowledge of that tool
kept elsewhere (a reflect branch, a report section, a claim), which a new or renamed tool
would silently miss. Question names (``state/intent.py`` ``Question``) share two spellings
with tools (list_codecs, compare_runs); a literal of that spelling passes only where it is
plainly a question: compared with a question (a name ``q``/``question``, an ``.question``
attribute, a name read from ``phrase_table("questions")``), inside ``Literal[...]`` of
questions only, or in a collection of questions only that holds one no tool is called and is
compared with nothing but a question.
"""

from __future__ import annotations

import ast
import json
import typing
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool, tool

from perfscout import agent
from perfscout.graph import llm, reflect, regress_tools, report, toolbox, tools
from perfscout.graph.context import Context
from perfscout.graph.tool_common import _artifact
from perfscout.state.intent import Question

GRAPH_DIR = Path(__file__).resolve().parents[2] / "perfscout" / "graph"
TOOL_OBJECT_MODULES = {GRAPH_DIR / "toolbox.py"}
QUESTIONS = frozenset(typing.get_args(Question))


# ---- the scan ----------------------------------------------------------------------

def _question_names(tree: ast.AST) -> set[str]:
    """``q``, ``question`` and the names a loop binds from ``phrase_table("questions")``."""
    names = {"q", "question"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.comprehension)):
            it = node.iter
            if (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "phrase_table"
                    and it.args and isinstance(it.args[0], ast.Constant) and it.args[0].value == "questions"):
                target = node.target.elts[0] if isinstance(node.target, ast.Tuple) else node.target
                if isinstance(target, ast.Name):
                    names.add(target.id)
    return names


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _strings(elts: list[ast.expr]) -> list[str]:
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def tool_name_literals(source: str, tool_names: set[str], questions: frozenset[str] = QUESTIONS
                       ) -> list[tuple[int, str]]:
    """(line, string) for each string constant equal to a tool name that is not a question's."""
    tree = ast.parse(source)
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    asks = _question_names(tree)
    docs = _docstrings(tree)

    def is_question(expr: ast.expr) -> bool:
        return ((isinstance(expr, ast.Name) and expr.id in asks)
                or (isinstance(expr, ast.Attribute) and expr.attr == "question"))

    def compared_with_question(node: ast.expr, compare: ast.AST) -> bool:
        return isinstance(compare, ast.Compare) and any(
            is_question(op) for op in [compare.left, *compare.comparators] if op is not node)

    def is_literal_type(sub: ast.AST) -> bool:
        return isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id == "Literal"

    def allowed(node: ast.Constant) -> bool:
        parent = parents.get(id(node))
        # the decorator that names a tool where it is written: @tool("profile_command", ...)
        if (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "tool"
                and parent.args and parent.args[0] is node):
            return True
        if node.value not in questions:
            return False
        if compared_with_question(node, parent) or is_literal_type(parent):
            return True
        if isinstance(parent, (ast.Tuple, ast.List, ast.Set)):
            grand = parents.get(id(parent))
            names = _strings(parent.elts)
            if not set(names) <= questions:
                return False
            if isinstance(grand, ast.Compare):  # obs["tool"] in ("list_codecs", ...) is a tool test
                return compared_with_question(parent, grand)
            return is_literal_type(grand) or any(n not in tool_names for n in names)
        return False

    found = sorted((n.lineno, n.col_offset, n.value) for n in ast.walk(tree)
                   if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in tool_names
                   and id(n) not in docs and not allowed(n))
    return [(line, value) for line, _, value in found]


def test_no_tool_name_is_written_out_in_the_graph_outside_the_tool_objects() -> None:
    names = set(toolbox.tool_names())
    found = []
    for path in sorted(GRAPH_DIR.rglob("*.py")):
        if path in TOOL_OBJECT_MODULES:
            continue
        found += [f"{path.relative_to(GRAPH_DIR.parent)}:{line}: {value!r}"
                  for line, value in tool_name_literals(path.read_text(encoding="utf-8"), names)]
    assert not found, ("ask the tool object (perfscout/graph/toolbox.py), e.g. EVALUATE.owns(task), "
                       "SWEEP.name, find(name).failure_kind:\n" + "\n".join(found))


def test_the_scan_tells_a_tool_name_from_a_question_name() -> None:
    names = {"run_sweep", "list_codecs", "compare_runs", "profile_command"}
    planted = '''
"""Docstrings may name run_sweep."""
from typing import Literal

@tool("profile_command")
def profile_program(): ...

Asked = Literal["list_codecs", "compare_runs", "evaluate"]

def f(task, intent, q, obs, t):
    if task.tool == "run_sweep":                       # 11: a tool branch
        pass
    if q == "list_codecs" or intent.question in ("compare_runs", None):
        pass
    if obs.get("tool") in ("list_codecs", "describe_machine"):   # 15: a tool test dressed as questions
        pass
    order = ["describe_machine", "list_codecs", "compare_runs"]
    tools = ["list_codecs", "compare_runs"]            # 18: tool names only
    for question in ("list_codecs", "describe_machine"):
        if question == "list_codecs":
            pass
    cue = any(p for m, p in phrase_table("questions") if m == "compare_runs")
    return Task(tool="compare_runs")                   # 23: a task built by name
'''
    assert tool_name_literals(planted, names) == [(11, "run_sweep"), (15, "list_codecs"),
                                                  (18, "list_codecs"), (18, "compare_runs"),
                                                  (23, "compare_runs")]


# ---- the whitelist -----------------------------------------------------------------

def _defined_tools() -> list[BaseTool]:
    return [v for m in (tools, regress_tools) for v in vars(m).values()
            if isinstance(v, BaseTool) and getattr(getattr(v, "func", None), "__module__", "") == m.__name__]


def test_every_tool_written_is_in_the_one_whitelist_and_tools_derives_from_it() -> None:
    listed = [t.tool for t in toolbox.AGENT_TOOLS]
    assert sorted(t.name for t in _defined_tools()) == sorted(t.name for t in listed)  # none defined but unlisted
    assert len(set(toolbox.tool_names())) == len(listed)
    assert toolbox.TOOLS == tuple(listed) == toolbox.tool_functions()
    assert toolbox.find("run_shell") is None and toolbox.find(toolbox.SWEEP.name) is toolbox.SWEEP


def test_every_rule_a_tool_can_declare_has_its_implementation() -> None:
    assert set(reflect._ON_RESULT) == set(toolbox.OnResult)
    assert set(llm._PLAN_CHECKS) == set(toolbox.PlanCheck)
    assert {s.value for s in toolbox.Section} <= set(report._partition([]))


# ---- a new tool, with nothing but its function ---------------------------------------

@tool(response_format="content_and_artifact")
def shout_words(text: str) -> tuple[str, dict]:
    """Say the words louder (a test tool: it fails on no words)."""
    if not text:
        return "failed: no words", _artifact("error", error="no words to shout")
    return text.upper(), _artifact("result", data={"loud": text.upper()})


SHOUT = toolbox.AgentTool(shout_words)


def test_a_tool_object_without_hooks_takes_the_defaults() -> None:
    assert SHOUT.name == "shout_words" and SHOUT.failure_kind == "shout_words_failed"
    assert SHOUT.on_result is toolbox.OnResult.NEXT and SHOUT.report_section is None
    assert SHOUT.plan_check is toolbox.PlanCheck.SCHEMA
    failed = {"task_key": "t02", "tool": SHOUT.name, "kind": "error", "error": "no words to shout"}
    assert [(c.kind, c.subjects) for c in SHOUT.claims(failed)] == [("tool_error", ["shout_words"])]
    assert SHOUT.claims({**failed, "kind": "result", "data": {"loud": "HI"}}) == []
    task = SHOUT.task("t01-shout", {"text": "hi"})
    assert SHOUT.owns(task) and SHOUT.owns(failed) and not toolbox.EVALUATE.owns(task)


def test_a_new_tool_runs_through_the_real_graph_on_the_defaults(monkeypatch: pytest.MonkeyPatch,
                                                                 perfscout_home: Path) -> None:
    monkeypatch.setattr(toolbox, "AGENT_TOOLS", (*toolbox.AGENT_TOOLS, SHOUT))
    # the LLM planner accepts a model's call of it on its schema alone
    tasks, errors = llm.validate_plan(llm.LLMPlan(tasks=[llm.PlannedCall(tool="shout_words",
                                                                         args={"text": "hi"})]), "shout hi")
    assert not errors and [(t.key, t.tool) for t in tasks] == [("t01-shout_words", "shout_words")]
    spec = {"tasks": [{"tool": "shout_words", "args": {"text": "hello"}},
                      {"tool": "shout_words", "args": {"text": ""}}]}
    out = agent.run(spec, thread_id="shout1",
                    context=Context(home=str(perfscout_home), planner="deterministic"))
    assert out.status == "done"
    kinds = [o["kind"] for o in out.values["observations"]]
    assert kinds == ["result", "error"]  # reflect took the next task after the result
    assert [n["kind"] for n in out.values["notes"]] == ["shout_words_failed"]
    assert "Other tool results" in out.report and "HELLO" in out.report
    claims = json.loads((Path(out.run_dir) / "claims.json").read_text())
    assert [(c["kind"], c["subjects"]) for c in claims["claims"] if c["kind"] == "tool_error"] == [
        ("tool_error", ["shout_words"])]


def test_the_regression_runner_reads_the_evaluations_the_evaluate_tool_stores(tmp_path: Path) -> None:
    # tools/regress.py sits below graph/ and cannot ask EVALUATE: it keeps the name as a string,
    # which must stay the tool's
    from perfscout.state.agent import Observation
    from perfscout.tools import regress

    summary, art = toolbox.EVALUATE.tool.func(dataset="synthetic:grf:16,16", codec="sz3", mode="rel",
                                              bound=1e-3, repeats=2)
    obs = Observation(seq=1, task_key="t01", call_id="t01.a1", tool=toolbox.EVALUATE.name, kind=art["kind"],
                      summary=summary, data=art["data"])
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "001-t01.a1.json").write_text(obs.model_dump_json())
    run = regress.load_run(tmp_path)
    assert run.kind == "agent" and [t.key for t in run.tasks] == ["t01"]
