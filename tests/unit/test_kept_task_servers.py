"""The task servers kept between an agent run's calls: one per run directory, never taken
from under another run's thread (agent threads in one process each keep their own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfscout.sweep import runner


class _Server:
    def __init__(self) -> None:
        self.closed = False
        self.alive = True

    def close(self) -> None:
        self.closed = True
        self.alive = False


@pytest.fixture(autouse=True)
def _no_kept_servers():
    runner.close_kept_servers()
    yield
    runner.close_kept_servers()


def test_each_run_directory_keeps_its_own_server(tmp_path: Path) -> None:
    a, b = _Server(), _Server()
    runner._keep_server(tmp_path / "t1", a)
    runner._keep_server(tmp_path / "t2", b)  # another thread's run ends its call
    assert runner._take_kept_server(tmp_path / "t1") is a and not a.closed
    assert runner._take_kept_server(tmp_path / "t2") is b and not b.closed
    assert runner._take_kept_server(tmp_path / "t1") is None  # taken: no longer kept


def test_the_oldest_kept_server_goes_beyond_the_cap(tmp_path: Path) -> None:
    servers = [_Server() for _ in range(runner.MAX_KEPT_SERVERS + 2)]
    for i, s in enumerate(servers):
        runner._keep_server(tmp_path / f"t{i}", s)
    assert [s.closed for s in servers] == [True, True] + [False] * runner.MAX_KEPT_SERVERS
    assert runner._take_kept_server(tmp_path / "t0") is None
    again = _Server()
    runner._keep_server(tmp_path / "t2", again)  # the same run keeps a new one: the old one goes
    assert servers[2].closed and runner._take_kept_server(tmp_path / "t2") is again


def test_a_dead_kept_server_is_not_handed_out(tmp_path: Path) -> None:
    s = _Server()
    runner._keep_server(tmp_path / "t1", s)
    s.alive = False
    assert runner._take_kept_server(tmp_path / "t1") is None and s.closed
