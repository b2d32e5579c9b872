"""`perfscout serve` in a real browser: Debian's headless Chromium driven by Selenium.

A real uvicorn server over a home of real agent runs (deterministic planner, small synthetic
fields, a raw file that makes the run ask, a hostile request) and a small sweep. A person's
path through it: the runs list, a run, a checkpoint and the next one, answering a question
and watching the run finish, forking a run with another bound; the hostile run's pages stay
inert (no alert, no injected element). Each page is screenshotted into the test's folder,
and into ``$PERFSCOUT_VIEWER_SCREENSHOTS`` when set (how docs/viewer/ is made).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.browser

webdriver = pytest.importorskip("selenium.webdriver", reason="pip install 'perfscout[test]' (selenium)")
from selenium.common.exceptions import (  # noqa: E402
    JavascriptException,
    NoAlertPresentException,
    NoSuchElementException,
    StaleElementReferenceException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from perfscout import agent  # noqa: E402
from perfscout.graph.context import Context  # noqa: E402
from tests.servers import free_port  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
TOKEN = "browser-test-token"
HOSTILE = ('evaluate sz3 at abs 1e-3 on synthetic:grf:16,16 <script>alert("pwn")</script>'
           '<img src=x onerror=alert(2)><svg onload=alert(3)>')


def context(home: Path) -> Context:
    return Context(home=str(home), checkpoint_url=f"sqlite:///{home}/checkpoints.sqlite", planner="deterministic",
                   noise_threshold=1e9)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromium-driver are not installed (make system-deps installs them)")
    import uvicorn

    from perfscout.api_sweep import report, sweep
    from perfscout.viewer.app import create_app

    home = tmp_path_factory.mktemp("viewer-browser")
    ctx = context(home)
    assert agent.run("evaluate sz3 at abs 1e-3 on synthetic:grf:32,32", thread_id="sz3-grf", context=ctx
                     ).status == "done"
    # claims.json as the agent writes it beside report.md (the shared claim model's JSON contract)
    claims = {"language": "en", "claims": [
        {"id": "c1", "kind": "single", "subjects": ["sz3"], "figure": "ratio", "values": {"sz3": 2.456}, "spread": {},
         "verdict": None, "records": ["t01-sz3-cpu-abs-1e-3"],
         "text": "At ABS 1e-3 on synthetic:grf:32,32, sz3 reaches ratio 2.456."},
        {"id": "c2", "kind": "target", "subjects": ["sz3"], "figure": "max_abs_err", "values": {}, "spread": {},
         "verdict": "held", "records": ["t01-sz3-cpu-abs-1e-3"], "text": "The bound held on every value."}]}
    (home / "runs" / "sz3-grf" / "claims.json").write_text(json.dumps(claims), encoding="utf-8")
    raw = home / "field.raw"
    np.linspace(0, 1, 1024, dtype="<f4").tofile(raw)
    assert agent.run(f"evaluate zfp at abs 1e-3 on {raw}", thread_id="raw-file", context=ctx).status == "interrupted"
    assert agent.run(HOSTILE, thread_id="hostile", context=ctx).status in ("interrupted", "done")
    spec = {"name": "tiny", "repeats": 1, "jobs": 1, "codecs": ["sz3", "zfp"], "modes": ["abs"],
            "bounds": [1e-1, 1e-2], "datasets": [{"synthetic": "grf:8,16,16"}]}
    sweep(spec, out=home / "runs" / "tiny-sweep", progress=False)
    report(home / "runs" / "tiny-sweep")
    port = free_port()
    app = create_app(ctx, token=TOKEN, port=port)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started
    yield {"base": f"http://127.0.0.1:{port}", "home": home, "ctx": ctx}
    srv.should_exit = True
    thread.join(30)


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory: pytest.TempPathFactory):
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1400",
                 "--disable-background-networking", "--disable-component-update", "--no-first-run",
                 f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    driver.get(f"{server['base']}/?token={TOKEN}")  # the address `perfscout serve` prints
    yield driver
    driver.quit()


def shot(driver, tmp_path: Path, name: str, full: bool = True) -> Path:
    driver.execute_script("window.scrollTo(0, 0)")
    if full:  # the whole page, not just the window
        height = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 6000)")
        driver.set_window_size(1280, max(900, int(height)))
    path = tmp_path / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 1400)
    target = os.environ.get("PERFSCOUT_VIEWER_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)
    return path


def assert_inert(driver) -> None:
    try:
        text = driver.switch_to.alert.text
    except NoAlertPresentException:
        text = None
    assert text is None, f"a script ran: alert({text!r})"
    injected = driver.execute_script(
        "return [document.querySelectorAll('[onerror],[onload],[onmouseover]').length,"
        " document.querySelectorAll('script:not([type=\"application/json\"])').length,"
        " document.querySelectorAll('svg, img[src=\"x\"]').length,"
        " Array.from(document.querySelectorAll('script[type=\"application/json\"]')).map(s => s.id)]")
    # one running script, the viewer's own file; at most one data block, the fork form's slots
    assert injected[:3] == [0, 1, 0] and injected[3] in ([], ["fork-slots"]), injected


def wait_for_status(driver, status: str, timeout: float = 240) -> None:
    # the page reloads itself when the run stops: an element read during the reload is stale or gone
    WebDriverWait(driver, timeout, poll_frequency=0.5, ignored_exceptions=(
        StaleElementReferenceException, NoSuchElementException, JavascriptException)).until(
        lambda d: d.find_element(By.ID, "status").text == status)


def test_runs_list(browser, server, tmp_path: Path) -> None:
    browser.get(server["base"] + "/")
    rows = browser.find_elements(By.CSS_SELECTOR, "table#runs tbody tr")
    ids = [r.get_attribute("data-run") for r in rows]
    assert {"sz3-grf", "raw-file", "hostile"} <= set(ids)
    waiting = browser.find_element(By.CSS_SELECTOR, 'tr[data-run="raw-file"] td.question').text
    assert "4,096 bytes" in waiting
    assert browser.find_element(By.CSS_SELECTOR, "#sweeps a").text == "tiny-sweep"
    shot(browser, tmp_path, "runs")


def test_open_a_run_and_step_through_checkpoints(browser, server, tmp_path: Path) -> None:
    browser.get(server["base"] + "/")
    browser.find_element(By.LINK_TEXT, "sz3-grf").click()
    nodes = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "li.visit .node")]
    assert nodes == ["snapshot", "understand", "plan", "act", "observe", "reflect", "report"]
    call = browser.find_element(By.ID, "task-t01-sz3-cpu-abs-1e-3")
    assert "evaluate_codec" in call.text and "synthetic:grf:32,32" in call.text
    claim = browser.find_element(By.ID, "claim-c1")
    assert "2.456" in claim.find_element(By.CSS_SELECTOR, "table.records").text  # the record beside its claim
    claim.find_element(By.CSS_SELECTOR, "a.record-link").click()
    assert browser.current_url.endswith("#task-t01-sz3-cpu-abs-1e-3")
    assert browser.execute_script("return document.querySelector(':target').id") == "task-t01-sz3-cpu-abs-1e-3"
    browser.get(server["base"] + "/runs/sz3-grf")
    details = browser.find_elements(By.CSS_SELECTOR, "details.writes")[2]  # what plan wrote
    details.find_element(By.TAG_NAME, "summary").click()
    assert "deterministic" in details.text
    shot(browser, tmp_path, "run")
    browser.find_elements(By.CSS_SELECTOR, "li.visit .step-before")[2].click()  # the state before plan
    assert browser.find_element(By.ID, "next").text == "plan"
    first = browser.find_element(By.ID, "checkpoint-id").text
    assert "bounds" in browser.find_element(By.ID, "slot-intent").text
    shot(browser, tmp_path, "checkpoint")
    browser.find_element(By.ID, "following").click()
    assert browser.find_element(By.ID, "next").text == "act" and browser.find_element(By.ID, "checkpoint-id").text != first
    browser.find_element(By.ID, "prev").click()
    assert browser.find_element(By.ID, "checkpoint-id").text == first


def test_answer_a_question_and_watch_the_run_finish(browser, server, tmp_path: Path) -> None:
    browser.get(server["base"] + "/runs/raw-file")
    assert "4,096 bytes" in browser.find_element(By.CSS_SELECTOR, "#question .q").text
    shot(browser, tmp_path, "question")
    box = browser.find_element(By.ID, "answer")
    box.send_keys("yes")
    box.submit()
    wait_for_status(browser, "done")  # the page follows the run (polling) and reloads when it ends
    assert browser.find_element(By.CSS_SELECTOR, "#answer-section").text.startswith("Answer")
    assert "zfp" in browser.find_element(By.ID, "answer-section").text
    asked = browser.find_element(By.CSS_SELECTOR, "li.node-clarify .asked").text
    assert 'answered: "yes"' in asked
    shot(browser, tmp_path, "answered")


def test_fork_a_run_with_another_bound(browser, server, tmp_path: Path) -> None:
    browser.get(server["base"] + "/runs/sz3-grf")
    browser.find_elements(By.CSS_SELECTOR, "li.visit .step-before")[2].click()  # before plan
    area = browser.find_element(By.ID, "fork-value")
    intent = json.loads(area.get_attribute("value"))
    assert intent["bounds"] == [0.001]
    intent["bounds"] = [0.0001]
    browser.execute_script("arguments[0].value = arguments[1];", area, json.dumps(intent, indent=1))
    browser.find_element(By.ID, "fork-thread").send_keys("sz3-grf-1e-4")
    shot(browser, tmp_path, "fork", full=False)
    browser.find_element(By.CSS_SELECTOR, "#fork-form button").click()
    WebDriverWait(browser, 60).until(lambda d: d.current_url.endswith("/runs/sz3-grf-1e-4"))
    wait_for_status(browser, "done")
    bounds = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#timeline table.records td:nth-child(5)")]
    assert bounds and set(bounds) == {"0.0001"}
    assert "fork of" in browser.find_element(By.CSS_SELECTOR, ".meta").text
    shot(browser, tmp_path, "forked")


def test_sweep_page_shows_tasks_and_plots(browser, server, tmp_path: Path) -> None:
    browser.get(server["base"] + "/")
    browser.find_element(By.LINK_TEXT, "tiny-sweep").click()
    rows = browser.find_elements(By.CSS_SELECTOR, "#sweep-tasks tbody tr")
    assert len(rows) == 4
    imgs = browser.find_elements(By.CSS_SELECTOR, ".plots img")
    assert imgs and all(browser.execute_script("return arguments[0].naturalWidth", i) > 100 for i in imgs)
    shot(browser, tmp_path, "sweep")


def test_hostile_request_stays_inert(browser, server, tmp_path: Path) -> None:
    browser.get(server["base"] + "/")
    assert_inert(browser)
    assert '<script>alert("pwn")</script>' in browser.find_element(By.CSS_SELECTOR, 'tr[data-run="hostile"]').text
    browser.get(server["base"] + "/runs/hostile")
    assert_inert(browser)
    assert "<img src=x onerror=alert(2)>" in browser.find_element(By.ID, "request").text
    for d in browser.find_elements(By.CSS_SELECTOR, "details.writes summary"):
        d.click()
    assert_inert(browser)
    shot(browser, tmp_path, "hostile")
    browser.find_elements(By.CSS_SELECTOR, "li.visit .step-before")[-1].click()
    assert_inert(browser)


def test_a_long_runs_writes_load_when_opened(browser, server, monkeypatch: pytest.MonkeyPatch) -> None:
    import perfscout.viewer.app as viewer_app

    monkeypatch.setattr(viewer_app, "INLINE_VISITS", 0)  # as for a run of more than 300 visits
    browser.get(server["base"] + "/runs/sz3-grf")
    details = browser.find_elements(By.CSS_SELECTOR, "details.writes")[2]  # what plan wrote
    assert details.get_attribute("data-src") and "deterministic" not in details.text
    details.find_element(By.TAG_NAME, "summary").click()
    WebDriverWait(browser, 30).until(lambda d: "deterministic" in details.text)
    assert_inert(browser)
