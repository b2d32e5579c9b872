"""The agent checkpointed in a real PostgreSQL server (a throw-away local cluster).

Uses PERFSCOUT_TEST_PG_URL when set; otherwise initdb + pg_ctl start a cluster on a
free port in a temporary directory (as the ``postgres`` user when running as root,
since PostgreSQL refuses to run as root), and stop it afterwards.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile

import pytest

from perfscout import agent
from perfscout.graph.context import Context
from tests.servers import free_port


pytestmark = pytest.mark.postgres


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@pytest.fixture(scope="module")
def pg_url():
    if os.environ.get("PERFSCOUT_TEST_PG_URL"):
        yield os.environ["PERFSCOUT_TEST_PG_URL"]
        return
    initdb, pg_ctl = _bin("initdb"), _bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql) and no PERFSCOUT_TEST_PG_URL")
    as_user: list[str] = []
    root = tempfile.mkdtemp(prefix="perfscout-pg-")
    if os.geteuid() == 0:
        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no 'postgres' user to run the server as")
        os.chown(root, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(root, "data"), free_port()
    subprocess.run([*as_user, initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"],
                   check=True, capture_output=True, timeout=120)
    subprocess.run([*as_user, pg_ctl, "-D", data, "-w", "-t", "60", "-l", os.path.join(root, "log"),
                    "-o", f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off",
                    "start"], check=True, capture_output=True, timeout=120)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def test_postgres_checkpoints_interrupt_resume_and_list(pg_url, tmp_path):
    pytest.importorskip("langgraph.checkpoint.postgres", reason="pip install 'perfscout[postgres]'")
    ctx = Context(home=str(tmp_path / "home"), checkpoint_url=pg_url, planner="deterministic",
                  noise_threshold=1e9)
    raw = tmp_path / "f.raw"
    import numpy as np

    np.linspace(0, 1, 1024, dtype="<f4").tofile(raw)
    out = agent.run(f"evaluate zfp at abs 1e-3 on {raw}", thread_id="pg1", context=ctx)
    assert out.status == "interrupted" and set(out.question["needs"]) == {"shape", "dtype"}
    out = agent.resume("pg1", {"shape": "32,32", "dtype": "f32"}, context=ctx)
    assert out.status == "done" and "| zfp |" in out.report
    assert not (tmp_path / "home" / "checkpoints.sqlite").exists()  # nothing went to SQLite
    assert "pg1" in [r.thread_id for r in agent.list_runs(context=ctx)]
    assert len(agent.history("pg1", context=ctx)) > 5
