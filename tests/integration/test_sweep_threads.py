"""Codec threads and --jobs share the cores: a real sweep with chunked and single-stream tasks.

The scheduler never runs tasks whose threads add up to more than ``cores`` (checked from the
attempt log's start and end times), refuses a task that alone asks for more (exit 2, nothing
stored), and the report sets each chunked ratio beside the single stream's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from perfscout.api_sweep import report, sweep
from perfscout.tools.results_store import ResultStore

ROOT = Path(__file__).resolve().parents[2]

SPEC = """\
name: threads
repeats: 1
jobs: 2
cores: 2
datasets: [{synthetic: "smooth:16,32,32"}]
codecs: [sz3, {id: sz3, options: {threads: 2}}, zfp, {id: zfp, options: {threads: 2}}]
modes: [abs, rel]
bounds: [1.0e-3]
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", "from perfscout.cli import main; main()", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)


def test_threads_and_jobs_never_oversubscribe_and_the_report_compares_cr(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(SPEC)
    df = sweep(tmp_path / "t.yaml", out=tmp_path / "run", progress=False)
    assert len(df) == 8 and (df["status"] == "ok").all() and df["bound_ok"].all()
    keys = json.loads((tmp_path / "run" / "spec.resolved.json").read_text())["tasks"]
    threads = {t["task_key"]: t["options"].get("threads", 1) for t in keys}
    assert sorted(df["chunks"].tolist()) == [1] * 4 + [2] * 4
    assert all(df.set_index("task_key")["chunks"][k] == n for k, n in threads.items())

    with ResultStore(tmp_path / "run" / "results.sqlite") as store:
        att = store.attempts()
        session = json.loads(store.get_meta("session_1"))
    assert session["cores"] == 2 and session["max_codec_threads"] == 2
    assert "jobs 2 x codec threads 2 would need 4 cores" in session["note"]
    # at every attempt's start, the threads of the attempts running then fit in 2 cores
    spans = [(pd.Timestamp(a.started_at), pd.Timestamp(a.finished_at), threads[a.task_key]) for a in att.itertuples()]
    for start, _, n in spans:
        running = sum(m for s, e, m in spans if s < start < e)
        assert running + n <= 2, (start, running, n)

    html = report(tmp_path / "run")
    md = html.with_name("report.md").read_text()
    assert "Chunked streams (codec threads)" in md
    section = md.split("Chunked streams (codec threads)", 1)[1].split("\n## ", 1)[0]
    assert section.count("| sz3 ") == 2 and section.count("| zfp ") == 2  # abs and rel for each
    assert "CR 1 stream" in section and "CR chunked" in section


def test_a_task_asking_more_threads_than_cores_is_refused_and_nothing_is_stored(tmp_path: Path) -> None:
    spec = tmp_path / "big.yaml"
    spec.write_text("name: big\nrepeats: 1\ncores: 2\ndatasets: [{synthetic: 'grf:16,16'}]\n"
                    "codecs: [sz3, {id: zfp, options: {threads: 4}}]\nbounds: [1.0e-2]\n")
    res = cli("sweep", str(spec), "--out", str(tmp_path / "run"), "--no-progress")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "threads=4" in res.stderr and "2 core(s)" in res.stderr
    with ResultStore(tmp_path / "run" / "results.sqlite") as store:
        assert store.task_count() == 0  # a corrected spec runs there without --resume
    ok = cli("sweep", str(spec), "--out", str(tmp_path / "run"), "--no-progress", "--cores", "4", "--json")
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout)
    assert summary["statuses"] == {"ok": 2} and summary["scheduling"]["cores"] == 4


def test_on_a_local_dask_cluster_a_task_must_fit_its_workers_share_of_the_cores(tmp_path: Path) -> None:
    import pytest

    pytest.importorskip("distributed")
    from perfscout.errors import InputError
    from perfscout.sweep.dask_executor import DaskOptions

    spec = {"name": "dthreads", "repeats": 1, "cores": 2, "datasets": [{"synthetic": "smooth:16,32,32"}],
            "codecs": [{"id": "sz3", "options": {"threads": 2}}], "bounds": [1e-3]}
    with pytest.raises(InputError, match=r"each of the 2 LocalCluster workers has 1 of the 2 core\(s\).*--workers 1"):
        sweep(spec, out=tmp_path / "two", progress=False, dask=DaskOptions(workers=2))
    with ResultStore(tmp_path / "two" / "results.sqlite") as store:
        assert store.task_count() == 0
    df = sweep(spec, out=tmp_path / "one", progress=False, dask=DaskOptions(workers=1))
    assert df["status"].tolist() == ["ok"] and df["chunks"].tolist() == [2]
