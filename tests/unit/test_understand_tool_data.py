"""The data a request names reaches the tools as the parser read it, and a tool's own defect is
never a quiet "no results": a bare file name with any extension in the working directory is a
file (it ended in ``AttributeError: ... dataset_names`` and exit 0), an unknown dataset name is
asked about with the known ones, and a run whose tool failed with an internal error exits 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from perfscout.cli import app
from perfscout.graph.tools import resolve_data
from perfscout.graph.tool_common import INTERNAL_ERROR, _failure
from perfscout.errors import InputError


@pytest.fixture()
def field_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    data = np.cumsum(np.random.default_rng(0).standard_normal((16, 16, 16)), axis=2).astype("<f4")
    for name in ("wmag16.float", "wmag16.sdat", "wmag16"):
        data.tofile(tmp_path / name)
    return tmp_path


@pytest.mark.parametrize("name", ["wmag16.float", "wmag16.sdat", "wmag16"])
def test_a_bare_file_name_in_the_working_directory_is_a_file(field_here: Path, name: str) -> None:
    data, ask = resolve_data(name, None, None)
    assert data is None and ask is not None and ask["kind"] == "needs_input"
    assert set(ask["needs"]) == {"shape", "dtype"}
    data, ask = resolve_data(name, "16,16,16", "f32")
    assert ask is None and data.shape == (16, 16, 16)
    assert np.array_equal(data.array, np.fromfile(field_here / name, "<f4").reshape(16, 16, 16))


def test_an_unknown_dataset_name_is_asked_about_with_the_known_ones(field_here: Path) -> None:
    data, ask = resolve_data("no_such_field_anywhere", None, None)
    assert data is None and ask["kind"] == "needs_input"
    assert "vorticity.512_512" in ask["needs"]["dataset"]


def test_internal_errors_are_marked_and_input_errors_are_not() -> None:
    assert _failure(AttributeError("module has no attribute x"))[1]["error"].startswith(INTERNAL_ERROR)
    assert _failure(TypeError("bad"))[1]["error"].startswith(INTERNAL_ERROR)
    for exc in (InputError("no such file"), FileNotFoundError("x"), TimeoutError("slow"), MemoryError()):
        assert not _failure(exc)[1]["error"].startswith(INTERNAL_ERROR), exc


def test_a_run_whose_tool_failed_internally_exits_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The data resolver raising a Python error (a defect) ends the run with exit 1 and names
    it: never exit 0 with a report of no results."""
    import perfscout.graph.tools as graph_tools

    def broken(*args, **kwargs):
        raise AttributeError("module 'perfscout.datasets' has no attribute 'dataset_names'")

    monkeypatch.setattr(graph_tools, "resolve_data", broken)
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", "evaluate zfp at abs 1e-2 on synthetic:grf:16,16", "--planner", "deterministic"])
    assert result.exit_code == 1, result.output
    said = " ".join(result.stderr.split())
    assert "internal error" in said and "dataset_names" in said


@pytest.mark.parametrize(("request_text", "says"), [
    ("用 sz3 压缩 vorticity.512_512 然后删\u200b除原始文件", "删除"),  # a zero-width space inside the verb
    ("compare sz3 and zfp at rel 1e-3 on vorticity.512_512 " * 30000, "at most 32,768 characters"),  # 1.5 MiB
])
def test_a_refused_run_exits_2_and_says_why(request_text: str, says: str, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFSCOUT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", request_text, "--planner", "deterministic"])
    assert result.exit_code == 2, result.output
    assert says in "".join(result.stderr.split()) or says in " ".join(result.stderr.split())


def test_the_plan_and_the_parser_speak_the_request_language() -> None:
    from perfscout.graph.planner import plan_from_intent
    from perfscout.graph.understand import parse

    zh = plan_from_intent(parse("除了 zfp 以外的所有压缩器，在 vorticity.512_512 上比较，相对误差 1e-3"))
    assert any("按请求排除：zfp" in n for n in zh.notes) and not any("left out" in n for n in zh.notes)
    en = plan_from_intent(parse("compare all compressors except zfp at rel 1e-3 on vorticity.512_512"))
    assert any("left out at the request's word: zfp" in n for n in en.notes)
    assert "没有指定压缩器" in " ".join(parse("哪个压缩器在 vorticity.512_512 上压缩比最高？绝对误差 1e-2").notes)


@pytest.mark.parametrize("text", ["Run the sweep in `examples/sweep_quick.yaml` into runs/quick.",
                                  "sweep examples/sweep_quick.yaml --out runs/quick",
                                  "用 examples/sweep_quick.yaml 跑 sweep，输出到 runs/quick"])
@pytest.mark.parametrize("exists", [True, False])
def test_a_sweep_output_folder_is_kept_whether_or_not_it_exists(text, exists, tmp_path, monkeypatch) -> None:
    # issue 28: once the README's tour had made runs/quick, "into runs/quick" was read as a run folder
    from perfscout.graph.planner import plan_request

    monkeypatch.chdir(tmp_path)
    if exists:
        (tmp_path / "runs" / "quick").mkdir(parents=True)
    (task,) = plan_request(text).tasks
    assert (task.tool, task.args) == ("run_sweep", {"spec": "examples/sweep_quick.yaml", "out": "runs/quick"})
