"""The viewer's pieces without a server: path checks, checkpoint times, claims, the answer lines."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from perfscout.viewer import paths
from perfscout.viewer.store import Checkpoint, checkpoint_time, lineage
from perfscout.viewer.timeline import answer_lines, ledger_times, progress, read_claims


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "a/b", "a\\b", ".hidden", "x" * 201, "a..b", "a\x00b", "é"])
def test_run_ids_outside_the_alphabet_are_refused(bad: str) -> None:
    with pytest.raises(paths.NotServed):
        paths.check_run_id(bad)


def test_run_ids_the_agent_makes_pass() -> None:
    for ok in ("a541c6c81697", "raw1", "big-1000.fork_2+x"):
        assert paths.check_run_id(ok) == ok


@pytest.mark.parametrize("bad", ["../secret", "/etc/passwd", "a/../../secret", ".hidden", "raw/.x", "a//b", "", "a\\b",
                                 "x\x00y", "./report.md"])
def test_file_names_that_leave_or_hide_are_refused(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "runs" / "r1"
    root.mkdir(parents=True)
    (tmp_path / "runs" / "secret").write_text("no")
    with pytest.raises(paths.NotServed):
        paths.child_file(root, bad)


def test_symlinks_out_of_the_home_are_refused_and_inside_ones_followed(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    root = runs / "r1"
    (root / "raw").mkdir(parents=True)
    (root / "report.md").write_text("# ok")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (root / "leak.md").symlink_to(outside)
    (root / "raw" / "alias.md").symlink_to(root / "report.md")
    (runs / "evil").symlink_to(tmp_path)  # a run directory that is a link out of runs/
    assert paths.child_file(root, "report.md").read_text() == "# ok"
    assert paths.child_file(root, "raw/alias.md").read_text() == "# ok"
    with pytest.raises(paths.NotServed):
        paths.child_file(root, "leak.md")
    with pytest.raises(paths.NotServed):
        paths.run_dir(runs, "evil")
    with pytest.raises(paths.NotServed):
        paths.child_file(root, "raw")  # a folder is not a file


def test_checkpoint_time_reads_langgraphs_uuid6_ids() -> None:
    from langgraph.checkpoint.base.id import uuid6

    before = __import__("time").time()
    cid = str(uuid6(clock_seq=3))
    assert before - 1 <= checkpoint_time(cid) <= before + 1
    assert checkpoint_time(str(uuid.uuid4())) is None
    assert checkpoint_time("not-an-id") is None


def test_lineage_follows_the_newest_branch() -> None:
    cps = [Checkpoint("1", None, -1, "input", 0), Checkpoint("2", "1", 0, "loop", 0),
           Checkpoint("3", "2", 1, "loop", 0), Checkpoint("4", "2", 1, "update", 0)]
    path, other = lineage(cps)
    assert [c.id for c in path] == ["1", "2", "4"] and other == 1
    assert lineage([]) == ([], 0)


def test_claims_json_is_read_by_the_contract_and_a_damaged_one_says_so(tmp_path: Path) -> None:
    assert read_claims(tmp_path) == (None, "")
    doc = {"language": "en", "claims": [
        {"id": "c1", "kind": "ranking", "subjects": ["sz3", "zfp (GPU)"], "figure": "ratio",
         "values": {"sz3": 2.4, "zfp (GPU)": 1.9}, "spread": {}, "verdict": None,
         "records": ["t01-sz3", "t02-zfp"], "text": "sz3 compresses more than zfp."},
        {"id": "c2", "kind": "target", "subjects": ["sz3"], "figure": "psnr", "values": {"sz3": 80.1},
         "spread": {"sz3": [79.0, 81.0]}, "verdict": "met", "records": ["t01-sz3"], "text": "PSNR ≥ 60 dB: met."}]}
    (tmp_path / "claims.json").write_text(json.dumps(doc), encoding="utf-8")
    claims, problem = read_claims(tmp_path)
    assert problem == "" and [c.id for c in claims] == ["c1", "c2"]
    assert claims[0].records == ["t01-sz3", "t02-zfp"] and claims[1].verdict == "met"
    for broken in ("{", json.dumps({"claims": "x"}), json.dumps({"claims": [{"id": "c1"}]}), json.dumps([1])):
        (tmp_path / "claims.json").write_text(broken, encoding="utf-8")
        claims, problem = read_claims(tmp_path)
        assert claims is None and "claims.json could not be read" in problem


def test_answer_lines_are_the_paragraphs_under_answer() -> None:
    md = "# t\n\n## Answer\n\nFirst line\ncontinued.\n\nSecond.\n\n## Run\n\n- x\n"
    assert answer_lines(md) == ["First line continued.", "Second."]
    assert answer_lines("# nothing\n") == []


def test_ledger_times_pair_start_and_done(tmp_path: Path) -> None:
    (tmp_path / "calls.log").write_text("10.0 start a.a1 t\n10.5 done a.a1 t\ngarbage\n11.0 start b.a1 t\n"
                                        "x start c t\n")
    times = ledger_times(tmp_path)
    assert times["a.a1"] == (10.0, 10.5) and times["b.a1"] == (11.0, None) and "c" not in times
    assert ledger_times(tmp_path / "missing") == {}


def test_progress_counts_done_and_to_do() -> None:
    values = {"observations": [{"task_key": "t1"}, {"task_key": "t1"}, {"task_key": "t2"}],
              "queue": [{"key": "t4"}], "current": {"key": "t3"}, "steps": 3,
              "plan": {"tasks": [{"key": f"t{i}"} for i in range(1, 5)]}}
    assert progress(values) == {"done": 2, "todo": 2, "planned": 4, "calls": 3, "current": "t3"}
    assert progress({})["done"] == 0


def test_the_viewer_package_data_is_declared() -> None:
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"viewer/templates/*"' in text and '"viewer/static/*"' in text
    pkg = Path(paths.__file__).parent
    assert (pkg / "static" / "viewer.js").is_file() and (pkg / "templates" / "run.html").is_file()
