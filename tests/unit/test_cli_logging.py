"""perfscout's logging: stdlib loggers, a rich handler on stderr, --verbose/--quiet on the CLI."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfscout.cli.logs import PACKAGE_LOGGER, configure_logging, level_for

ROOT = Path(__file__).resolve().parents[2]
NCU_CSV = ROOT / "tests" / "fixtures" / "ncu" / "h200_cupy_kernels_raw.csv"


@pytest.fixture()
def package_logger():
    """perfscout's logger as it was, restored after the test (handlers, level, propagation)."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield logger
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def test_levels_for_the_global_options():
    assert level_for() == logging.WARNING
    assert level_for(verbose=True) == logging.DEBUG
    assert level_for(quiet=True) == logging.ERROR
    assert level_for(verbose=True, quiet=True) == logging.ERROR  # asked for silence: silence


def test_configure_replaces_its_own_handler_and_keeps_others(package_logger, capsys):
    theirs = logging.StreamHandler()
    package_logger.addHandler(theirs)
    first = configure_logging(verbose=True)
    second = configure_logging(quiet=True)
    assert first not in package_logger.handlers and second in package_logger.handlers
    assert theirs in package_logger.handlers  # a handler someone else installed stays
    package_logger.removeHandler(theirs)
    configure_logging(verbose=True)
    logging.getLogger("perfscout.tools.perf_stat").debug("perf stat: %s", "[1, 2] <not supported>")
    out = capsys.readouterr()
    assert out.out == ""  # never stdout
    assert "perfscout.tools.perf_stat: perf stat: [1, 2] <not supported>" in " ".join(out.err.split())


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # wide stderr: one log record per line
    return subprocess.run([sys.executable, "-m", "perfscout", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env)


@pytest.mark.parametrize("flag", ["--verbose", None, "--quiet"])
def test_cli_diagnostics_go_to_stderr_and_json_stays_alone_on_stdout(flag):
    res = _cli(*([flag] if flag else []), "diagnose", "--ncu-csv", str(NCU_CSV), "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)  # exactly one JSON document, whatever the logging
    assert doc["kernels"]
    err = " ".join(res.stderr.split())
    said = "perfscout.analysis.diagnosis.engine: diagnosing 18 kernel launch(es)"
    if flag == "--verbose":
        assert said in err and "primary latency_bound" in err  # progress and the rules' diagnostics
    else:
        assert "perfscout.analysis" not in err


def test_cli_global_options_refuse_a_value():
    res = _cli("--verbose=2", "codecs")
    assert res.returncode == 2 and "Traceback" not in res.stderr
