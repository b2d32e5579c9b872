"""Closed loop: predicted vs measured change, from the committed H200 before/after profiles."""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from perfscout.cli import app
from perfscout.errors import InputError
from perfscout.tools.verify import judge, verify_csv, verify_live, verify_pair
from tests.unit._planted import PROFILES, kernel, timings

RAW = PROFILES / "planted_raw.csv"


def test_judge_tolerance_and_misses():
    assert judge(0.5, 0.4) == "hit" and judge(0.5, 0.2) == "missed_low"
    assert judge(0.1, 0.3) == "missed_high" and judge(None, 0.3) == "unsized"


@pytest.mark.parametrize("name, finding", [
    ("pk_occ_smem", "low_occupancy_shared_memory"), ("pk_smem_conflict", "shared_bank_conflicts"),
    ("pk_atomic_hot", "atomic_contention"), ("pk_divergent_branch", "warp_divergence"),
    ("pk_local_array", "local_memory"), ("pk_uncoalesced_transpose", "uncoalesced_global_access"),
])
def test_fixed_variants_hit_their_predictions(name, finding):
    r = verify_csv(RAW, RAW, name, name + "_fixed", timings=timings())
    assert r.finding == finding and r.verdict == "hit" and r.time_source == "CUDA events (median)"
    assert all(m.ok for m in r.metrics)


def test_a_missed_prediction_is_reported_as_missed():
    # float64 -> float32 halves DRAM bytes, but the float32 kernel is no longer DRAM-bound.
    r = verify_csv(RAW, RAW, "pk_dram_fp64_scale", "pk_dram_fp64_scale_fixed", timings=timings())
    assert r.verdict == "missed_low" and r.predicted_gain > r.measured_gain + 0.2
    assert "time scales with dram__bytes_read.sum" in r.note


def test_launch_overhead_is_verified_on_the_host_clock():
    r = verify_csv(RAW, RAW, "pk_tiny_launch", "pk_tiny_launch_fixed", timings=timings())
    assert "host wall time" in r.time_source and r.measured_gain > 0.9
    assert r.ncu_gain < 0  # one launch of the batched kernel is longer: ncu alone misleads
    assert r.verdict == "missed_high"  # predicted only the host gap; batching also saved GPU time


def test_ncu_time_is_used_without_timings():
    r = verify_pair(kernel("pk_occ_block"), kernel("pk_occ_block_fixed"))
    assert r.time_source == "ncu gpu__time_duration" and r.measured_gain == r.ncu_gain


def test_unknown_kernel_or_finding_is_a_clear_error():
    with pytest.raises(InputError, match="not in the profile"):
        verify_csv(RAW, RAW, "pk_nope")
    with pytest.raises(InputError, match="not raised"):
        verify_csv(RAW, RAW, "pk_occ_smem", "pk_occ_smem_fixed", finding_id="fp64_bound")


def test_cli_verify_json_and_error_exit():
    runner = CliRunner()
    res = runner.invoke(app, ["verify", "--before-csv", str(RAW), "--after-csv", str(RAW),
                              "--kernel", "pk_barrier_sync", "--after-kernel", "pk_barrier_sync_fixed",
                              "--timings", str(PROFILES / "timings.json"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["finding"] == "barrier_stalls" and doc["verdict"] == "hit"
    res = runner.invoke(app, ["verify", "--before-csv", str(RAW), "--kernel", "pk_barrier_sync"])
    assert res.exit_code == 2


def _stand_in_ncu(tmp_path, monkeypatch) -> None:
    """Put a stand-in `ncu` on PATH that drops ncu's own options and runs the program; what the
    program prints stands for what ncu records (-o NAME: NAME.ncu-rep), --import prints it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ncu = bindir / "ncu"
    ncu.write_text(textwrap.dedent("""\
        #!/bin/sh
        if [ "$1" = "--import" ]; then cat "$2"; exit 0; fi
        out=""
        while [ "$#" -gt 0 ]; do
          case "$1" in -o) out=$2; shift 2;; -k|-c|--set|--page|--clock-control|--print-units) shift 2;;
                       -f|--csv) shift;; *) break;; esac
        done
        exec "$@" > "$out.ncu-rep"
        """))
    ncu.chmod(ncu.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def test_live_mode_runs_ncu_through_the_sandbox(tmp_path, monkeypatch):
    """A stand-in `ncu` on PATH (this machine has no GPU) runs the wrapped program, which
    prints real ncu CSV: the live path (sandbox, wrapper argv, parsing) is exercised."""
    _stand_in_ncu(tmp_path, monkeypatch)
    script = tmp_path / "emit.py"
    script.write_text("import sys\nsys.stdout.write(open(sys.argv[1]).read())\n")
    emit = [sys.executable, str(script), str(RAW)]
    r = verify_live(emit, emit, "pk_occ_registers", tmp_path / "run", after_kernel="pk_occ_registers_fixed",
                    inputs=[RAW, script])
    assert r.finding == "low_occupancy_registers" and r.time_source == "ncu gpu__time_duration"
    assert r.verdict == "hit"
    assert (tmp_path / "run" / "before" / "ncu_profile_raw.csv").is_file()  # kept for audit


def test_cli_live_mode_resolves_relative_paths_in_the_current_directory(tmp_path, monkeypatch):
    """`--before-cmd "python emit.py raw.csv"` names files relative to where the user is."""
    _stand_in_ncu(tmp_path, monkeypatch)
    work = tmp_path / "work"
    work.mkdir()
    (work / "emit.py").write_text("import sys\nsys.stdout.write(open(sys.argv[1]).read())\n")
    (work / "raw.csv").write_bytes(RAW.read_bytes())
    monkeypatch.chdir(work)
    cmd = f"{sys.executable} emit.py raw.csv"
    res = CliRunner().invoke(app, ["verify", "--before-cmd", cmd, "--after-cmd", cmd,
                                   "--kernel", "pk_occ_registers", "--after-kernel", "pk_occ_registers_fixed",
                                   "--run-dir", str(tmp_path / "run"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["verdict"] == "hit"


def test_cli_verify_prints_demangled_names_whole():
    # PyTorch kernel names hold "[lambda(...) (instance 1)]": printed as text, not as markup.
    from pathlib import Path

    lib = Path(__file__).resolve().parents[2] / "benchmarks" / "planted_library" / "profiles" / "library_raw.csv"
    from perfscout.tools.ncu_parse import load_raw_csv

    name = next(k.name for k in load_raw_csv(lib).kernels if "index_put" in k.name)
    res = CliRunner().invoke(app, ["verify", "--before-csv", str(lib), "--after-csv", str(lib), "--kernel", name])
    assert res.exit_code == 0, res.output
    assert "[lambda(char *, const char *, long) (instance 1)]" in res.stdout.replace("\n", "")
