"""`perfscout datasets list [--json]` through typer's CliRunner and as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfscout.cli import app
from perfscout.datasets import registry as registry_module
from perfscout.datasets.registry import ENV_SDRBENCH_DIR, ENV_SHARED_DATA

runner = CliRunner()


def test_datasets_list_json(shared_data: Path) -> None:
    result = runner.invoke(app, ["datasets", "list", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # exactly one JSON document on stdout
    by_name = {d["name"]: d for d in doc["datasets"]}
    assert by_name["vorticity.512_512"]["available"] is True
    assert by_name["vorticity.512_512"]["shape"] == [512, 512]
    assert Path(by_name["vorticity.512_512"]["path"]).resolve() == (shared_data / "vorticity.512_512").resolve()
    assert by_name["nyx-temperature"]["kind"] == "remote"
    assert by_name["nyx-temperature"]["url"].endswith("SDRBENCH-EXASKY-NYX-512x512x512.tar.gz")
    assert by_name["grf"]["kind"] == "synthetic" and by_name["grf"]["available"] is True
    assert Path(doc["shared_data_dir"]).resolve() == shared_data.resolve()
    expected_keys = {"name", "kind", "shape", "dtype", "nbytes", "available", "reason",
                     "description", "path", "url"}
    assert all(set(d) == expected_keys for d in doc["datasets"])


def test_datasets_list_json_without_shared_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SHARED_DATA, str(tmp_path / "nowhere"))
    monkeypatch.delenv(ENV_SDRBENCH_DIR, raising=False)
    result = runner.invoke(app, ["datasets", "list", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["shared_data_dir"] is None
    assert doc["shared_data_searched"] == [str(tmp_path / "nowhere")]
    shared = [d for d in doc["datasets"] if d["kind"] == "shared"]
    assert len(shared) == 4 and not any(d["available"] for d in shared)
    assert all(str(tmp_path / "nowhere") in d["reason"] for d in shared)


def test_datasets_list_table(shared_data: Path) -> None:
    result = runner.invoke(app, ["datasets", "list"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    for name in ("vorticity.128_128_41", "cesm-atm-cldhgh", "grayscott"):
        assert name in out
    joined = "".join(out.split())  # long URLs are folded over lines
    assert "41x128x128" in out and "SDRBENCH-CESM-ATM-1800x3600.tar.gz" in joined


def test_bad_registry_is_a_clear_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "registry.yaml"
    bad.write_text("shared:\n  - {name: x, shape: [2], dtype: int8, file: x}\n")
    monkeypatch.setattr(registry_module, "REGISTRY_PATH", bad)
    result = runner.invoke(app, ["datasets", "list", "--json"])
    assert result.exit_code == 2
    assert "unknown dtype 'int8'" in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.output


def test_datasets_list_json_in_a_real_subprocess(shared_data: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "from perfscout.cli import main; main()", "datasets", "list", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert {d["kind"] for d in doc["datasets"]} == {"shared", "remote", "synthetic"}


def test_table_prints_reasons_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A reason quotes a path; "[red]" in it is text, not rich markup to swallow.
    where = tmp_path / "[red]nowhere"
    monkeypatch.setenv(ENV_SHARED_DATA, str(where))
    monkeypatch.delenv(ENV_SDRBENCH_DIR, raising=False)
    result = runner.invoke(app, ["datasets", "list"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "".join(str(where).split()) in "".join(result.stdout.split())
