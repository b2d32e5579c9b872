"""`perfscout diagnose FILE...` and the agent's diagnose tool tell a profile's kind from its
content: an Nsight Compute report, ncu's raw or details CSV, perf stat output, whatever the
file is called and whatever the profiled program printed before it (real fixtures from an
H200 and from perf; real CLI subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfscout.errors import InputError
from perfscout.tools.profile import load_profile_files, profile_kind

ROOT = Path(__file__).resolve().parents[2]
NCU = ROOT / "tests" / "fixtures" / "ncu"
PERF = ROOT / "tests" / "fixtures" / "perf"


def perfscout(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFSCOUT_HOME": str(cwd / "home"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from perfscout.cli import main; main(sys.argv[1:])", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


@pytest.mark.parametrize(("name", "kind"), [
    ("ncu/h200_transpose_raw.csv", "ncu-raw"),          # the program's own "ok n=4096" comes first
    ("ncu/h200_cupy_kernels_raw.csv", "ncu-raw"),
    ("ncu/h200_cupy_kernels_import_raw.csv", "ncu-raw"),  # ncu --import output: no ==PROF== lines
    ("ncu/h200_transpose_details.csv", "ncu-details"),
    ("ncu/h200_cupy_kernels_details.csv", "ncu-details"),
    ("perf/cpu_loop_x.csv", "perf"),
    ("perf/cpu_loop_j.jsonl", "perf"),
    ("perf/sleep_r3_x.csv", "perf"),
])
def test_every_real_fixture_is_told_apart_by_its_content(tmp_path, name, kind) -> None:
    src = ROOT / "tests" / "fixtures" / name
    renamed = tmp_path / "profile.txt"  # the name says nothing
    renamed.write_bytes(src.read_bytes())
    assert profile_kind(src) == kind and profile_kind(renamed) == kind


@pytest.mark.parametrize(("content", "message"), [
    (b"", "is empty"),
    (b"   \n\n", "is empty"),
    (b"just some notes, nothing measured\n", "is not a profile perfscout reads"),
    (b'"a","b","c"\n"1","2","3"\n', "is not a profile perfscout reads"),  # a CSV, but not ncu's
])
def test_what_is_not_a_profile_is_refused_naming_what_was_expected(tmp_path, content, message) -> None:
    f = tmp_path / "x.csv"
    f.write_bytes(content)
    with pytest.raises(InputError, match=message):
        profile_kind(f)


def test_a_binary_file_is_taken_for_a_report_and_a_missing_one_is_refused(tmp_path) -> None:
    blob = tmp_path / "capture.bin"
    blob.write_bytes(b"NVPF\x00\x01\x02" + bytes(range(256)))
    assert profile_kind(blob) == "ncu-rep"
    with pytest.raises(InputError, match="does not exist"):
        profile_kind(tmp_path / "nope.csv")
    with pytest.raises(InputError, match="does not exist"):
        profile_kind(tmp_path)  # a directory


def test_files_of_each_kind_load_together_and_two_of_one_kind_are_refused() -> None:
    raw, details = NCU / "h200_transpose_raw.csv", NCU / "h200_transpose_details.csv"
    loaded = load_profile_files([details, raw])  # any order
    assert loaded.kernels and loaded.rules and loaded.sources == [str(raw), str(details)]
    with pytest.raises(InputError, match="two ncu-raw files"):
        load_profile_files([raw, NCU / "h200_cupy_kernels_raw.csv"])
    with pytest.raises(InputError, match="two ncu-raw files"):
        load_profile_files([raw], ncu_csv=raw)  # a file and the option for the same kind
    with pytest.raises(InputError, match="details page"):
        load_profile_files([details])


def test_cli_diagnose_takes_files_without_naming_their_kind(tmp_path) -> None:
    by_option = perfscout("diagnose", "--ncu-csv", str(NCU / "h200_transpose_raw.csv"), "--json", cwd=tmp_path)
    by_file = perfscout("diagnose", str(NCU / "h200_transpose_raw.csv"), "--json", cwd=tmp_path)
    assert by_option.returncode == by_file.returncode == 0, by_file.stderr
    a, b = json.loads(by_option.stdout), json.loads(by_file.stdout)
    assert [k["primary"] for k in a["kernels"]] == [k["primary"] for k in b["kernels"]]
    perf = perfscout("diagnose", str(PERF / "cpu_loop_j.jsonl"), "--json", cwd=tmp_path)
    assert perf.returncode == 0 and json.loads(perf.stdout)["programs"]
    only_details = perfscout("diagnose", str(NCU / "h200_transpose_details.csv"), cwd=tmp_path)
    assert only_details.returncode == 2 and "rule messages, not the metrics" in only_details.stderr
    assert "Traceback" not in only_details.stderr and not only_details.stdout
    nothing = perfscout("diagnose", cwd=tmp_path)
    assert nothing.returncode == 2 and "give at least one profile" in nothing.stderr
