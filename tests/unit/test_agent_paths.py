"""Issue 30, item 5: a path an agent request names is resolved (realpath, after joining the
working directory) before it is checked, whatever its spelling; nothing outside the allowed
places is read, and a request that names one is refused before any question is asked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfscout.errors import InputError
from perfscout.graph.tool_common import allowed_roots, check_named_path


@pytest.fixture()
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    work = tmp_path / "a" / "b" / "work"
    (work / "sub").mkdir(parents=True)
    (work / "field.f32").write_bytes(b"\0" * 64)
    (work / "sub" / "g.f32").write_bytes(b"\0" * 64)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.f32").write_bytes(b"\0" * 64)
    (work / "escape").symlink_to(tmp_path / "outside" / "secret.f32")
    (work / "shadowlink").symlink_to("/etc/shadow")
    monkeypatch.chdir(work)
    monkeypatch.delenv("PERFSCOUT_ALLOWED_ROOTS", raising=False)
    return work


OUTSIDE = [
    "../../../etc/shadow", "../../../../../../../../etc/shadow", "./a/../../../../etc/passwd",
    "sub/../../outside/secret.f32", "..//..//outside//secret.f32", "escape", "./escape", "shadowlink",
    "/etc/shadow", "//etc//shadow", "/etc/./shadow", "/proc/self/environ", "/proc/1/root/etc/shadow",
    "/dev/zero", "/sys/kernel/notes", "~/.ssh/id_rsa", "~/.aws/credentials", "~root/.bash_history",
    "\uff0e\uff0e\uff0f\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fetc\uff0fshadow",  # fullwidth ../../../etc/shadow
    "..\u200b/..\u200b/../etc/shadow", "%2e%2e/%2e%2e/%2e%2e/etc/shadow", "..%2f..%2f..%2fetc%2fshadow",
    "../outside/new", "../../outside",
]


@pytest.mark.parametrize("spelling", OUTSIDE)
def test_every_spelling_of_a_path_outside_is_refused(here: Path, spelling: str) -> None:
    with pytest.raises(InputError, match="outside|system|secret"):
        check_named_path(spelling, "data file", allowed_roots())


@pytest.mark.parametrize("spelling", ["field.f32", "./field.f32", "sub/g.f32", "sub/../field.f32",
                                      "sub//g.f32", "new-out-dir", "sub/new/deeper"])
def test_paths_inside_the_working_directory_are_kept(here: Path, spelling: str) -> None:
    p = check_named_path(spelling, "data file", allowed_roots())
    assert p == Path(os.path.realpath(here / spelling))


def test_an_absolute_path_the_person_wrote_outside_system_folders_is_theirs(here: Path, tmp_path: Path) -> None:
    f = tmp_path / "outside" / "secret.f32"
    assert check_named_path(str(f), "data file", allowed_roots()) == f


def test_allowed_roots_from_the_environment_make_every_other_path_refused(
        here: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = tmp_path / "data"
    extra.mkdir()
    monkeypatch.setenv("PERFSCOUT_ALLOWED_ROOTS", str(extra))
    assert check_named_path(str(extra / "x.f32"), "data file", allowed_roots()) == extra / "x.f32"
    with pytest.raises(InputError, match="outside"):
        check_named_path(str(tmp_path / "outside" / "secret.f32"), "data file", allowed_roots())


def test_the_agent_refuses_such_requests_before_asking_anything(here: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from perfscout.graph.nodes import paths_refusal
    from perfscout.graph.planner import understand_request

    for text in ("evaluate sz3 at abs 1e-3 on ../../../etc/shadow",
                 "evaluate sz3 at abs 1e-3 on ./a/../../../../etc/passwd",
                 "sweep sweep.yaml into ../outside/new"):
        intent = understand_request(text)
        assert "outside" in paths_refusal(intent), (text, intent.data, intent.sweep_out)
    assert paths_refusal(understand_request("evaluate sz3 at abs 1e-3 on field.f32")) == ""


@pytest.mark.parametrize("tail", [".config/hub", ".config/gh/hosts.yml", ".m2/settings.xml", ".git-credentials.bak"])
def test_a_tool_token_file_named_absolute_is_refused_by_its_path(here: Path, tail: str) -> None:
    """Token stores known by their path's tail (hub's ~/.config/hub, gh's hosts.yml) are secrets
    in a request too, not only inside the sandbox; a folder called gh elsewhere is not."""
    home = Path(os.path.expanduser("~"))
    with pytest.raises(InputError, match="names secrets"):
        check_named_path(str(home / tail), "data file", allowed_roots(), absolute_is_theirs=True)
    elsewhere = here / "gh" / "field.raw"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"\0" * 16)
    assert check_named_path(str(elsewhere), "data file", allowed_roots(), absolute_is_theirs=True) == elsewhere.resolve()
