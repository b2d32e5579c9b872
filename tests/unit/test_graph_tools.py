"""The whitelist as LangGraph's ToolNode executes it (outside a graph run)."""

from __future__ import annotations

import shutil
from pathlib import Path

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph

from perfscout.graph.nodes import make_act_node
from perfscout.graph.state import AgentState
from perfscout.graph.toolbox import TOOLS, tool_names

NCU_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ncu"


def _call(node, name, args, **state):
    """Run one call through the ToolNode inside a one-node graph (it needs a runtime)."""
    graph = StateGraph(AgentState)
    graph.add_node("act", node)
    graph.add_edge(START, "act")
    graph.add_edge("act", END)
    msg = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": "c1", "type": "tool_call"}])
    out = graph.compile().invoke({"request": "", "messages": [msg], **state})
    return out["messages"][-1]


def test_the_whitelist_is_exactly_the_typed_tools_with_docstrings():
    assert tool_names() == ["evaluate_codec", "list_codecs", "platform_snapshot", "profile_command",
                            "diagnose_profile", "diagnose_file", "run_sweep", "compare_runs", "tune_command"]
    for t in TOOLS:
        assert t.description.strip(), t.name
        assert "runtime" not in t.tool_call_schema.model_json_schema().get("properties", {})
    assert set(make_act_node().tools_by_name) == set(tool_names())


def test_unknown_tool_and_bad_arguments_are_error_replies(tmp_path):
    node = make_act_node()
    reply = _call(node, "run_shell", {"cmd": "id"}, run_dir=str(tmp_path))
    assert reply.status == "error" and "not a valid tool" in reply.content
    reply = _call(node, "evaluate_codec", {"dataset": "synthetic:grf:8,8", "codec": "sz3", "mode": "rel",
                                           "bound": -1}, run_dir=str(tmp_path))
    assert reply.status == "error" and "bound" in reply.content
    reply = _call(node, "evaluate_codec", {"dataset": "synthetic:grf:8,8", "codec": "gzip", "mode": "abs",
                                           "bound": 1e-3}, run_dir=str(tmp_path))
    assert reply.status == "success" and reply.artifact["kind"] == "error" and "gzip" in reply.artifact["error"]
    # every call that reached a tool is in the ledger, with its raw reply saved
    assert sorted(p.name for p in (tmp_path / "raw").glob("*.json")) == ["c1.json"]


def test_diagnose_profile_reads_a_real_ncu_profile(tmp_path):
    prof_dir = tmp_path / "profile-run"
    prof_dir.mkdir()
    shutil.copy(NCU_FIXTURES / "h200_transpose_raw.csv", prof_dir / "ncu_raw.csv")
    shutil.copy(NCU_FIXTURES / "h200_transpose_details.csv", prof_dir / "ncu_details.csv")
    observations = [{"task_key": "t01-profile", "tool": "profile_command", "kind": "result",
                     "data": {"tool": "ncu", "run_dir": str(prof_dir)}}]
    reply = _call(make_act_node(), "diagnose_profile", {"profile_task": "t01-profile"},
                  observations=observations, run_dir=str(tmp_path))
    assert reply.artifact["kind"] == "result", reply.content
    kernels = reply.artifact["data"]["kernels"]
    assert kernels and all(k["primary"] is None or k["primary"]["id"] for k in kernels)
    assert any(k["primary"] for k in kernels)
    assert "transpose" in reply.content.lower()
