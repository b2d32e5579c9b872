"""Reports from a real sweep's store: sections, plots, goal tables, failures, traceable summary."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from perfscout.analysis.report import summary
from perfscout.api_sweep import report, sweep
from perfscout.state.records import CompressionResult
from perfscout.tools.results_store import open_results

ROOT = Path(__file__).resolve().parents[2]

SPEC = """\
name: reportme
repeats: 1
jobs: 2
plugins: [tests.fakes.crashing_codec]
datasets:
  - synthetic: "grf:8,16,16"
  - synthetic: "smooth:8,16,16"
codecs:
  - sz3
  - zfp
  - {id: fake-crash, options: {behaviour: sloppy, crash_below: 1.0e-2}}
  - {id: fake-crash, options: {behaviour: abort, crash_below: 1.0e-2}}
modes: [abs]
bounds: [1.0e-1, 1.0e-2, 1.0e-3]
report:
  psnr_min: 50
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("report")
    (base / "spec.yaml").write_text(SPEC)
    out = base / "run"
    sweep(base / "spec.yaml", out=out, progress=False, allow_plugins=True)  # the spec names a fake codec
    report(out)
    return out


def test_report_has_every_section(run_dir: Path) -> None:
    md = (run_dir / "report.md").read_text()
    for heading in ("## Summary", "## Best settings per goal", "### Highest compression ratio with the bound held",
                    "### Fastest compression with PSNR ≥ 50 dB (bound held)", "## Violated bounds",
                    "## Failed tasks", "## Plots per dataset", "## All results", "## Environment", "## Spec"):
        assert heading in md, heading
    assert SPEC.strip() in md  # the spec, verbatim
    assert "platform_id: `" in md and "CPU: " in md


def test_plots_per_dataset_exist_and_are_referenced(run_dir: Path) -> None:
    md = (run_dir / "report.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\((plots/[^)]+\.png)\)", md)
    kinds = ("rate_distortion", "cr_vs_bound", "throughput", "bubble", "heatmap")
    for dataset in ("grf_8x16x16", "smooth_8x16x16"):
        for kind in kinds:
            assert f"plots/{dataset}__{kind}.png" in images
    for rel in images:
        assert (run_dir / rel).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_failures_and_violations_are_listed_with_their_errors(run_dir: Path) -> None:
    df = open_results(run_dir)
    md = (run_dir / "report.md").read_text()
    failed = df[df["status"] == "codec_crashed"]
    violated = df[df["bound_ok"].eq(False).fillna(False)]
    assert len(failed) == 2 * 1 and len(violated) == 2 * 1  # bound 1e-3 on each dataset
    section = md.split("## Failed tasks")[1].split("## Plots per dataset")[0]
    for row in failed.itertuples():
        assert row.task_key in section and "SIGABRT" in row.error
    vsection = md.split("## Violated bounds")[1].split("## Failed tasks")[0]
    for row in violated.itertuples():
        assert row.task_key in vsection
    assert "bound_violated" in vsection


def test_goal_tables_pick_the_right_rows(run_dir: Path) -> None:
    df = open_results(run_dir)
    best = summary.best_cr_table(df)
    ok = df[df["bound_ok"].eq(True).fillna(False)]
    for (dataset, codec), g in ok.groupby(["dataset", "codec"]):
        row = best[(best["dataset"] == dataset) & (best["series"] == f"{codec}@cpu")].iloc[0]
        assert row["ratio"] == g["ratio"].max()
    fast = summary.fastest_table(df, 50)
    assert (fast["psnr"] >= 50).all()
    assert not set(fast["task_key"]) & set(df.loc[df["bound_ok"].eq(False).fillna(False), "task_key"])


def test_every_summary_number_is_traceable_to_a_stored_row(run_dir: Path) -> None:
    df = open_results(run_dir).set_index("task_key")
    statements = summary.summarize(df.reset_index(), psnr_min=50)
    assert {s.kind for s in statements} >= {"overview", "best", "goal", "lead", "trend", "violation"}
    md = (run_dir / "report.md").read_text()
    for st in statements:
        assert st.text in md
        for fact in st.facts:
            stored = df.loc[fact.task_key, fact.column]
            assert stored == fact.value, (st.text, fact)
            shown = summary.fmt_bound(stored) if fact.column == "bound" else summary.fmt(stored)
            assert shown in st.text, (st.text, fact)
        for key in st.task_keys:
            assert f"`{key}`" in md


def test_html_is_self_contained(run_dir: Path) -> None:
    page = (run_dir / "report.html").read_text()
    pngs = sorted((run_dir / "plots").glob("*.png"))
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(uris) == len(pngs) == 10
    assert sorted(base64.b64decode(u) for u in uris) == sorted(p.read_bytes() for p in pngs)
    assert not re.search(r'(src|href)="(?!data:)', page)  # nothing fetched from disk or network


def test_cli_report_rewrites_the_same_bytes_and_refuses_a_bad_directory(run_dir: Path, tmp_path: Path) -> None:
    first = (run_dir / "report.html").read_bytes()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-c", "from perfscout.cli import main; main()", "report"]
    ok = subprocess.run(cmd + [str(run_dir)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "report.html" in ok.stdout
    assert (run_dir / "report.html").read_bytes() == first  # deterministic, plots included
    bad = subprocess.run(cmd + [str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    message = " ".join(bad.stderr.split())  # rich wraps long lines
    assert bad.returncode == 2 and "not a sweep run directory" in message and "Traceback" not in message


# ----------------------------------------------------------------------------- templates


def rows(*specs: tuple) -> pd.DataFrame:
    out = []
    for i, (codec, device, bound, ratio, cmbps) in enumerate(specs):
        out.append(CompressionResult(task_key=f"k{i:02d}", dataset="d", shape="4", dtype="f32", nbytes=16,
                                     codec=codec, device=device, mode="abs", bound=bound, ratio=ratio,
                                     psnr=90.0, compress_MBps=cmbps, decompress_MBps=cmbps, bound_ok=True).row())
    return pd.DataFrame(out)


def test_crossover_dip_and_architecture_templates() -> None:
    df = rows(
        ("a", "cpu", 1e-3, 2.0, 100.0), ("a", "cpu", 1e-2, 4.0, 10.0), ("a", "cpu", 1e-1, 8.0, 100.0),
        ("b", "cpu", 1e-3, 1.0, 100.0), ("b", "cpu", 1e-2, 5.0, 100.0), ("b", "cpu", 1e-1, 9.0, 100.0),
        ("g", "cuda", 1e-2, 3.0, 2000.0),
    )
    st = summary.summarize(df)
    cross = [s for s in st if s.kind == "crossover"]
    assert [s.text for s in cross] == [
        "Crossover (abs): at 0.001 a@cpu has the higher CR (2 vs 1); at 0.01 b@cpu leads (5 vs 4)."]
    assert cross[0].task_keys == ["k00", "k03", "k04", "k01"]
    dips = [s for s in st if s.kind == "anomaly"]
    assert [s.text for s in dips] == [
        "Anomaly, a@cpu (abs): compress throughput drops to 10 MB/s at 0.01, against 100 MB/s at 0.001 and "
        "100 MB/s at 0.1.",
        "Anomaly, a@cpu (abs): decompress throughput drops to 10 MB/s at 0.01, against 100 MB/s at 0.001 and "
        "100 MB/s at 0.1."]
    arch = [s for s in st if s.kind == "architecture"]
    assert len(arch) == 1 and "g@cuda compresses at 2e+03 MB/s" in arch[0].text and "20× on the GPU" in arch[0].text
    # A steady slowdown as the bound tightens is a trend, not an anomaly.
    steady = rows(("a", "cpu", 1e-3, 2.0, 10.0), ("a", "cpu", 1e-2, 4.0, 50.0), ("a", "cpu", 1e-1, 8.0, 100.0))
    assert not [s for s in summary.summarize(steady) if s.kind == "anomaly"]
    assert summary.summarize(df) == st  # deterministic
