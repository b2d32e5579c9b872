"""Every `perfscout diagnose` input path refuses what is not its format: exit 2, one clear
message on stderr, nothing on stdout, no traceback (real CLI subprocesses, real files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NCU = ROOT / "tests" / "fixtures" / "ncu"
RAW = NCU / "h200_cupy_kernels_raw.csv"
DETAILS = NCU / "h200_cupy_kernels_details.csv"
PERF = ROOT / "tests" / "fixtures" / "perf" / "cpu_loop_x.csv"


def perfscout(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFSCOUT_HOME": str(cwd / "home"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", "import sys; from perfscout.cli import main; main(sys.argv[1:])", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )


def _raw_lines() -> tuple[list[str], int]:
    lines = RAW.read_text().splitlines()
    return lines, next(i for i, ln in enumerate(lines) if ln.startswith('"ID",'))


def _files(d: Path) -> dict[str, Path]:
    lines, start = _raw_lines()
    row = lines[start + 4]
    text = {
        "empty": "",
        "readme": (ROOT / "README.md").read_text(),
        "pyproject": (ROOT / "pyproject.toml").read_text(),
        "header_only": "\n".join(lines[: start + 1]) + "\n",
        "header_units": "\n".join(lines[: start + 2]) + "\n",
        "header_cut": "\n".join(lines)[: len("\n".join(lines[:start])) + 4000],
        "one_row_cut": "\n".join(lines[: start + 2]) + "\n" + row[: len(row) // 2],
        "csv_of_numbers": "1,2,3\n4,5,6\n" * 50,
    }
    out = {name: d / f"{name}.txt" for name in text}
    for name, body in text.items():
        out[name].write_text(body)
    (d / "garbage.bin").write_bytes(bytes(range(256)) * 64)
    out["garbage"] = d / "garbage.bin"
    return out


@pytest.fixture(scope="module")
def bad(tmp_path_factory) -> dict[str, Path]:
    return _files(tmp_path_factory.mktemp("bad_inputs"))


def _refused(r: subprocess.CompletedProcess[str], needle: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    assert r.stdout == "" and "Traceback" not in r.stderr
    assert needle in " ".join(r.stderr.split()), r.stderr


@pytest.mark.parametrize("name,needle", [
    ("empty", "no perf stat counter lines"), ("readme", "no perf stat counter lines"),
    ("pyproject", "no perf stat counter lines"), ("header_only", "no perf stat counter lines"),
    ("csv_of_numbers", "no perf stat counter lines"), ("garbage", "binary data"),
])
def test_perf_csv_that_is_not_perf_output_exits_2(bad, tmp_path: Path, name: str, needle: str) -> None:
    _refused(perfscout("diagnose", "--json", "--perf-csv", str(bad[name]), cwd=tmp_path), needle)


@pytest.mark.parametrize("name,needle", [
    ("empty", "no ncu CSV header"), ("readme", "no ncu CSV header"), ("garbage", "binary data"),
    ("header_only", "no kernel rows"), ("header_units", "no kernel rows"), ("header_cut", "no kernel rows"),
    ("one_row_cut", "all truncated"),
])
def test_ncu_csv_without_complete_launches_exits_2(bad, tmp_path: Path, name: str, needle: str) -> None:
    _refused(perfscout("diagnose", "--json", "--ncu-csv", str(bad[name]), cwd=tmp_path), needle)


def test_a_cut_off_launch_row_is_reported_and_the_complete_ones_diagnosed(tmp_path: Path) -> None:
    lines, start = _raw_lines()
    row = lines[start + 4]
    cut = tmp_path / "cut.csv"
    cut.write_text("\n".join(lines[: start + 4]) + "\n" + row[: len(row) // 2])
    r = perfscout("diagnose", "--json", "--ncu-csv", str(cut), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [k["id"] for k in doc["kernels"]] == [0, 1]
    assert any("(ID 2) are truncated" in w and "not diagnosed" in w for w in doc["warnings"])
    assert "are truncated" in " ".join(r.stderr.split())  # also said on stderr, for the Markdown report


def test_a_details_page_given_as_the_raw_csv_exits_2(tmp_path: Path) -> None:
    _refused(perfscout("diagnose", "--json", "--ncu-csv", str(DETAILS), cwd=tmp_path),
             "this is a --page details CSV")


@pytest.mark.parametrize("name,needle", [
    ("empty", "no ncu CSV header"), ("readme", "no ncu CSV header"), ("header_only", "no 'Rule Name'"),
])
def test_ncu_details_that_is_not_a_details_page_exits_2(bad, tmp_path: Path, name: str, needle: str) -> None:
    _refused(perfscout("diagnose", "--json", "--ncu-csv", str(RAW), "--ncu-details", str(bad[name]),
                       cwd=tmp_path), needle)


def test_ncu_details_with_no_rows_exits_2(tmp_path: Path) -> None:
    lines = DETAILS.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID",'))
    f = tmp_path / "details_header.csv"
    f.write_text("\n".join(lines[: start + 1]) + "\n")
    _refused(perfscout("diagnose", "--json", "--ncu-csv", str(RAW), "--ncu-details", str(f), cwd=tmp_path),
             "no rows")


@pytest.mark.parametrize("body,needle", [
    ("", "cannot read host timing"), ("[1, 2]", "expected a JSON object"),
    ('{"some_kernel": 3}', "must be an object of numbers"),
    ('{"launch_overhead": {"k": {"host_per_launch_us": "fast"}}}', "must be an object of numbers"),
])
def test_host_timing_of_the_wrong_shape_exits_2(tmp_path: Path, body: str, needle: str) -> None:
    f = tmp_path / "host.json"
    f.write_text(body)
    _refused(perfscout("diagnose", "--json", "--ncu-csv", str(RAW), "--host-timing", str(f), cwd=tmp_path),
             needle)


def test_a_huge_file_of_junk_is_refused_quickly(tmp_path: Path) -> None:
    """64 MB without a newline or a header: refused with the format message, not parsed for minutes."""
    f = tmp_path / "huge.txt"
    f.write_bytes(b"a" * (64 * 2**20))
    for opt, needle in (("--ncu-csv", "no ncu CSV header"), ("--perf-csv", "no perf stat counter lines")):
        _refused(perfscout("diagnose", "--json", opt, str(f), cwd=tmp_path), needle)


def test_real_perf_output_with_stray_lines_is_read_and_the_strays_noted(tmp_path: Path) -> None:
    f = tmp_path / "perf_with_stderr.csv"
    f.write_text("program says: hello, world, again\n" + PERF.read_text())
    r = perfscout("diagnose", "--json", "--perf-csv", str(f), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    perf = json.loads(r.stdout)["perf"]
    assert perf["events"] and any("not perf stat counter lines" in n for n in perf["notes"])


def test_a_windows_export_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """The Nsight Compute GUI on Windows may write UTF-8 with a BOM, or UTF-16."""
    want = perfscout("diagnose", "--json", "--ncu-csv", str(RAW), cwd=tmp_path)
    text = RAW.read_text()
    for name, data in (("bom8.csv", b"\xef\xbb\xbf" + text.encode()), ("utf16.csv", text.encode("utf-16")),
                       ("crlf.csv", text.replace("\n", "\r\n").encode())):
        (tmp_path / name).write_bytes(data)
        r = perfscout("diagnose", "--json", "--ncu-csv", str(tmp_path / name), cwd=tmp_path)
        assert r.returncode == 0, (name, r.stderr[-1000:])
        assert [k["primary"] for k in json.loads(r.stdout)["kernels"]] == \
            [k["primary"] for k in json.loads(want.stdout)["kernels"]], name


def test_a_compressed_profile_is_refused_with_what_it_is(tmp_path: Path) -> None:
    import gzip

    f = tmp_path / "raw.csv.gz"
    f.write_bytes(gzip.compress(RAW.read_bytes()))
    _refused(perfscout("diagnose", "--json", "--ncu-csv", str(f), cwd=tmp_path), "gzip-compressed")
    _refused(perfscout("diagnose", "--json", "--perf-csv", str(f), cwd=tmp_path), "gzip-compressed")
