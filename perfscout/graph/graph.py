"""Build and compile the perfscout agent graph.

    START -> snapshot -> understand -> clarify (one question per visit, loops) -> plan
          -> act -> observe -> reflect -> act ... -> report -> END
    (a spec skips clarify; a refused request or one with nothing to do goes to report)

``graph`` is compiled once, without a checkpointer: ``langgraph.json`` exports it and
the LangGraph server attaches its own persistence. :func:`compile_graph` gives the
same graph with a checkpointer for the CLI and the Python API.
"""

from __future__ import annotations

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import RetryPolicy

from perfscout.graph import nodes
from perfscout.graph.context import Context
from perfscout.graph.state import AgentState, InputState, OutputState

GRAPH_NAME = "perfscout"

#: Retry a node when infrastructure (not a tool) fails transiently; tools report their
#: own failures as observations and reflect decides about those.
INFRA_RETRY = RetryPolicy(max_attempts=3, retry_on=(OSError, TimeoutError))


def build() -> StateGraph:
    builder = StateGraph(AgentState, context_schema=Context, input_schema=InputState,
                         output_schema=OutputState)
    builder.add_node("snapshot", nodes.snapshot, retry_policy=INFRA_RETRY)
    builder.add_node("understand", nodes.understand)
    builder.add_node("clarify", nodes.clarify)
    builder.add_node("plan", nodes.plan)
    builder.add_node("act", nodes.make_act_node())
    builder.add_node("observe", nodes.observe, retry_policy=INFRA_RETRY)
    builder.add_node("reflect", nodes.reflect)
    builder.add_node("report", nodes.report, retry_policy=INFRA_RETRY)
    builder.add_edge(START, "snapshot")
    builder.add_edge("snapshot", "understand")
    builder.add_conditional_edges("understand", nodes.route_after_understand, ["clarify", "plan"])
    builder.add_conditional_edges("clarify", nodes.route_after_clarify, ["clarify", "plan"])
    builder.add_conditional_edges("plan", nodes.route_after_plan, ["act", "report"])
    builder.add_edge("act", "observe")
    builder.add_edge("observe", "reflect")
    builder.add_conditional_edges("reflect", nodes.route_after_reflect, ["act", "report"])
    builder.add_edge("report", END)
    return builder


def compile_graph(checkpointer: BaseCheckpointSaver | None = None) -> CompiledStateGraph:
    return build().compile(checkpointer=checkpointer, name=GRAPH_NAME)


#: The exported graph (langgraph.json): no checkpointer attached.
graph = compile_graph()
