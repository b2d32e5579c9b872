"""Cheap sweep tasks: CPU tasks forked from one preloaded task server, still contained.

Real sweeps with real codecs (pysz, zfpy) and plug-in codecs that crash the task or kill
the server under it; the attempt log says which process ran each attempt.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest

from perfscout.api_sweep import sweep
from perfscout.sweep.forkserver import ForkServer, ForkServerError
from perfscout.tools.results_store import ResultStore

ROOT = Path(__file__).resolve().parents[2]

KILLER = '''\
"""A codec that SIGKILLs the process that forked it (the task server), then waits."""
import os, signal, time
import numpy as np
from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.registry import register_codec


class ServerKiller(Codec):
    codec_id = "server-killer"
    family = "fake"
    device = "cpu"
    native_modes = ("abs",)

    @classmethod
    def version(cls):
        return "fake 1"

    def compress(self, array):
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)  # killed with its server (PR_SET_PDEATHSIG) long before this ends

    def decompress(self, compressed):
        raise AssertionError("never reached")


register_codec("server-killer", f"{__name__}:ServerKiller")
'''


def _attempts(run_dir: Path) -> pd.DataFrame:
    with ResultStore(run_dir / "results.sqlite") as store:
        return store.attempts()


def _server_pids(att: pd.DataFrame) -> list[int]:
    return [json.loads(d)["server_pid"] for d in att.loc[att["worker"] == "forkserver", "detail"]]


def test_cpu_tasks_fork_from_one_server_and_a_crash_loses_only_its_task(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: fs\nrepeats: 1\ntimeout_s: 60\njobs: 2\nplugins: [tests.fakes.crashing_codec]\n"
                    "datasets: [{synthetic: 'grf:8,16,16'}]\n"
                    "codecs: [sz3, zfp, {id: fake-crash, options: {behaviour: segfault}}]\n"
                    "modes: [abs]\nbounds: [1.0e-1, 1.0e-2, 1.0e-3]\n")
    df = sweep(spec, out=tmp_path / "run", progress=False, allow_plugins=True)
    assert len(df) == 9
    crashed = df[df["codec"] == "fake-crash"]
    assert (crashed["status"] == "codec_crashed").all() and crashed["error"].str.contains("SIGSEGV").all()
    real = df[df["codec"] != "fake-crash"]
    assert (real["status"] == "ok").all() and real["bound_ok"].all()
    att = _attempts(tmp_path / "run")
    assert (att["worker"] == "forkserver").all(), att[["worker", "detail"]]
    # one server for the whole session, and it outlived three segfaulting tasks
    assert len(set(_server_pids(att))) == 1
    child_pids = [json.loads(d)["pid"] for d in att["detail"]]
    assert len(set(child_pids)) == len(att)  # one fresh process per task
    session = json.loads(ResultStore(tmp_path / "run" / "results.sqlite").get_meta("session_1"))
    assert session["task_start"] == "fork"


def test_fork_and_spawn_give_the_same_measured_results(tmp_path: Path) -> None:
    spec = {"name": "same", "repeats": 1, "jobs": 2, "datasets": [{"synthetic": "smooth:16,32,32"}],
            "codecs": ["sz3", "zfp"], "modes": ["abs"], "bounds": [1e-2, 1e-4]}
    forked = sweep(spec, out=tmp_path / "fork", progress=False)
    spawned = sweep({**spec, "task_start": "spawn"}, out=tmp_path / "spawn", progress=False)
    assert (_attempts(tmp_path / "spawn")["worker"] == "local").all()
    cols = ["task_key", "status", "ratio", "max_abs_err", "psnr", "bound_ok"]
    pd.testing.assert_frame_equal(forked[cols].sort_values("task_key").reset_index(drop=True),
                                  spawned[cols].sort_values("task_key").reset_index(drop=True))


def test_a_dead_server_costs_its_running_task_and_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "killer.py").write_text(KILLER)
    spec = tmp_path / "k.yaml"
    spec.write_text("name: k\nrepeats: 1\ntimeout_s: 60\njobs: 1\nplugins: [killer.py]\n"
                    "datasets: [{synthetic: 'grf:8,8'}]\ncodecs: [sz3, server-killer, zfp]\n"
                    "modes: [abs]\nbounds: [1.0e-2]\n")
    t0 = time.monotonic()
    df = sweep(spec, out=tmp_path / "run", progress=False, allow_plugins=True)
    assert time.monotonic() - t0 < 50  # the killed task did not sit out its 60 s sleep
    by = df.set_index("codec")
    assert by.loc["server-killer", "status"] == "codec_crashed"
    assert "task server" in by.loc["server-killer", "error"] and "died" in by.loc["server-killer", "error"]
    assert by.loc["sz3", "status"] == "ok" and by.loc["zfp", "status"] == "ok"
    att = _attempts(tmp_path / "run")
    assert (att["worker"] == "forkserver").all()
    assert len(set(_server_pids(att))) == 2  # the tasks after it ran from a new server


def test_a_server_that_cannot_start_is_a_clear_error_and_the_sweep_spawns_instead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # no standard library where the interpreter looks: it cannot even start
    broken = {"PYTHONHOME": str(tmp_path / "no-such-python-home"), "PYTHONPATH": ""}
    with pytest.raises(ForkServerError, match="did not start"):
        ForkServer(dict(os.environ, **broken))
    import perfscout.sweep.runner as runner

    monkeypatch.setattr(runner, "ForkServer", lambda env, log_path=None, **kw: ForkServer({**env, **broken}, log_path, **kw))
    df = sweep({"name": "fallback", "repeats": 1, "datasets": [{"synthetic": "grf:8,8"}], "codecs": ["zfp"],
                "bounds": [1e-2, 1e-3]}, out=tmp_path / "run", progress=False)
    assert (df["status"] == "ok").all() and len(df) == 2
    assert (_attempts(tmp_path / "run")["worker"] == "local").all()  # each task in a fresh interpreter


def test_the_server_goes_when_the_driver_does(tmp_path: Path) -> None:
    server = ForkServer(dict(os.environ, PYTHONPATH=str(ROOT)))
    assert server.alive and "perfscout.tools.evaluate" in server.ready["preloaded"]
    pid = server.pid
    server.close()
    assert not server.alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_the_memory_limits_are_on_what_a_forked_task_adds(tmp_path: Path) -> None:
    # 64 MiB is less than what a forked task shares with the task server (numpy, pandas, h5py,
    # the codecs, imported once; counted in the child's RSS, 70-80 MiB here): a forked task
    # still runs in it, because the address-space limit and the resident-memory watch both
    # count what the task adds to the server's pages (repeats 5: long enough to be watched)
    spec = {"name": "small", "repeats": 5, "memory_limit_mb": 64, "datasets": [{"synthetic": "grf:32,64,64"}],
            "codecs": ["sz3", "zfp"], "bounds": [1e-2]}
    df = sweep(spec, out=tmp_path / "run", progress=False)
    assert (df["status"] == "ok").all(), df[["codec", "status", "error"]]
    assert (_attempts(tmp_path / "run")["worker"] == "forkserver").all()
