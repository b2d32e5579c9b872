"""A readable `diagnose` (issue #16): one entry per kernel, digest first, deciding evidence by
default, pasteable commands, compact JSON. Real ncu fixtures from the H200."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from perfscout.analysis.diagnosis import diagnose
from perfscout.analysis.diagnosis.kernel_context import KernelContext, kernel_stem
from perfscout.analysis.diagnosis.render import (
    DEFAULT_EVIDENCE,
    aggregate,
    summary_markdown,
)
from perfscout.tools.ncu_parse import kernel_duration_s, load_raw_csv

ROOT = Path(__file__).resolve().parents[2]
CUPY = ROOT / "tests" / "fixtures" / "ncu" / "h200_cupy_kernels_import_raw.csv"
LIBRARY = ROOT / "benchmarks" / "planted_library" / "profiles" / "library_raw.csv"


def _entries(path: Path) -> list[dict]:
    kernels = load_raw_csv(path).kernels
    out = diagnose(kernels)["kernels"]
    for k, d in zip(kernels, out, strict=True):
        d.update(id=k.id, duration_s=kernel_duration_s(k))
    return aggregate(out)


def test_launches_aggregate_per_kernel_ordered_by_total_time():
    entries = _entries(CUPY)
    assert sum(e["launches"] for e in entries) == 18 and len(entries) == 12
    assert [e["total_s"] for e in entries] == sorted((e["total_s"] for e in entries), reverse=True)
    first = entries[0]
    assert first["name"] == "strided_gather" and first["launches"] == 2
    assert abs(sum(e["share_pct"] for e in entries) - 100.0) < 1e-6
    assert first["primaries"] == {"uncoalesced_global_access": 2}


def test_report_puts_the_digest_first_and_fits_a_screen_per_kernel():
    entries = _entries(CUPY)
    text = summary_markdown(entries, {"device": "NVIDIA H200"})
    assert text.index("| share | time |") < text.index("## 1. strided_gather")
    sections = text.split("\n## ")[1:]
    assert len(sections) == len(entries)
    assert all(len(s.splitlines()) <= 20 for s in sections), max(len(s.splitlines()) for s in sections)
    verbose = summary_markdown(entries, {}, verbose=True)
    assert len(verbose.splitlines()) > len(text.splitlines())
    assert "Not when:" in verbose and "Not when:" not in text
    short = summary_markdown(entries, {}, top=3)
    assert short.count("\n## ") == 3 and "9 more kernels not detailed" in short


def test_default_shows_only_the_deciding_evidence():
    e = next(e for e in _entries(LIBRARY) if e["name"].startswith("nvjet_sm90_tst_320x128"))
    text = summary_markdown([e], {})
    primary_evidence = [ln for ln in text.splitlines() if ln.startswith("- `")]
    assert 1 <= len(primary_evidence) <= DEFAULT_EVIDENCE


def test_measure_commands_paste_into_a_shell():
    for k in load_raw_csv(LIBRARY).kernels:
        cmd = KernelContext(k).ncu_command()
        words = shlex.split(cmd)  # parses: every special character is quoted
        assert words[words.index("-k") + 1] == "regex:" + __import__("re").escape(kernel_stem(k.name))
        assert words[words.index("--kernel") + 1] == k.name
        assert "<" not in cmd.split("--kernel")[0]


def test_kernel_stem():
    assert kernel_stem("void at::vectorized_elementwise_kernel<4, at::A<float>, std::array<char *, 3>>"
                       "(int, T2, T3)") == "vectorized_elementwise_kernel"
    assert kernel_stem("void (anonymous namespace)::foo<int>(int)") == "foo"
    assert kernel_stem("raw_pointer_chase") == "raw_pointer_chase"


def _cli(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PERFSCOUT_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", "import sys; from perfscout.cli import main; main(sys.argv[1:])",
                           "diagnose", *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          check=False)


def test_cli_json_is_compact_unless_indented_and_has_the_summary(tmp_path):
    r = _cli("--json", "--ncu-csv", str(CUPY), tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1 and '": ' not in r.stdout[:2000]
    doc = json.loads(r.stdout)
    assert len(doc["kernels"]) == 18  # per launch, as before
    assert doc["summary"][0]["name"] == "strided_gather" and doc["summary"][0]["launches"] == 2
    assert doc["summary"][0]["primary"] == "uncoalesced_global_access"
    r2 = _cli("--json", "--indent", "2", "--ncu-csv", str(CUPY), tmp_path=tmp_path)
    assert r2.returncode == 0 and json.loads(r2.stdout) == doc and r2.stdout.count("\n") > 100


def test_cli_markdown_default_and_verbose(tmp_path):
    r = _cli("--ncu-csv", str(CUPY), tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.index("| share |") < r.stdout.index("## 1.")
    assert r.stdout.count("## ") == 10  # --top 10 kernel sections by default
    rv = _cli("--ncu-csv", str(CUPY), "--verbose", "--top", "0", tmp_path=tmp_path)
    assert rv.returncode == 0 and rv.stdout.count("\n## ") == 12 and "Not when:" in rv.stdout
