"""Hardening of sweeps (issue #12): one writer per results store, hostile specs, a full disk.

Each case is the exact situation the probe found, run for real: two CLI sweeps on one
``--out``, an alias bomb and a 5,000-deep spec handed to the CLI, a spec whose
``plugins:`` would run code, and a tmpfs that fills up under a running sweep.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from perfscout.api_sweep import sweep
from perfscout.sweep.spec import PluginsRefused, SpecError, load_spec
from perfscout.tools.results_store import ResultStore

ROOT = Path(__file__).resolve().parents[2]

#: 16 small tasks one at a time: a sweep that runs long enough to be raced.
SPEC = """\
name: race
repeats: 1
jobs: 1
datasets:
  - synthetic: "grf:16,32,32"
  - synthetic: "smooth:16,32,32"
codecs: [sz3, zfp]
modes: [abs, rel]
bounds: [1.0e-2, 1.0e-4]
"""

VOLATILE = ["run_id", "started_at", "compress_s", "decompress_s", "compress_MBps", "decompress_MBps", "h2d_s", "d2h_s"]


def start_cli(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", "from perfscout.cli import main; main()", *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = start_cli(*args)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def stored(out: Path) -> int:
    try:
        with sqlite3.connect(out / "results.sqlite", timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def wait_for(proc: subprocess.Popen, out: Path, n: int, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while stored(out) < n:
        assert proc.poll() is None, f"sweep ended early: {proc.communicate()}"
        assert time.monotonic() < deadline, "the sweep made no progress"
        time.sleep(0.05)


def stable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=VOLATILE).sort_values("task_key").reset_index(drop=True)


# ----------------------------------------------------------------------------- one writer


def test_a_second_sweep_on_a_busy_out_refuses_and_the_first_loses_nothing(tmp_path: Path) -> None:
    """The probe's case: a `--resume` started while the first sweep runs. Before the lock it
    deleted the first's in-flight result.json and a false codec_crashed was stored."""
    spec, out = tmp_path / "spec.yaml", tmp_path / "run"
    spec.write_text(SPEC)
    first = start_cli("sweep", str(spec), "--out", str(out), "--no-progress")
    wait_for(first, out, 2)
    t0 = time.monotonic()
    second = cli("sweep", str(spec), "--out", str(out), "--resume", "--no-progress", timeout=60)
    assert time.monotonic() - t0 < 30  # refused at once, not after waiting
    message = " ".join(second.stderr.split())
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert f"being written by another sweep (pid {first.pid}" in message and "--wait" in message
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    with ResultStore(out / "results.sqlite") as store:
        df, attempts = store.results(), store.attempts()
    assert len(df) == 16 and df["task_key"].is_unique and (df["status"] == "ok").all()
    assert not df["error"].fillna("").str.contains("without writing a result").any()
    assert len(attempts) == 16 and set(attempts["session"]) == {1}  # the second sweep started nothing
    for key in df["task_key"]:  # each task's stored attempt owns the canonical files
        names = sorted(p.name for p in (out / "raw" / key).iterdir())
        assert names == ["evaluation.json", "log.txt", "result.json", "run.json", "task.json"], names


def test_wait_queues_behind_the_running_sweep(tmp_path: Path) -> None:
    spec, out = tmp_path / "spec.yaml", tmp_path / "run"
    spec.write_text(SPEC)
    first = start_cli("sweep", str(spec), "--out", str(out), "--no-progress")
    wait_for(first, out, 1)
    second = start_cli("sweep", str(spec), "--out", str(out), "--resume", "--wait", "--no-progress")
    _, err1 = first.communicate(timeout=300)
    _, err2 = second.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, (err1, err2)
    assert "waiting for the sweep that holds" in " ".join(err2.split())
    assert "0 task(s) run" in err2 and "16 already done" in err2  # it ran after, and repeated nothing
    with ResultStore(out / "results.sqlite") as store:
        assert len(store.results()) == 16 and len(store.attempts()) == 16


def test_attempt_files_are_named_by_their_owner(tmp_path: Path) -> None:
    """Two attempts at one task in one directory (two owners) never touch each other's files."""
    from perfscout.sweep.child import TaskChild, child_env
    from perfscout.sweep.spec import expand

    task = expand(load_spec({"datasets": [{"synthetic": "grf:8,8"}], "codecs": ["zfp"], "bounds": [0.1],
                             "repeats": 1}))[0][0]
    meta = {"run_id": "r", "platform_id": "p"}
    a = TaskChild.start(task, tmp_path, "s1-a1", meta, child_env(task, 1))
    b = TaskChild.start(task, tmp_path, "s2-a2", meta, child_env(task, 1))
    assert a.wait() == 0 and b.wait() == 0
    ra, rb = a.outcome("r", "p"), b.outcome("r", "p")
    assert ra.status == rb.status == "ok" and ra.task_key == rb.task_key == task.task_key
    assert {p.name for p in tmp_path.iterdir()} == {
        "run.json", "task.s1-a1.json", "result.s1-a1.json", "log.s1-a1.txt", "evaluation.s1-a1.json",
        "task.s2-a2.json", "result.s2-a2.json", "log.s2-a2.txt", "evaluation.s2-a2.json"}


# ----------------------------------------------------------------------------- hostile specs

def alias_bomb() -> str:
    """A billion-laughs document of 532 bytes: 9 levels of 9 aliases, 9**9 leaves expanded."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = name
    text = "\n".join(lines) + "\ncodecs: [sz3]\ndatasets: [{synthetic: 'grf:8,8'}]\n"
    return text + "#" * (531 - len(text)) + "\n"


def test_alias_bomb_is_refused_without_growing_memory(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    assert bomb.stat().st_size == 532
    # In a fresh interpreter, so that its peak resident size is this load's alone.
    probe = ("import resource, sys\nfrom perfscout.sweep.spec import load_spec, SpecError\n"
             "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
             "try:\n    load_spec(sys.argv[1])\nexcept SpecError as e:\n    print('refused:', e)\n"
             "print('grew_kib', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)\n")
    res = subprocess.run([sys.executable, "-c", probe, str(bomb)], capture_output=True, text=True, timeout=60,
                         cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert "refused:" in res.stdout and "alias bomb" in res.stdout, res.stdout + res.stderr
    grew_kib = int(res.stdout.split("grew_kib")[1])
    assert grew_kib < 20_000, f"loading the bomb grew the process by {grew_kib} KiB"
    via_cli = cli("sweep", str(bomb), "--out", str(tmp_path / "run"), timeout=60)
    assert via_cli.returncode == 2 and "alias" in via_cli.stderr and "Traceback" not in via_cli.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("nested", [
    "datasets: " + "[" * 5000 + "]" * 5000 + "\n",                # flow style
    "datasets:\n  " + "- " * 5000 + "x\n",                        # block style
    "codecs: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n",         # mappings
])
def test_a_spec_nested_5000_deep_is_a_clear_error(tmp_path: Path, nested: str) -> None:
    spec = tmp_path / "deep.yaml"
    spec.write_text(nested)
    with pytest.raises(SpecError, match="nested more than 64 levels"):
        load_spec(spec)
    res = cli("sweep", str(spec), "--out", str(tmp_path / "run"), timeout=60)
    assert res.returncode == 2 and "nested" in res.stderr and "Traceback" not in res.stderr


PLUGIN_SPEC = """\
name: plug
repeats: 1
plugins: [evil.py]
datasets: [{synthetic: "grf:8,8"}]
codecs: [zfp]
bounds: [0.1]
"""


def _plugin_dir(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "plugin-ran"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('code from a spec ran')\n")
    (tmp_path / "plug.yaml").write_text(PLUGIN_SPEC)
    return tmp_path / "plug.yaml", marker


def test_plugins_run_only_with_allow_plugins(tmp_path: Path) -> None:
    spec, marker = _plugin_dir(tmp_path)
    with pytest.raises(PluginsRefused, match=r"plug\.yaml:3: plugins: .*evil\.py.*--allow-plugins"):
        load_spec(spec)
    with pytest.raises(PluginsRefused):
        load_spec({"plugins": ["evil.py"], "datasets": [{"synthetic": "grf:8,8"}], "codecs": ["zfp"]})
    refused = cli("sweep", str(spec), "--out", str(tmp_path / "run"))
    assert refused.returncode == 2 and "--allow-plugins" in refused.stderr and "Traceback" not in refused.stderr
    assert not marker.exists() and not (tmp_path / "run").exists()  # refused before any import
    allowed = cli("sweep", str(spec), "--out", str(tmp_path / "run"), "--allow-plugins", "--no-progress")
    assert allowed.returncode == 0, allowed.stderr
    assert marker.exists()


def test_the_agent_paths_refuse_plugins_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`perfscout run --spec` hands the spec to the planner and then to the run_sweep tool:
    planning never imports a plug-in, and the tool, by default, refuses to."""
    from perfscout.graph.planner import plan_from_sweep_spec
    from perfscout.graph.tools import run_sweep

    _, marker = _plugin_dir(tmp_path)
    monkeypatch.chdir(tmp_path)
    doc = {"name": "plug", "plugins": [str(tmp_path / "evil.py")], "datasets": [{"synthetic": "grf:8,8"}],
           "codecs": ["zfp"], "bounds": [0.1]}
    plan = plan_from_sweep_spec(doc)
    assert [t.tool for t in plan.tasks] == ["run_sweep"] and not marker.exists()
    reply = run_sweep.invoke({"spec": "plug.yaml", "out": "run"})
    assert reply.startswith("refused:") and "--allow-plugins" in reply
    reply = run_sweep.invoke({"spec_doc": doc, "out": "run2"})
    assert reply.startswith("refused:") and "--allow-plugins" in reply
    assert not marker.exists()


# ----------------------------------------------------------------------------- full disk


@pytest.fixture()
def small_disk(tmp_path: Path):
    """A 16 MiB tmpfs (needs root to mount); unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs to fill needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    # tmpfs pages come from RAM: on a machine busy with other tests a page can be refused for a
    # moment (ENOSPC at open); that is the machine, not the disk this test fills
    for _ in range(100):
        try:
            f = open(filler, "wb")
            break
        except OSError:
            time.sleep(0.1)
    else:
        pytest.fail(f"could not create {filler} on the 16 MiB tmpfs")
    with f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


@pytest.mark.slow
def test_a_full_disk_stops_the_sweep_clearly_and_loses_nothing(tmp_path: Path, small_disk: Path) -> None:
    spec, out = tmp_path / "spec.yaml", small_disk / "run"
    spec.write_text(SPEC)
    reference = sweep(spec, out=tmp_path / "ref", progress=False)
    proc = start_cli("sweep", str(spec), "--out", str(out), "--no-progress")
    wait_for(proc, out, 3)
    filler = fill(small_disk)
    _, err = proc.communicate(timeout=300)
    message = " ".join(err.split())
    assert proc.returncode == 2, err
    assert "no space left on the device" in message and "--resume" in message and "Traceback" not in err
    with ResultStore(out / "results.sqlite") as store:
        before = store.results()
    assert 3 <= len(before) < 16
    filler.unlink()
    done = cli("sweep", str(spec), "--out", str(out), "--resume", "--no-progress")
    assert done.returncode == 0, done.stderr
    with ResultStore(out / "results.sqlite") as store:
        after = store.results()
    kept = after.set_index("task_key").loc[before["task_key"]].reset_index()[list(before.columns)]
    pd.testing.assert_frame_equal(kept, before)  # every row stored before the disk filled, unchanged
    assert after["task_key"].is_unique and len(after) == 16
    pd.testing.assert_frame_equal(stable(after), stable(reference))
