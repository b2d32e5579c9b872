"""Asked for the GPU compressors on a machine that has neither a GPU nor cuSZp, the agent says
which ones it could not run and why, and what it ran instead (issue #14, item 5).

Through the real CLI (``perfscout run "…"``), the real offline planner, the real registry
(cuSZp's library discovery, CuPy's absence) and szp-gpu's CPU reference on a real field.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfscout.codecs.gpu_peers.device import gpu_reason
from perfscout.codecs.registry import info

ROOT = Path(__file__).resolve().parents[2]
FIELD = ROOT.parent / "shared" / "data" / "vorticity.512_512"
REQUEST = "compare cuSZp and szp-gpu on the GPU at rel 1e-3 on ../shared/data/vorticity.512_512 (512x512 float32)"


def _answer(report: str) -> str:
    return report.split("## Answer", 1)[1].split("\n## ", 1)[0]


@pytest.mark.skipif(not FIELD.is_file(), reason=f"the real field is not here: {FIELD} (../shared/data)")
@pytest.mark.skipif(gpu_reason() == "", reason="this machine has a GPU: the answer would be measured there")
def test_the_agent_says_which_gpu_codecs_it_could_not_run_and_what_ran_instead(tmp_path):
    cuszp = info("cuszp")
    if cuszp.available:
        pytest.skip("cuSZp is usable here")
    # ../shared is outside the working directory: a relative path that leaves it is the user's
    # only where they list its folder (an absolute path they write is theirs anyway)
    env = dict(os.environ, PERFSCOUT_HOME=str(tmp_path / "home"), PERFSCOUT_ALLOWED_ROOTS=str(FIELD.parent))
    env.pop("PERFSCOUT_CUSZP_LIB", None)
    p = subprocess.run([sys.executable, "-m", "perfscout", "run", REQUEST], cwd=ROOT, env=env, check=False,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    run_dir = next((tmp_path / "home" / "runs").iterdir())
    report = (run_dir / "report.md").read_text()
    answer = _answer(report)

    # cuSZp and the GPU: not run, in the Answer's first sentence, with the registry's reason (where it
    # looked, how to build it) and what ran instead
    first = answer.strip().split("\n\n")[0]
    assert first.startswith("cuszp could not run here (libcuSZp.so not found") and "scripts/build_cuszp.sh" in first
    assert "the GPU could not be used" in first and first.endswith("what ran instead: szp-gpu (CPU reference).")
    # szp-gpu: no GPU here, so its CPU reference ran instead, with what it measured
    records = json.loads((run_dir / "results.json").read_text())["records"]
    assert [r["codec"] for r in records] == ["szp-gpu"]
    szp = records[0]
    assert szp["status"] == "gpu_unavailable" and szp["bound_ok"] is True and szp["ratio"] > 1
    assert szp["shape"] == "512,512" and szp["mode"] == "rel" and szp["bound"] == 1e-3
    assert (f"szp-gpu had no GPU here, so it ran on its CPU reference: at REL 1e-3 on vorticity.512_512, "
            f"ratio {szp['ratio']:.4g}, max abs error {szp['max_abs_err']:.3g} (bound held)") in answer
    assert "CuPy cannot be imported" in answer or "no usable CUDA device" in answer or "no CUDA device" in answer
    assert "did not finish" not in answer  # it finished, on the CPU
    assert "GPUs: none" in report  # the platform line of the run
