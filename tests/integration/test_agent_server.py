"""`langgraph dev` serves the exported graph; driven through langgraph-sdk, offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import free_port, stop_group, wait_until_serving


ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).parent / "langgraph"


@pytest.fixture()
def server(tmp_path):
    if not LANGGRAPH.exists() and shutil.which("langgraph") is None:
        pytest.skip("langgraph-cli[inmem] is not installed (pip install 'perfscout[server]')")
    pytest.importorskip("langgraph_sdk", reason="langgraph-sdk is not installed")
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PERFSCOUT_HOME": str(tmp_path / "home"),
           "PERFSCOUT_PLANNER": "deterministic", "PERFSCOUT_NOISE_THRESHOLD": "1e9",
           # offline: no telemetry, no tracing, no license or metadata calls
           "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGSMITH_TRACING": "false",
           "LANGCHAIN_TRACING_V2": "false"}
    log = open(tmp_path / "server.log", "wb")
    exe = str(LANGGRAPH) if LANGGRAPH.exists() else "langgraph"
    # cwd is the test's own directory: the in-memory server keeps .langgraph_api/ there
    proc = subprocess.Popen([exe, "dev", "--no-browser", "--no-reload", "--allow-blocking",
                             "--host", "127.0.0.1", "--port", str(port),
                             "--config", str(ROOT / "langgraph.json")],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(f"{url}/ok", proc, tmp_path / "server.log", timeout_s=90,
                           what="langgraph dev", poll_s=0.3)
        yield url, tmp_path / "home"
    finally:
        stop_group(proc, grace_s=20)
        log.close()


@pytest.mark.slow
def test_dev_server_runs_interrupts_and_resumes_the_graph(server):
    from langgraph_sdk import get_sync_client

    url, home = server
    client = get_sync_client(url=url)
    assistants = client.assistants.search(graph_id="perfscout")
    assert [a["graph_id"] for a in assistants] == ["perfscout"]

    thread = client.threads.create()
    tid = thread["thread_id"]
    first = client.runs.wait(tid, "perfscout", input={"request": "evaluate sz3 at abs 1e-2 on /missing/field.raw"})
    question = first["__interrupt__"][0]["value"]
    assert "data" in question["needs"] and "field.raw" in question["question"]
    state = client.threads.get_state(tid)
    assert state["next"] == ["clarify"] and state["interrupts"]  # asked before anything ran

    final = client.runs.wait(tid, "perfscout", command={"resume": "synthetic:grf:16,16"})
    assert final["status"] == "done"
    report = Path(final["report_path"]).read_text()
    assert "synthetic:grf:16,16" in report and "| sz3 |" in report
    assert Path(final["report_path"]).is_relative_to(home)
    history = client.threads.get_history(tid)
    assert len(history) > 5  # the server's own checkpointer kept every step

    # streaming a second run on a new thread: node updates arrive in order
    t2 = client.threads.create()["thread_id"]
    nodes = [chunk.data and next(iter(chunk.data)) for chunk in client.runs.stream(
        t2, "perfscout", input={"request": {"datasets": ["synthetic:grf:8,8"], "codecs": ["zfp"],
                                            "mode": "abs", "bounds": [1e-2], "repeats": 1}},
        stream_mode="updates") if chunk.event == "updates"]
    assert nodes == ["snapshot", "understand", "plan", "act", "observe", "reflect", "report"]
