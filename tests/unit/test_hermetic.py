"""The test run is hermetic (tests/conftest.py): what a person's terminal, shell or checkout
holds does not change what a test sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SESSION_HOME


def test_each_test_runs_in_its_own_folder_that_shows_only_tracked_files(tmp_path: Path) -> None:
    cwd = Path.cwd()
    assert cwd != ROOT and not cwd.is_relative_to(ROOT) and cwd != tmp_path
    assert Path("examples/sweep_quick.yaml").resolve() == ROOT / "examples" / "sweep_quick.yaml"
    assert Path("tests/fixtures/ncu").is_dir()
    # runs/ (the README tour's sweep output), .venv, build output: not tracked, not here
    assert not Path("runs").exists() and not Path(".venv").exists()
    Path("runs/mine").mkdir(parents=True)  # a relative write lands in this test's folder
    assert (cwd / "runs" / "mine").is_dir() and not (ROOT / "runs" / "mine").exists()


def test_terminal_width_locale_and_home_are_pinned() -> None:
    from perfscout.cli.common import stderr, stdout
    from perfscout.home import perfscout_home

    assert os.environ["COLUMNS"] == "200" and stdout.width == 200 and stderr.width == 200
    assert os.environ["LC_ALL"] == "C.UTF-8" and os.environ["TZ"] == "UTC"
    assert not any(n.startswith("PERFSCOUT_LLM_") for n in os.environ) and "FORCE_COLOR" not in os.environ
    assert perfscout_home() == SESSION_HOME  # never the user's own home and its runs


def _pytest(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, **env})


def test_a_narrow_terminal_a_users_settings_and_a_crash_dump_do_not_reach_the_tests() -> None:
    """A nested run, as a person would start it: a 40-column terminal, colour forced, their own
    LLM endpoint and planner set; the crash-containment tests segfault and abort a child."""
    proc = _pytest(["tests/integration/test_cli_datasets.py::test_datasets_inspect_lists_variables",
                    "tests/unit/test_isolate.py::test_a_native_crash_is_a_codec_crashed_record_and_the_caller_lives"],
                   {"COLUMNS": "40", "FORCE_COLOR": "1", "PERFSCOUT_PLANNER": "llm",
                    "PERFSCOUT_LLM_BASE_URL": "http://127.0.0.1:9/v1"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "3 passed" in out
    # the children's fault handler wrote into pytest's capture (shown only on a failure)
    assert "Fatal Python error" not in out and "Extension modules" not in out
