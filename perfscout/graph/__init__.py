"""perfscout.graph: the LangGraph agent (snapshot -> plan -> act -> observe -> reflect -> report).

``perfscout.graph.graph.graph`` is the compiled graph exported in ``langgraph.json``;
:mod:`perfscout.agent` is the Python API that runs it with a checkpointer.
"""
