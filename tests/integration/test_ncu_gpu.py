"""ncu wrapper end to end on a real GPU (runs only where CuPy sees a GPU and ncu exists)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from perfscout.tools.ncu import NcuOptions
from perfscout.tools.profile import profile_command

PROGRAM = Path(__file__).resolve().parents[1] / "fixtures" / "ncu" / "programs" / "cupy_kernels.py"

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("ncu") is None, reason="Nsight Compute (ncu) is not on PATH"),
]


def test_profile_picks_ncu_and_parses_real_kernels(perfscout_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(PROGRAM.parent)
    out = profile_command([sys.executable, PROGRAM.name, "20"],
                          ncu_options=NcuOptions(kernel_regex="vec_add|strided", launch_count=4))
    assert out.tool == "ncu" and "cupy" in out.reason
    assert out.status == "ok", out.exit
    assert out.ncu_error == ""
    names = [k["name"] for k in out.kernels]
    assert names == ["vec_add_f4", "strided_gather", "vec_add_f4", "strided_gather"]
    assert any(r["rule"] == "UncoalescedGlobalAccess" for k in out.kernels for r in k["ncu_says"]
               if k["name"] == "strided_gather")
    run_dir = Path(out.run_dir)
    assert (run_dir / "ncu_profile.ncu-rep").exists()
    assert (run_dir / "ncu_profile_raw.csv").exists() and (run_dir / "ncu_profile_details.csv").exists()
