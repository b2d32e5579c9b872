"""The agent runs a sweep end to end: run_sweep through the graph, real child processes,
the sweep's SQLite store, its report, and the agent report that links to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfscout import agent
from perfscout.graph.context import Context
from perfscout.tools.results_store import ResultStore

# One tiny field, two codecs, two bounds, one repeat: four tasks. The fake codec aborts
# (SIGABRT, a real crashed child) below 1e-2, so one task fails and must be reported.
TINY = """\
name: tiny
repeats: 1
timeout_s: 60
jobs: 2
plugins: [tests.fakes.crashing_codec]
datasets:
  - synthetic: "grf:16,16"
codecs:
  - sz3
  - {id: fake-crash, options: {behaviour: abort, crash_below: 1.0e-2}}
modes: [abs]
bounds: [1.0e-1, 1.0e-3]
"""


def _ctx(home: Path, allow_plugins: bool = True) -> Context:
    # TINY's fake codec is a plugin: this test trusts it; the default refuses it (below)
    return Context(home=str(home), planner="deterministic", noise_threshold=1e9, allow_plugins=allow_plugins)


def test_a_spec_with_plugins_is_refused_unless_allowed(workdir: Path, perfscout_home: Path):
    out = agent.run("sweep tiny.yaml", thread_id="sw0", context=_ctx(perfscout_home, allow_plugins=False))
    obs = out.values["observations"][0]
    assert obs["kind"] == "error" and "plugins" in obs["error"] and "allow-plugins" in obs["error"]


@pytest.fixture()
def workdir(tmp_path: Path, perfscout_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's working directory: the spec lives here (run_sweep accepts paths inside it)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY)
    return tmp_path


def _attempts(sweep_dir: Path) -> int:
    with ResultStore(sweep_dir / "results.sqlite") as store:
        return len(store.attempts())


def test_sweep_intent_runs_the_sweep_and_the_report_names_its_results(workdir: Path, perfscout_home: Path):
    out = agent.run("sweep tiny.yaml", thread_id="sw1", context=_ctx(perfscout_home))
    assert out.status == "done" and out.planner == "deterministic"
    run_dir = Path(out.run_dir)
    plan = json.loads((run_dir / "plan.json").read_text())
    assert [(t["tool"], t["args"]) for t in plan["tasks"]] == [("run_sweep", {"spec": "tiny.yaml"})]

    # the sweep lives inside the agent run, named after its task (a resume finds it again)
    sweep_dir = run_dir / "sweeps" / plan["tasks"][0]["key"]
    with ResultStore(sweep_dir / "results.sqlite") as store:
        df = store.results()
    assert len(df) == 4
    by = {(r.codec, r.bound): r for r in df.itertuples()}
    assert by[("sz3", 1e-1)].status == "ok" and by[("sz3", 1e-3)].status == "ok"
    assert by[("fake-crash", 1e-1)].status == "ok"
    crashed = by[("fake-crash", 1e-3)]
    assert crashed.status == "codec_crashed" and "SIGABRT" in crashed.error
    assert (sweep_dir / "report.md").is_file() and (sweep_dir / "report.html").is_file()

    report = out.report
    assert "## Sweeps" in report and "sweep `tiny`" in report
    assert "## Other tool results" not in report  # the sweep has its own section, once
    assert "4 task(s); by status: codec_crashed: 1, ok: 3" in report
    rel = f"sweeps/{plan['tasks'][0]['key']}"
    assert f"[report.md]({rel}/report.md)" in report and f"[report.html]({rel}/report.html)" in report
    # the crash is listed with its task key and reason, not hidden
    assert "Failed tasks: 1:" in report
    crash_line = next(ln for ln in report.splitlines() if crashed.task_key in ln and "codec_crashed" in ln)
    assert "SIGABRT" in crash_line
    assert "Bound violated: 0." in report
    # the best-ratio table quotes the stored figure of the best held row per codec
    held = df[df["bound_ok"].fillna(False).astype(bool)]
    best_sz3 = held[held.codec == "sz3"].sort_values("ratio").iloc[-1]
    assert f"| sz3@cpu | abs | {best_sz3.bound:.4g} | {best_sz3.ratio:.4g} |" in report
    # reflect noted the crash too
    assert any(n["kind"] == "codec_crashed" and "1 task(s)" in n["message"] for n in out.values["notes"])

    doc = json.loads((run_dir / "results.json").read_text())
    assert doc["sweeps"][0]["status_counts"] == {"codec_crashed": 1, "ok": 3}
    assert doc["sweeps"][0]["run_dir"] == str(sweep_dir)

    # run the same sweep again into that directory: resume semantics, nothing is repeated
    before = _attempts(sweep_dir)
    again = agent.run({"sweep": {"spec": "tiny.yaml", "out": str(sweep_dir)}}, thread_id="sw2",
                      context=_ctx(perfscout_home))
    assert again.status == "done"
    assert _attempts(sweep_dir) == before == 4
    assert "4 task(s); by status: codec_crashed: 1, ok: 3" in again.report


def test_a_sweep_spec_given_as_the_request_runs_inline(workdir: Path, perfscout_home: Path):
    import yaml

    spec = yaml.safe_load(TINY)
    spec["codecs"] = ["sz3"]
    spec["bounds"] = [1e-2]
    out = agent.run(spec, thread_id="sw3", context=_ctx(perfscout_home))
    assert out.status == "done"
    (sweep_dir,) = (Path(out.run_dir) / "sweeps").iterdir()
    with ResultStore(sweep_dir / "results.sqlite") as store:
        df = store.results()
    assert list(df.status) == ["ok"] and df.bound_ok.iloc[0]
    assert "1 task(s); by status: ok: 1" in out.report and "Failed tasks: 0." in out.report


def test_a_sweep_spec_file_finds_its_data_next_to_it_not_in_the_cwd(workdir: Path, perfscout_home: Path):
    import numpy as np

    folder = workdir / "campaign"
    folder.mkdir()
    np.linspace(0, 1, 256, dtype=np.float32).tofile(folder / "field.f32")
    (folder / "raw.yaml").write_text("name: raw\nrepeats: 1\ndatasets: [{path: field.f32, shape: [16, 16]}]\n"
                                     "codecs: [sz3]\nmodes: [abs]\nbounds: [1.0e-2]\n")
    out = agent.run(folder / "raw.yaml", thread_id="sw5", context=_ctx(perfscout_home))  # cwd: workdir
    assert out.status == "done"
    # the grid ran as the agent's evaluations, each a task of the sweep engine stored in the
    # agent's run directory (no sweep of its own)
    assert not (Path(out.run_dir) / "sweeps").exists()
    with ResultStore(Path(out.run_dir) / "results.sqlite") as store:
        df = store.results()
        assert store.get_meta("kind") == "agent"
    assert list(df.status) == ["ok"] and list(df.dataset) == ["field.f32"]
    assert [r.dataset for r in out.records] == ["field.f32"]


def test_a_spec_outside_the_working_directory_is_refused_and_reported(workdir: Path, perfscout_home: Path,
                                                                      tmp_path_factory: pytest.TempPathFactory):
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "tiny.yaml"
    elsewhere.write_text(TINY)
    out = agent.run(f"sweep {elsewhere}", thread_id="sw4", context=_ctx(perfscout_home))
    assert out.status == "done"
    assert not (Path(out.run_dir) / "sweeps").exists()
    line = next(ln for ln in out.report.splitlines() if "`run_sweep`" in ln)
    assert "outside" in line and str(elsewhere) in line


def test_paths_are_confined_to_the_working_directory_and_the_run_even_through_links(workdir: Path,
                                                                                   tmp_path_factory):
    from perfscout.errors import InputError
    from perfscout.graph.tools import allowed_roots, confine

    run_dir = workdir / "home" / "runs" / "r1"
    roots = allowed_roots(str(run_dir))
    assert confine("tiny.yaml", roots, "spec") == workdir / "tiny.yaml"
    assert confine(str(run_dir / "sweeps" / "x"), roots, "out") == run_dir / "sweeps" / "x"
    outside = tmp_path_factory.mktemp("outside")
    (workdir / "link").symlink_to(outside, target_is_directory=True)
    for path in ("link/spec.yaml", "../" + outside.name + "/a.yaml", str(outside)):
        with pytest.raises(InputError, match="outside"):
            confine(path, roots, "sweep spec")


# Sixteen short tasks, one at a time: long enough that the kill lands mid-sweep.
SIXTEEN = """\
name: sixteen
repeats: 2
jobs: 1
datasets:
  - synthetic: "grf:32,128,128"
codecs: [sz3, zfp]
modes: [abs]
bounds: [3.0e-1, 1.0e-1, 3.0e-2, 1.0e-2, 3.0e-3, 1.0e-3, 3.0e-4, 1.0e-4]
"""


@pytest.mark.slow
def test_sigkill_mid_sweep_then_resume_finishes_it_without_repeating_a_task(workdir: Path, perfscout_home: Path):
    import os
    import signal
    import subprocess
    import sys
    import time

    (workdir / "sixteen.yaml").write_text(SIXTEEN)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "PERFSCOUT_HOME": str(perfscout_home)}
    code = ("from perfscout import agent; "
            "agent.run('sweep sixteen.yaml', thread_id='k1', context={'planner': 'deterministic'})")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=workdir, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    store_path = perfscout_home / "runs" / "k1" / "sweeps" / "t01-sweep-sixteen" / "results.sqlite"
    try:
        deadline = time.monotonic() + 120
        # kill as soon as the first result is committed (a state, not a time)
        while time.monotonic() < deadline and proc.poll() is None:
            if store_path.is_file():
                with ResultStore(store_path) as store:
                    if store.finished_keys():
                        break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    with ResultStore(store_path) as store:
        stored_before = store.finished_keys()
    assert 1 <= len(stored_before) < 16

    out = agent.resume("k1", context=_ctx(perfscout_home))
    assert out.status == "done"
    with ResultStore(store_path) as store:
        attempts = store.attempts()
        df = store.results()
    assert len(df) == 16 and set(df.status) == {"ok"}
    finished = attempts[attempts.finished_at.notna()]
    # every task finished exactly once; those stored before the kill were not started again
    assert finished.groupby("task_key").size().max() == 1
    assert not set(attempts[attempts.session == 2].task_key) & stored_before
    assert "16 task(s); by status: ok: 16" in out.report
