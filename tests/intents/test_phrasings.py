"""Every request of the phrasing set does exactly what its expected intent says (offline).

Each runs through the real graph (snapshot, understand, clarify, plan) and stops before
the first tool call: the intent, the question asked, the refusal and the planned tasks are
compared with the case. Requests that must be refused or asked about plan no task.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfscout.graph.context import Context
from tests.intents.harness import check, load_cases, make_files, observe

CASES = load_cases()
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("phrasings")
    make_files(tmp)
    return tmp


@pytest.mark.parametrize("case", CASES, ids=[f"{i:03d}-{c['cat']}" for i, c in enumerate(CASES)])
@pytest.mark.usefixtures("builtin_codecs_only")  # test plug-ins imported elsewhere (tests.fakes) are not "all codecs"
def test_phrasing_gives_its_intent(case, files, tmp_path, monkeypatch):
    # the fixture files and examples the requests name; "cwd: tmp" cases name the test's files bare
    monkeypatch.chdir(files if case.get("cwd") == "tmp" else ROOT)
    ctx = Context(home=str(tmp_path / "home"), planner="deterministic")
    answers = [a.replace("{tmp}", str(files)) for a in case.get("answers") or []]
    seen = observe(case["request"].replace("{tmp}", str(files)), ctx, answers)
    assert check(case, seen, files) == [], seen


def test_the_set_is_large_and_covers_both_languages():
    assert len(CASES) >= 80
    chinese = [c for c in CASES if any("\u4e00" <= ch <= "\u9fff" for ch in c["request"])]
    assert len(chinese) >= 15
    assert sum(1 for c in CASES if c["expect"].get("refused")) >= 8
    assert sum(1 for c in CASES if "asks" in c["expect"]) >= 15
