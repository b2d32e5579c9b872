"""The viewer over a PostgreSQL checkpointer (a throw-away local cluster, as the agent's own
PostgreSQL tests get one): the runs list, a timeline read from the tables equal to
``get_state_history``, a run's standing equal to the agent's, answering a question and forking."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from perfscout import agent
from perfscout.graph.context import Context
from perfscout.viewer.app import create_app
from perfscout.viewer.store import lineage, open_store
from perfscout.viewer.timeline import LATEST, plain, standing
from tests.integration.test_agent_postgres import pg_url  # noqa: F401 - the fixture

pytestmark = pytest.mark.postgres
TOKEN = "pg-token"


def test_viewer_over_postgres(pg_url: str, tmp_path: Path) -> None:  # noqa: F811
    pytest.importorskip("langgraph.checkpoint.postgres", reason="pip install 'perfscout[postgres]'")
    ctx = Context(home=str(tmp_path / "home"), checkpoint_url=pg_url, planner="deterministic", noise_threshold=1e9)
    raw = tmp_path / "f.raw"
    np.linspace(0, 1, 1024, dtype="<f4").tofile(raw)
    assert agent.run("evaluate sz3 at abs 1e-3 on synthetic:grf:16,16", thread_id="vpg-done", context=ctx
                     ).status == "done"
    assert agent.run(f"evaluate zfp at abs 1e-3 on {raw}", thread_id="vpg-ask", context=ctx).status == "interrupted"
    c = TestClient(create_app(ctx, token=TOKEN), base_url="http://127.0.0.1:8765")
    assert c.get(f"/?token={TOKEN}", follow_redirects=False).status_code == 303
    listing = c.get("/")
    assert listing.status_code == 200 and 'data-run="vpg-done"' in listing.text and 'data-run="vpg-ask"' in listing.text
    assert str(pg_url.split("@")[-1]) in listing.text  # the store named (no password in this URL)
    assert not (tmp_path / "home" / "checkpoints.sqlite").exists()

    with open_store(ctx) as st:
        assert st.kind == "postgres"
        for tid in ("vpg-done", "vpg-ask"):
            rows = st.checkpoints(tid, decode=None)
            ref = st.checkpoints_from_history(tid)
            assert [c.node for c in rows] == [c.node for c in ref] and [c.id for c in rows] == [c.id for c in ref]
            assert [c.step for c in rows] == [c.step for c in ref]
            path, _ = lineage(st.checkpoints(tid))
            mine = standing(path, lambda cid, w: st.load(tid, cid, w))
            theirs = agent._outcome(st.graph, tid)
            assert (mine.status, mine.question, mine.planner) == (theirs.status, theirs.question, theirs.planner)
            for key in (*LATEST, "observations"):
                assert plain(mine.values.get(key)) == plain(theirs.values.get(key)), (tid, key)

    page = c.get("/runs/vpg-done").text
    assert re.findall(r'<span class="node">(\w+)</span>', page) == [
        "snapshot", "understand", "plan", "act", "observe", "reflect", "report"]
    plan_cp = re.findall(r'class="step-before" href="/runs/vpg-done/checkpoints/([0-9a-f-]+)"', page)[2]
    assert '<b id="next">plan</b>' in c.get(f"/runs/vpg-done/checkpoints/{plan_cp}").text

    assert c.post("/runs/vpg-ask/answer", data={"token": TOKEN, "answer": "32x32 float32"},
                  follow_redirects=False).status_code == 303
    job = c.app.state.viewer.jobs.wait("vpg-ask", timeout=300)
    assert job.state == "finished" and job.outcome == "done", job.error
    assert c.get("/api/runs/vpg-ask/progress").json()["status"] == "done"

    intent = agent.history("vpg-done", context=ctx)[0].values["intent"]
    r = c.post("/runs/vpg-done/fork", data={"token": TOKEN, "checkpoint_id": plan_cp, "slot": "intent",
                                             "value": json.dumps({**intent, "bounds": [1e-2]}), "new_thread": "vpg-fork"},
               follow_redirects=False)
    assert r.status_code == 303
    job = c.app.state.viewer.jobs.wait("vpg-fork", timeout=300)
    assert job.state == "finished" and job.outcome == "done", job.error
    values = agent.history("vpg-fork", context=ctx)[0].values
    assert [o["args"]["bound"] for o in values["observations"]] == [1e-2]
