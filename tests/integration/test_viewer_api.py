"""`perfscout serve`'s endpoints over real agent runs (deterministic planner, small synthetic
fields, a raw file that makes the run ask), through Starlette's TestClient.

Covered: the token (reads once, every action each time; wrong or missing refused), the Host
check, --read-only, every page and the progress API, answer / resume / fork through the page,
traversal through run ids and file names, a damaged checkpoint store (a clear page, the file
untouched), hostile request text, claims and dataset names rendered inert.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

from perfscout import agent
from perfscout.graph.context import Context
from perfscout.viewer.app import create_app
from perfscout.viewer.store import open_store

TOKEN = "t0k3n-for-tests"
BASE = "http://127.0.0.1:8765"
HOSTILE = 'evaluate sz3 at abs 1e-3 on synthetic:grf:16,16 <script>alert("pwn")</script><img src=x onerror=alert(2)>'


def context(home: Path, **extra) -> Context:
    # explicit store URL: an exported PERFSCOUT_CHECKPOINT_URL must not redirect the test
    return Context(home=str(home), checkpoint_url=f"sqlite:///{home}/checkpoints.sqlite", planner="deterministic",
                   noise_threshold=1e9, **extra)


def client(ctx: Context, **kw) -> TestClient:
    c = TestClient(create_app(ctx, token=TOKEN, **kw), base_url=BASE)
    assert c.get(f"/?token={TOKEN}", follow_redirects=False).status_code == 303
    return c


def raw_file(folder: Path) -> Path:
    path = folder / "f.raw"
    np.linspace(0, 1, 1024, dtype="<f4").tofile(path)  # 4096 bytes: 32x32 f32 or 8x8x8 f64 (it asks)
    return path


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("viewer-home")
    ctx = context(home)
    assert agent.run("evaluate sz3 at abs 1e-3 on synthetic:grf:32,32", thread_id="done1", context=ctx).status == "done"
    out = agent.run(f"evaluate zfp at abs 1e-3 on {raw_file(home)}", thread_id="wait1", context=ctx)
    assert out.status == "interrupted"
    assert agent.run(HOSTILE, thread_id="evil1", context=ctx).status in ("interrupted", "done")
    return home


@pytest.fixture()
def app_client(home: Path) -> TestClient:
    return client(context(home))


def form(**fields: str) -> dict[str, str]:
    return {"token": TOKEN, **fields}


def assert_rows_agree_with_the_agent(ctx: Context) -> None:
    """The standing read from the store's rows is what perfscout.agent reads from each run's
    latest state (status, question, planner, next nodes, the values the page shows)."""
    from perfscout.viewer.app import Viewer
    from perfscout.viewer.store import lineage
    from perfscout.viewer.timeline import LATEST, plain, standing

    viewer = Viewer(ctx)
    with open_store(ctx) as st:
        threads = [t for t, _ in st.threads()]
        assert threads
        for tid in threads:
            path, _ = lineage(st.checkpoints(tid))
            mine = standing(path, lambda cid, w: st.load(tid, cid, w), seed=lambda: st.snapshot(tid, path[0].id).values)
            assert mine is not None or len(path) < 2, tid
            mine = mine or viewer.standing(st, tid, path)
            theirs = agent._outcome(st.graph, tid)
            snap = st.snapshot(tid)
            assert (mine.status, mine.question, mine.planner) == (theirs.status, theirs.question, theirs.planner), tid
            assert mine.next == list(snap.next), tid
            for key in (*LATEST, "observations", "answers"):
                assert plain(mine.values.get(key)) == plain(theirs.values.get(key)), (tid, key)


# ---- the token and the host -------------------------------------------------------


def test_reading_needs_the_token_once(home: Path) -> None:
    c = TestClient(create_app(context(home), token=TOKEN), base_url=BASE)
    assert c.get("/").status_code == 401
    assert c.get("/runs/done1").status_code == 401
    assert c.get("/api/runs/done1/progress").status_code == 401
    assert c.get("/?token=wrong").status_code == 403
    r = c.get(f"/runs/done1?token={TOKEN}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/runs/done1"  # the token leaves the address bar
    assert "httponly" in r.headers["set-cookie"].lower() and "samesite=strict" in r.headers["set-cookie"].lower()
    page = c.get("/")
    assert page.status_code == 200
    for rid in ("done1", "wait1", "evil1"):
        assert f'data-run="{rid}"' in page.text
    row = re.search(r'<tr class="status-interrupted" data-run="wait1">(.*?)</tr>', page.text, re.S).group(1)
    assert "deterministic" in row and "f.raw has 4,096 bytes" in row  # planner and the pending question
    assert c.get("/static/viewer.js").status_code == 200


def test_a_foreign_host_header_is_refused(home: Path) -> None:
    c = client(context(home))
    assert c.get("/", headers={"host": "attacker.example:8765"}).status_code == 421
    assert c.get("/", headers={"host": "localhost:8765"}).status_code == 200


def test_every_page_carries_a_strict_content_security_policy(app_client: TestClient) -> None:
    r = app_client.get("/runs/done1")
    csp = r.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("style-src")[0]
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["referrer-policy"] == "no-referrer"
    html = app_client.get("/runs/done1/files/report.html")
    assert html.status_code == 200 and html.headers["content-security-policy"].startswith("sandbox")


def test_actions_need_the_token_in_the_request_itself(home: Path, app_client: TestClient) -> None:
    before = agent.history("wait1", context=context(home))
    for bad in ({}, {"token": "wrong"}, {"token": TOKEN[:-1]}, {"token": ""}):
        r = app_client.post("/runs/wait1/answer", data={"answer": "yes", **bad})  # the cookie alone never acts
        assert r.status_code == 403, bad
    assert app_client.post("/runs/wait1/answer", data={"answer": "yes"}, headers={"x-perfscout-token": "no"}
                           ).status_code == 403
    assert app_client.get("/runs/wait1/answer").status_code == 405  # no GET with a side effect
    assert app_client.request("PUT", "/runs/wait1/answer").status_code == 405
    assert len(agent.history("wait1", context=context(home))) == len(before)  # nothing moved


def test_read_only_refuses_every_action_and_shows_no_form(home: Path) -> None:
    c = client(context(home), read_only=True)
    page = c.get("/runs/wait1")
    assert page.status_code == 200 and "<form" not in page.text and "read-only" in page.text
    for action in ("answer", "resume", "fork"):
        assert c.post(f"/runs/wait1/{action}", data=form(answer="yes")).status_code == 403
    cid = re.search(r"checkpoints/([0-9a-f-]{36})", page.text).group(1)
    assert "<form" not in c.get(f"/runs/wait1/checkpoints/{cid}").text


# ---- the pages ----------------------------------------------------------------------


def test_the_timeline_shows_every_node_call_rule_and_the_answer(home: Path, app_client: TestClient) -> None:
    page = app_client.get("/runs/done1")
    assert page.status_code == 200
    nodes = re.findall(r'<span class="node">(\w+)</span>', page.text)
    assert nodes == ["snapshot", "understand", "plan", "act", "observe", "reflect", "report"]
    with open_store(context(home)) as st:  # the page's visits are the store's checkpoints, in order
        sql = [c.node for c in st.checkpoints("done1")]
        assert sql == [c.node for c in st.checkpoints_from_history("done1")]
    assert sql[1:-1] == nodes
    assert "evaluate_codec" in page.text and ">synthetic:grf:32,32<" in page.text  # the call's arguments, a record
    assert re.search(r'class="badge k-result">result</span> <span class="dur">[\d.]+ m?s<', page.text)  # outcome, duration
    assert 'id="task-t01-sz3-cpu-abs-1e-3"' in page.text
    assert "At ABS 1e-3 on grf:32x32, sz3 reaches ratio" in page.text  # report.md's Answer line (the record's name)
    # the run wrote its claims (graph/claims_*): each is shown, linked to the record it rests on
    claims = json.loads((home / "runs" / "done1" / "claims.json").read_text(encoding="utf-8"))["claims"]
    assert claims and all(f'id="claim-{c["id"]}"' in page.text for c in claims)
    assert "has no claims.json" not in page.text and "#task-t01-sz3-cpu-abs-1e-3" in page.text
    assert page.text.count("state it wrote") == len(nodes)
    assert "&#34;planner&#34;: &#34;deterministic&#34;" in page.text  # the plan node's write, inline, escaped


def test_claims_link_to_the_records_they_rest_on(home: Path, app_client: TestClient) -> None:
    run_dir = home / "runs" / "done1"
    own = (run_dir / "claims.json").read_bytes()  # the run's own, put back after
    doc = {"language": "en", "claims": [
        {"id": "c1", "kind": "single", "subjects": ["sz3"], "figure": "ratio", "values": {"sz3": 2.4}, "spread": {},
         "verdict": None, "records": ["t01-sz3-cpu-abs-1e-3"], "text": "sz3 reaches ratio 2.4 <b>here</b>."},
        {"id": "c2", "kind": "target", "subjects": ["sz3"], "figure": "max_abs_err", "values": {}, "spread": {},
         "verdict": "held", "records": ["t01-sz3-cpu-abs-1e-3", "t99-missing"], "text": "The bound held."}]}
    (run_dir / "claims.json").write_text(json.dumps(doc), encoding="utf-8")
    try:
        page = app_client.get("/runs/done1").text
        assert 'id="claim-c1"' in page and 'id="claim-c2"' in page
        assert "sz3 reaches ratio 2.4 &lt;b&gt;here&lt;/b&gt;." in page
        claim = page[page.index('id="claim-c1"'):page.index('id="claim-c2"')]
        assert '?from=1#task-t01-sz3-cpu-abs-1e-3"' in claim and "2.456" in claim  # the record's ratio beside it
        assert 'class="verdict v-held">held<' in page and "has no claims.json" not in page
        (run_dir / "claims.json").write_text("{broken", encoding="utf-8")
        page = app_client.get("/runs/done1").text
        assert "claims.json could not be read" in page and "sz3 reaches ratio" in page  # falls back to report.md
        (run_dir / "claims.json").unlink()
        page = app_client.get("/runs/done1").text
        assert "has no claims.json" in page and "sz3 reaches ratio" in page  # report.md's Answer lines
    finally:
        (run_dir / "claims.json").write_bytes(own)


def test_a_checkpoint_shows_the_state_there_and_steps(app_client: TestClient) -> None:
    page = app_client.get("/runs/done1").text
    befores = re.findall(r'class="step-before" href="/runs/done1/checkpoints/([0-9a-f-]+)"', page)
    plan_cp = befores[2]  # the state before plan ran
    cp = app_client.get(f"/runs/done1/checkpoints/{plan_cp}")
    assert cp.status_code == 200
    assert '<b id="next">plan</b>' in cp.text and 'id="slot-intent"' in cp.text and "&#34;bounds&#34;: [" in cp.text
    assert 'id="prev"' in cp.text and 'id="following"' in cp.text and 'id="fork-form"' in cp.text
    assert app_client.get("/runs/done1/checkpoints/not-a-checkpoint").status_code == 404
    frag = app_client.get(f"/runs/done1/writes/{plan_cp}")
    assert frag.status_code == 200 and "plan" in frag.text and "queue" in frag.text


def test_progress_api(app_client: TestClient) -> None:
    doc = app_client.get("/api/runs/done1/progress").json()
    assert doc["status"] == "done" and doc["done"] == 1 and doc["todo"] == 0 and doc["next"] == []
    wait = app_client.get("/api/runs/wait1/progress").json()
    assert wait["status"] == "interrupted" and "4,096 bytes" in wait["question"] and wait["next"] == ["clarify"]
    assert app_client.get("/api/runs/nope/progress").status_code == 404
    assert {r["id"] for r in app_client.get("/api/runs").json()} >= {"done1", "wait1", "evil1"}


def test_the_rows_say_what_the_agent_says(home: Path) -> None:
    assert_rows_agree_with_the_agent(context(home))


# ---- acting -------------------------------------------------------------------------


def test_answering_in_the_page_finishes_the_run(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    out = agent.run(f"evaluate zfp at abs 1e-3 on {raw_file(tmp_path)}", thread_id="ask1", context=ctx)
    assert out.status == "interrupted"
    c = client(ctx)
    assert c.post("/runs/ask1/answer", data=form(answer="   ")).status_code == 400  # empty: said, not sent
    # a broken JSON object is refused as `perfscout resume --answer` refuses it (agent.parse_answer)
    bad = c.post("/runs/ask1/answer", data=form(answer='{"shape": [512,'))
    assert bad.status_code == 400 and "not valid JSON" in bad.text
    r = c.post("/runs/ask1/answer", data=form(answer="yes"), follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/runs/ask1"
    job = c.app.state.viewer.jobs.wait("ask1", timeout=300)
    assert job.state == "finished" and job.outcome == "done", job.error
    values = agent.history("ask1", context=ctx)[0].values
    assert values["answers"][0]["answer"] == "yes" and values["status"] == "done"
    page = c.get("/runs/ask1").text
    assert "| zfp |" in (tmp_path / "runs" / "ask1" / "report.md").read_text()
    assert "answered: <b>&#34;yes&#34;</b>" in page
    assert c.post("/runs/ask1/answer", data=form(answer="yes")).status_code == 400  # nothing to answer now
    assert_rows_agree_with_the_agent(ctx)


def test_resume_continues_an_interrupted_run(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    for node, _ in agent.stream("evaluate sz3 at abs 1e-2 on synthetic:grf:16,16", thread_id="cut1", context=ctx):
        if node == "plan":
            break  # the process "dies" after planning: the tool call never ran
    assert_rows_agree_with_the_agent(ctx)  # an incomplete run
    c = client(ctx)
    page = c.get("/runs/cut1").text
    assert 'id="resume-form"' in page and c.get("/api/runs/cut1/progress").json()["status"] == "incomplete"
    assert c.post("/runs/cut1/resume", data=form(), follow_redirects=False).status_code == 303
    job = c.app.state.viewer.jobs.wait("cut1", timeout=300)
    assert job.state == "finished" and job.outcome == "done", job.error
    assert c.get("/api/runs/cut1/progress").json()["status"] == "done"
    assert c.post("/runs/cut1/resume", data=form()).status_code == 400  # finished: nothing to resume


def test_fork_with_another_bound_runs_a_new_thread_and_leaves_the_old_one(home: Path, tmp_path: Path) -> None:
    ctx = context(tmp_path)
    assert agent.run("evaluate sz3 at abs 1e-3 on synthetic:grf:32,32", thread_id="base1", context=ctx).status == "done"
    c = client(ctx)
    report_before = (tmp_path / "runs" / "base1" / "report.md").read_text()
    n_before = len(agent.history("base1", context=ctx))
    page = c.get("/runs/base1").text
    plan_cp = re.findall(r'class="step-before" href="/runs/base1/checkpoints/([0-9a-f-]+)"', page)[2]
    intent = agent.history("base1", context=ctx)[0].values["intent"]
    changed = {**intent, "bounds": [1e-4]}
    assert c.post("/runs/base1/fork", data=form(checkpoint_id=plan_cp, slot="intent", value="{not json")
                  ).status_code == 400
    assert c.post("/runs/base1/fork", data=form(checkpoint_id=plan_cp, slot="messages", value="[]")).status_code == 400
    assert c.post("/runs/base1/fork", data=form(checkpoint_id=plan_cp, slot="intent",
                                               value=json.dumps({**intent, "bounds": "x"}))).status_code == 400
    r = c.post("/runs/base1/fork", data=form(checkpoint_id=plan_cp, slot="intent", value=json.dumps(changed),
                                             new_thread="base1-1e-4"), follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/runs/base1-1e-4"
    job = c.app.state.viewer.jobs.wait("base1-1e-4", timeout=300)
    assert job.state == "finished" and job.outcome == "done", job.error
    new = agent.history("base1-1e-4", context=ctx)[0].values
    assert new["run_dir"] == str((tmp_path / "runs" / "base1-1e-4").resolve())
    assert [o["args"]["bound"] for o in new["observations"]] == [1e-4]
    assert (tmp_path / "runs" / "base1-1e-4" / "report.md").is_file()
    assert json.loads((tmp_path / "runs" / "base1-1e-4" / "fork.json").read_text())["from_thread"] == "base1"
    assert (tmp_path / "runs" / "base1" / "report.md").read_text() == report_before  # the old run is untouched
    assert len(agent.history("base1", context=ctx)) == n_before
    listing = c.get("/").text
    assert "fork of" in listing and c.get("/runs/base1-1e-4").status_code == 200
    # a taken thread name is refused, not overwritten
    assert c.post("/runs/base1/fork", data=form(checkpoint_id=plan_cp, slot="intent", value=json.dumps(changed),
                                               new_thread="base1-1e-4")).status_code == 400


def test_fork_mid_run_carries_the_results_it_holds(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    assert agent.run("evaluate sz3 at abs 1e-3 on synthetic:grf:16,16", thread_id="mid1", context=ctx).status == "done"
    c = client(ctx)
    page = c.get("/runs/mid1").text
    befores = re.findall(r'class="step-before" href="/runs/mid1/checkpoints/([0-9a-f-]+)"', page)
    reflect_cp = befores[5]  # snapshot, understand, plan, act, observe, [reflect]
    assert '<b id="next">reflect</b>' in c.get(f"/runs/mid1/checkpoints/{reflect_cp}").text
    extra = [{"key": "t02-zfp-cpu-abs-1e-3", "tool": "evaluate_codec", "purpose": "zfp too",
              "args": {"dataset": "synthetic:grf:16,16", "codec": "zfp", "mode": "abs", "bound": 1e-3,
                       "device": "cpu", "repeats": 1}}]
    r = c.post("/runs/mid1/fork", data=form(checkpoint_id=reflect_cp, slot="queue", value=json.dumps(extra),
                                            new_thread="mid1-zfp"), follow_redirects=False)
    assert r.status_code == 303
    job = c.app.state.viewer.jobs.wait("mid1-zfp", timeout=300)
    assert job.state == "finished" and job.outcome == "done", job.error
    report = (tmp_path / "runs" / "mid1-zfp" / "report.md").read_text()
    assert "| sz3 |" in report and "| zfp |" in report  # the carried sz3 result and the new zfp one
    assert len(list((tmp_path / "runs" / "mid1-zfp" / "results").glob("*.json"))) == 2
    assert_rows_agree_with_the_agent(ctx)  # a fork's thread starts with an update checkpoint


# ---- what is never served -----------------------------------------------------------


@pytest.mark.parametrize("url", [
    "/runs/../checkpoints.sqlite", "/runs/%2e%2e/files/checkpoints.sqlite", "/runs/done1/files/..%2f..%2fcheckpoints.sqlite",
    "/runs/done1/files/%2e%2e/%2e%2e/checkpoints.sqlite", "/runs/done1/files//etc/passwd", "/runs/done1/files/.hidden",
    "/runs/done1/files/raw", "/runs/.done1", "/runs/done1%00/files/report.md", "/sweep?dir=..", "/sweep?dir=/etc",
    "/sweep/file?dir=done1&name=../../checkpoints.sqlite", "/sweep/file?dir=../..&name=etc/passwd",
    "/runs/done1/files/leak.txt", "/runs/outside/files/secret.txt",
])
def test_traversal_through_ids_and_names_is_refused(home: Path, app_client: TestClient, url: str) -> None:
    secret = home.parent / "secret.txt"
    secret.write_text("SECRET")
    leak = home / "runs" / "done1" / "leak.txt"
    if not leak.is_symlink():
        leak.symlink_to(secret)
    if not (home / "runs" / "outside").is_symlink():
        (home / "runs" / "outside").symlink_to(home.parent)
    r = app_client.get(url)
    assert r.status_code in (400, 404), (url, r.status_code)
    assert "SECRET" not in r.text and "SQLite format" not in r.text


def test_run_files_are_served_with_safe_types(app_client: TestClient) -> None:
    md = app_client.get("/runs/done1/files/report.md")
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/plain")
    raw = app_client.get("/runs/done1/files/raw/t01-sz3-cpu-abs-1e-3.a1.json")
    assert raw.status_code == 200 and raw.json()["tool"] == "evaluate_codec"


# ---- damage and hostility -----------------------------------------------------------


def test_a_damaged_checkpoint_store_gives_a_clear_page_and_is_left_alone(home: Path, tmp_path: Path) -> None:
    shutil.copytree(home / "runs", tmp_path / "runs", symlinks=True)
    store = tmp_path / "checkpoints.sqlite"
    store.write_bytes(b"this is not a database\x00" * 400)
    before = store.read_bytes()
    c = client(context(tmp_path))
    for url in ("/", "/runs/done1", "/api/runs/done1/progress"):
        r = c.get(url)
        assert r.status_code == 503, url
        assert "cannot be read" in r.text and str(store) in r.text and "Nothing was changed" in r.text
    assert "done1" in c.get("/").text  # the run directories are still listed
    assert c.get("/runs/done1/files/report.md").status_code == 200  # and their files served
    assert c.post("/runs/wait1/answer", data=form(answer="yes")).status_code == 503
    assert store.read_bytes() == before


def test_an_empty_home_says_how_to_start(tmp_path: Path) -> None:
    c = client(context(tmp_path / "new"))
    r = c.get("/")
    assert r.status_code == 200 and "No runs yet" in r.text
    assert not (tmp_path / "new" / "checkpoints.sqlite").exists()  # viewing creates nothing


def test_hostile_request_text_is_rendered_inert(app_client: TestClient) -> None:
    for url in ("/", "/runs/evil1"):
        text = app_client.get(url).text
        assert "<script>alert" not in text and "<img src=x" not in text, url
    api = app_client.get("/api/runs")  # data, not a page: JSON that no browser renders as HTML
    assert api.headers["content-type"] == "application/json" and api.headers["x-content-type-options"] == "nosniff"
    page = app_client.get("/runs/evil1").text
    assert "&lt;script&gt;alert(&#34;pwn&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in page
    assert len(re.findall(r"<script\b", page)) == 1  # the viewer's own script tag, nothing else


def test_hostile_dataset_names_in_a_sweep_are_rendered_inert(home: Path, tmp_path: Path) -> None:
    from perfscout.api_sweep import report, sweep

    data = tmp_path / "in"
    data.mkdir()
    name = "<img src=x onerror=alert(3)>.f32"
    np.linspace(0, 1, 256, dtype="<f4").tofile(data / name)
    spec = {"name": "evil<script>alert(4)</script>", "repeats": 1, "jobs": 1, "codecs": ["zfp"], "modes": ["abs"],
            "bounds": [1e-2], "datasets": [{"path": str(data / name), "shape": [16, 16], "dtype": "f32"}]}
    out = tmp_path / "runs" / "evilsweep"
    sweep(spec, out=out, progress=False)
    report(out)
    c = client(context(tmp_path))
    listing = c.get("/").text
    assert "/sweep?dir=evilsweep" in listing
    page = c.get("/sweep?dir=evilsweep").text
    assert "<img src=x" not in page and "<script>alert" not in page
    assert "&lt;img src=x onerror=alert(3)&gt;" in page or "&lt;script&gt;alert(4)" in page
    assert len(re.findall(r"<script\b", page)) == 1
    plots = re.findall(r'<img src="(/sweep/file\?[^"]+)"', page)
    assert plots and all(c.get(p.replace("&amp;", "&")).headers["content-type"] == "image/png" for p in plots)


# ---- the command ---------------------------------------------------------------------


def test_perfscout_serve_binds_to_loopback_and_prints_the_token(home: Path) -> None:
    import os
    import urllib.request

    env = {**os.environ, "PERFSCOUT_CHECKPOINT_URL": f"sqlite:///{home}/checkpoints.sqlite"}
    proc = subprocess.Popen([sys.executable, "-m", "perfscout", "serve", "--home", str(home), "--port", "0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
                            cwd=Path(__file__).resolve().parents[2])
    try:
        url = None
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line and proc.poll() is not None:
                break
            m = re.search(r"open (http://127\.0\.0\.1:(\d+)/\?token=\S+)", line)
            url = m.group(1) if m else None
        assert url, "no address printed"
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        for _ in range(100):
            try:
                body = opener.open(url, timeout=10).read().decode()
                break
            except OSError:
                time.sleep(0.1)
        assert 'data-run="done1"' in body
        port = int(re.search(r":(\d+)/", url).group(1))
        import socket

        ip = socket.gethostbyname(socket.gethostname())
        if not ip.startswith("127."):  # not reachable on the machine's other addresses
            with pytest.raises(OSError):
                socket.create_connection((ip, port), timeout=2).close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_perfscout_serve_says_which_extra_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from perfscout.cli import app

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn -> ImportError
    res = CliRunner().invoke(app, ["serve", "--port", "0"])
    assert res.exit_code == 2 and "perfscout[viewer]" in res.output.replace("\n", "")



def test_a_long_timeline_opens_page_by_page(monkeypatch: pytest.MonkeyPatch, app_client: TestClient) -> None:
    import perfscout.viewer.app as viewer_app

    monkeypatch.setattr(viewer_app, "PAGE_VISITS", 3)  # the 7 visits of done1 on pages of 3
    first = app_client.get("/runs/done1").text
    assert re.findall(r'<span class="node">(\w+)</span>', first) == ["snapshot", "understand", "plan"]
    assert 'href="/runs/done1?from=4#timeline">4–6</a>' in first and "<b>1–3</b>" in first
    second = app_client.get("/runs/done1?from=5").text  # any visit number: its page
    assert re.findall(r'<span class="node">(\w+)</span>', second) == ["act", "observe", "reflect"]
    assert '<ol class="visits" start="4">' in second and 'id="task-t01-sz3-cpu-abs-1e-3"' in second
    assert re.findall(r'<span class="node">(\w+)</span>', app_client.get("/runs/done1?from=99").text) == ["report"]
    assert app_client.get("/runs/done1?from=x").status_code == 200


def test_routing_bookkeeping_is_not_shown_as_state(app_client: TestClient) -> None:
    page = app_client.get("/runs/done1").text
    assert "branch:to" not in page
    cid = re.findall(r'class="step-before" href="/runs/done1/checkpoints/([0-9a-f-]+)"', page)[0]
    assert "branch:to" not in app_client.get(f"/runs/done1/writes/{cid}").text
