"""A benchmarked program plants links in its run directory; perfscout, writing its own
files there afterwards (unconfined), must not follow them out of the directory.

The program runs under bubblewrap with only the run directory writable; it may leave a
symlink where perfscout later writes ``repeats.json`` (or ``cards.json``, ``report.md``) and
replace ``raw/`` with a link to a folder elsewhere. Before the fix, ``perfscout bench``
wrote its repeats through such a link over a file outside the sandbox.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from perfscout.cli import app
from perfscout.tools.bwrap import probe_bwrap
from perfscout.tools.sandbox import run_subdir, write_run_file

_PROBE = probe_bwrap()
runner = CliRunner()


def test_run_subdir_replaces_planted_links_and_files(tmp_path: Path) -> None:
    run = tmp_path / "run"
    elsewhere = tmp_path / "elsewhere"
    run.mkdir()
    elsewhere.mkdir()
    (run / "raw").symlink_to(elsewhere)
    (run / "baseline").write_text("a file where a folder goes")
    d = run_subdir(run, "raw/trial-000")
    write_run_file(d / "000.stdout", "out")
    assert (run / "raw").is_dir() and not (run / "raw").is_symlink()
    assert (run / "raw" / "trial-000" / "000.stdout").read_text() == "out" and not any(elsewhere.iterdir())
    assert run_subdir(run, run / "baseline").is_dir()
    with pytest.raises(Exception, match="outside the run directory"):
        run_subdir(run, "../escape")


@pytest.mark.skipif(not _PROBE.usable, reason=f"bubblewrap cannot run here: {_PROBE.reason}")
def test_bench_never_writes_through_a_link_its_program_planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "bench-out"
    # the paths are in the program's code (data, not arguments): the argv rules let it pass
    code = (f"import os, shutil\nout = {str(out)!r}\n"
            f"p = os.path.join(out, 'repeats.json')\nos.path.lexists(p) or os.symlink({str(victim)!r}, p)\n"
            f"r = os.path.join(out, 'raw')\n"
            f"os.path.islink(r) or (shutil.rmtree(r, ignore_errors=True), os.symlink({str(elsewhere)!r}, r))\n"
            "open(os.path.join(out, 'planted'), 'a').write('x')\n")
    result = runner.invoke(app, ["bench", "--repeats", "2", "--warmup", "0", "--out", str(out), "--",
                                 os.path.realpath(sys.executable), "-c", code])
    assert result.exit_code == 0, result.stderr
    assert (out / "planted").read_text() == "xx", "the program did not run (or not in its run directory)"
    assert victim.read_text() == "precious", "perfscout wrote through a planted link"
    assert not any(elsewhere.iterdir()), "perfscout wrote into a folder the program linked in"
    assert (out / "repeats.json").is_file() and not (out / "repeats.json").is_symlink()
