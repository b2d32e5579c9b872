"""``agent.list_runs()`` and ``agent.history()`` on a run with many checkpoints (real SQLite,
the real agent graph): listing the runs reads each thread's newest checkpoint only, and a
history is read a page at a time.

Before, ``list_runs`` walked ``saver.list(None)``, deserialising every checkpoint of every
thread to find each one's newest (a long run's thousands of states in memory at once), and
``history`` could only return all of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from perfscout import agent
from perfscout.errors import InputError
from perfscout.graph.checkpoint import latest_per_thread, open_checkpointer
from perfscout.graph.context import Context
from perfscout.graph.graph import compile_graph
from tests.integration.test_agent_postgres import pg_url  # noqa: F401 - the fixture

SPEC = {"datasets": ["synthetic:grf:8,8"], "codecs": ["zfp"], "mode": "abs", "bounds": [1e-2], "repeats": 1}
EXTRA = 300  # checkpoints added to the long run


def _ctx(home: Path) -> Context:
    return Context(home=str(home), planner="deterministic", noise_threshold=1e9)


@pytest.fixture()
def many(perfscout_home: Path) -> Context:
    ctx = _ctx(perfscout_home)
    assert agent.run(SPEC, thread_id="short", context=ctx).status == "done"
    assert agent.run(SPEC, thread_id="long", context=ctx).status == "done"
    with open_checkpointer(ctx) as saver:  # a long run: each state update is one more checkpoint
        graph = compile_graph(saver)
        config = {"configurable": {"thread_id": "long"}}
        for i in range(EXTRA):
            graph.update_state(config, {"queue": []}, as_node="report")
    return ctx


@pytest.fixture()
def loads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many checkpoint blobs are deserialised (every saver read goes through loads_typed)."""
    seen = [0]
    real = JsonPlusSerializer.loads_typed

    def counted(self, data):  # noqa: ANN001, ANN202
        seen[0] += 1
        return real(self, data)

    monkeypatch.setattr(JsonPlusSerializer, "loads_typed", counted)
    return seen


def test_list_runs_reads_only_each_threads_newest_checkpoint(many: Context, loads: list[int]) -> None:
    with open_checkpointer(many) as saver:
        everything = list(saver.list(None))
        full_scan = loads[0]
        newest = {}
        for tup in everything:
            tid, ts = tup.config["configurable"]["thread_id"], tup.checkpoint["ts"]
            newest[tid] = max(newest.get(tid, ""), ts)
    assert len(everything) > EXTRA and full_scan >= len(everything)

    loads[0] = 0
    runs = agent.list_runs(context=many)
    assert loads[0] <= 12, f"list_runs deserialised {loads[0]} blobs for 2 threads of {len(everything)} checkpoints"
    assert [r.thread_id for r in runs] == ["long", "short"]  # the long one was updated last
    assert {r.thread_id: r.updated_at for r in runs} == newest  # the same times the full scan finds
    assert all(r.status == "done" and r.run_dir for r in runs)

    with open_checkpointer(many) as saver:
        assert [(t, ts) for t, _, ts in latest_per_thread(saver)] == sorted(newest.items(), key=lambda kv: kv[1],
                                                                          reverse=True)


def test_history_pages_through_a_long_run(many: Context, loads: list[int]) -> None:
    everything = agent.history("long", context=many)
    assert len(everything) > EXTRA
    ids = [s.config["configurable"]["checkpoint_id"] for s in everything]

    loads[0] = 0
    first = agent.history("long", limit=50, context=many)
    assert loads[0] < 4 * 50, loads[0]  # the page's checkpoints (and their writes), not the run's
    second = agent.history("long", limit=50, before=first[-1].config["configurable"]["checkpoint_id"], context=many)
    got = [s.config["configurable"]["checkpoint_id"] for s in first + second]
    assert got == ids[:100]
    tail = agent.history("long", limit=1000, before=ids[-3], context=many)
    assert [s.config["configurable"]["checkpoint_id"] for s in tail] == ids[-2:]
    assert first[0].values == everything[0].values
    for bad in (0, -1, 2.5):
        with pytest.raises(InputError, match="positive whole number"):
            agent.history("long", limit=bad, context=many)  # type: ignore[arg-type]


@pytest.mark.postgres
def test_list_runs_over_postgres_reads_only_each_threads_newest(pg_url: str, tmp_path: Path,  # noqa: F811
                                                                loads: list[int]) -> None:
    """The same on PostgresSaver (a real server: the grouped query over its own table)."""
    pytest.importorskip("langgraph.checkpoint.postgres", reason="pip install 'perfscout[postgres]'")
    ctx = Context(home=str(tmp_path / "home"), planner="deterministic", noise_threshold=1e9,
                  checkpoint_url=pg_url)
    for tid in ("pgl-short", "pgl-long"):
        assert agent.run(SPEC, thread_id=tid, context=ctx).status == "done"
    def grow(n: int) -> int:
        with open_checkpointer(ctx) as saver:
            graph = compile_graph(saver)
            for _ in range(n):
                graph.update_state({"configurable": {"thread_id": "pgl-long"}}, {"queue": []}, as_node="report")
            return len(list(saver.list(None)))

    def listed() -> tuple[list, int]:
        loads[0] = 0
        runs = [r for r in agent.list_runs(context=ctx) if r.thread_id.startswith("pgl-")]
        return runs, loads[0]

    n_all = grow(20)
    runs, before = listed()
    assert [r.thread_id for r in runs] == ["pgl-long", "pgl-short"]
    n_more = grow(150)
    runs, after = listed()
    # PostgresSaver keeps each channel in a blob of its own: a checkpoint is a dozen loads, but
    # the count does not grow with the run (150 more checkpoints, the same reads)
    assert n_more >= n_all + 150 and after == before, (before, after, n_all, n_more)
    assert runs[0].thread_id == "pgl-long"
    assert runs[0].updated_at == agent.history("pgl-long", limit=1, context=ctx)[0].created_at
