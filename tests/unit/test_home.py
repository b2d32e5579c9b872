"""One home for runs, checkpoints and snapshots: $PERFSCOUT_HOME, else the per-user data dir."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import perfscout
from perfscout.graph.context import Context
from perfscout.home import perfscout_home, runs_dir
from perfscout.platform_profiles import PACKAGE_DIR, snapshot_dir

PACKAGE_ROOT = Path(perfscout.__file__).resolve().parent


@pytest.fixture()
def no_env_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PERFSCOUT_HOME unset; the per-user data directory redirected under tmp_path."""
    monkeypatch.delenv("PERFSCOUT_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path / "xdg"


def test_env_wins_and_tilde_expands(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "h"))
    assert perfscout_home() == tmp_path / "h"
    assert runs_dir() == tmp_path / "h" / "runs"
    monkeypatch.setenv("PERFSCOUT_HOME", "~/ps-home")
    assert perfscout_home() == Path.home() / "ps-home"


@pytest.mark.skipif(sys.platform != "linux", reason="XDG layout is the Linux rule")
def test_default_is_the_per_user_data_dir_not_the_cwd_nor_the_package(no_env_home: Path) -> None:
    home = perfscout_home()
    assert home == no_env_home / "perfscout"
    assert not home.is_relative_to(Path.cwd())  # not ./.perfscout: one home wherever perfscout runs
    assert not home.is_relative_to(PACKAGE_ROOT)


def test_snapshots_are_saved_in_the_home_never_in_the_package(no_env_home: Path) -> None:
    assert snapshot_dir() == perfscout_home() / "platform_profiles"
    assert not snapshot_dir().is_relative_to(PACKAGE_DIR)


def test_agent_context_uses_the_same_home(no_env_home: Path, monkeypatch: pytest.MonkeyPatch,
                                          tmp_path: Path) -> None:
    assert Context().home_path == perfscout_home()
    assert Context().runs_dir == runs_dir()
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "elsewhere"))
    assert Context().home_path == tmp_path / "elsewhere"
    assert Context(home=str(tmp_path / "explicit")).home_path == tmp_path / "explicit"
