"""Shared test fixtures.

Real data lives in ``../shared/data`` beside the checkout (never copied into the
project). Tests that need it use the ``shared_data`` fixture, which skips with a
clear message when it is absent. ``gpu`` tests skip cleanly without a CUDA device.

Every test runs hermetically, whoever runs it and wherever (see :func:`_pin_environment`
and :func:`_clean_checkout_cwd`): the terminal width, colour, locale and time zone are
pinned, the user's own perfscout settings and home are set aside, and each test's working
directory is a fresh folder that shows the checkout's tracked files only, so what a person
made in the checkout (``runs/quick`` from the README's tour, a saved field) is invisible
and what a test writes through a relative path lands in its own folder.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PERFSCOUT_SHARED_DATA", ROOT.parent / "shared" / "data"))

#: What the tests see whatever the terminal or shell: rich reads COLUMNS when a Console is
#: made (the CLI's consoles are made at import), and wraps a message at that width; colour
#: forced on (FORCE_COLOR, a TTY override) would put escape codes in captured output.
PINNED_ENV = {"COLUMNS": "200", "LINES": "50", "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "TZ": "UTC"}
UNSET_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR_FORCE", "LANGUAGE",
             # a user's own perfscout settings would change what a run plans, where it
             # checkpoints and how it judges noise
             "PERFSCOUT_PLANNER", "PERFSCOUT_CHECKPOINT_URL", "PERFSCOUT_NOISE_THRESHOLD",
             "PERFSCOUT_MAX_STEPS", "PERFSCOUT_COMPLETE", "PERFSCOUT_ALLOWED_ROOTS")
UNSET_PREFIXES = ("PERFSCOUT_LLM_",)


def _pin_environment() -> Path:
    """Pin the process environment (inherited by every child a test starts) before any test
    module imports perfscout's CLI; the home every test gets unless it asks for its own
    (``perfscout_home``) is a fresh folder of this session, never the user's."""
    for name in UNSET_ENV:
        os.environ.pop(name, None)
    for name in [n for n in os.environ if n.startswith(UNSET_PREFIXES)]:
        del os.environ[name]
    os.environ.update(PINNED_ENV)
    time.tzset()
    home = Path(tempfile.mkdtemp(prefix="perfscout-test-home-"))
    os.environ["PERFSCOUT_HOME"] = str(home)
    return home


SESSION_HOME = _pin_environment()


def _fault_dump_to_own_stderr() -> None:
    """In every forked child: pytest's faulthandler plugin writes to a copy of the real
    stderr that it keeps around its capture, and a child forked from pytest inherits that
    handler, so each deliberate crash (the crash-containment tests, fake or real codec)
    printed "Fatal Python error" and every loaded extension module into the test run's
    output. Re-pointed at the child's own fd 2, the dump goes where the child's other output
    goes (pytest's capture: shown with a failing test only, or a sweep child's log, which it
    re-points itself); the parent still sees and asserts the signal."""
    if faulthandler.is_enabled():
        faulthandler.enable(file=2)


os.register_at_fork(after_in_child=_fault_dump_to_own_stderr)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(SESSION_HOME, ignore_errors=True)


def _tracked_top_level() -> list[str]:
    """The checkout's top-level names that git tracks (a tour's ``runs/`` is not one); without
    git (an unpacked archive), every name but the ones a person or a build makes."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=60,
                             check=True).stdout.decode("utf-8", "surrogateescape")
        names = {f.split("/", 1)[0] for f in out.split("\0") if f}
        if names:
            return sorted(names)
    except (OSError, subprocess.SubprocessError):
        pass
    made = {"runs", "build", "dist", ".venv", ".git", ".pytest_cache", ".hypothesis"}
    return sorted(p.name for p in ROOT.iterdir() if p.name not in made and not p.name.endswith(".egg-info"))


TRACKED = _tracked_top_level()


def _clean_view(folder: Path) -> Path:
    for name in TRACKED:
        if (ROOT / name).exists():
            (folder / name).symlink_to(ROOT / name)
    return folder


@pytest.fixture(scope="session", autouse=True)
def _clean_session_cwd(tmp_path_factory: pytest.TempPathFactory):
    """The same for module- and session-scoped fixtures, which are set up before a test's own
    folder exists."""
    before = os.getcwd()
    os.chdir(_clean_view(tmp_path_factory.mktemp("session-cwd")))
    yield
    os.chdir(before)


@pytest.fixture(autouse=True)
def _clean_checkout_cwd(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test starts in its own folder (not ``tmp_path``, which stays the test's own) that
    links the checkout's tracked top-level entries: ``examples/sweep_quick.yaml`` and
    ``tests/fixtures/...`` read as from the checkout, an untracked ``runs/quick`` is not there,
    and ``runs/...`` written by a test lands here."""
    cwd = _clean_view(tmp_path_factory.mktemp("cwd"))
    monkeypatch.chdir(cwd)
    return cwd

# Hypothesis: no per-example deadline (codecs have uneven first-call costs), fixed
# example counts so CI time is predictable on 2 cores.
# The example database stays in the checkout's .hypothesis/ whatever folder a test runs in.
_EXAMPLES = DirectoryBasedExampleDatabase(str(ROOT / ".hypothesis" / "examples"))
settings.register_profile(
    "ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow], database=_EXAMPLES
)
# `make test-fast` (HYPOTHESIS_PROFILE=fast): a third of the examples of the properties that
# take the profile's count; a test's own @settings(max_examples=...) keeps its count.
settings.register_profile(
    "fast", deadline=None, max_examples=20, suppress_health_check=[HealthCheck.too_slow], database=_EXAMPLES
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: The real fields described in ../shared/data/README.md: file -> (shape, dtype).
SHARED_FIELDS = {
    "vorticity.512_512": ((512, 512), np.float32),
    "vorticity.128_128_41": ((41, 128, 128), np.float32),
    "999x999.float": ((999, 999), np.float32),
    "const32x32x59.float": ((59, 32, 32), np.float32),
}


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ../shared/data, or skip with a clear reason."""
    if not (SHARED_DATA / "vorticity.512_512").is_file():
        pytest.skip(f"real fields not found at {SHARED_DATA} (set PERFSCOUT_SHARED_DATA)")
    return SHARED_DATA


def load_shared_field(name: str) -> np.ndarray:
    shape, dtype = SHARED_FIELDS[name]
    return np.fromfile(SHARED_DATA / name, dtype=np.dtype(dtype).newbyteorder("<")).reshape(shape)


@pytest.fixture(scope="session")
def shared_fields(shared_data: Path) -> dict[str, np.ndarray]:
    """All four real fields, loaded once per session."""
    return {name: load_shared_field(name) for name in SHARED_FIELDS}


def _gpu_available() -> bool:
    try:
        import cupy  # noqa: F401

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # any import/driver failure means "no GPU here"
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _gpu_available():
        return
    skip_gpu = pytest.mark.skip(reason="no CUDA device with CuPy on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


PLUGIN_FIXTURES = ROOT / "tests" / "fixtures" / "plugins"


def install_distribution(name: str, root: Path) -> Path:
    """``pip install --target`` the distribution ``tests/fixtures/plugins/NAME`` (real
    metadata, entry points included) into a folder under ``root``; return that folder.
    It builds from a copy, so no build output lands in the tree."""
    import shutil
    import subprocess
    import sys

    source = shutil.copytree(PLUGIN_FIXTURES / name, root / "src" / name)
    target = root / "site" / name
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr  # setuptools comes with the test extra
    assert list(target.glob("*.dist-info")), f"pip left no metadata for {name} in {target}"
    return target


@pytest.fixture()
def perfscout_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated PERFSCOUT_HOME for tests that write runs or checkpoints."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("PERFSCOUT_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def _codec_registry_isolated():
    """A plug-in codec one test registers (a sweep spec's ``plugins:``, the crashing fake it
    imports in-process) must not leak into the next: a later "every installed CPU codec" run
    would otherwise call a codec that aborts the test process. The registry's public
    ``refresh`` puts back the registrations found before the test and forgets the scan of
    installed plug-ins (a test may have put a distribution on sys.path)."""
    import sys

    from perfscout.codecs import registry

    known = registry.registered_codecs()
    yield
    registry.refresh(registered=known)
    # Importing a plug-in registers it; forget the module so the next import registers again.
    for name in [m for m in sys.modules if m.startswith("tests.fakes")]:
        del sys.modules[name]


@pytest.fixture()
def builtin_codecs_only():
    """Only perfscout's own codecs: test plug-ins (``tests.fakes``) registered when their
    modules were imported at collection, and installed ``perfscout.codecs`` entry points,
    are hidden for this test (e.g. from the demo, which runs every installed CPU codec)."""
    from perfscout.codecs import registry

    known = registry.registered_codecs()
    registry.refresh(registered={}, entry_points=False)
    yield
    registry.refresh(registered=known)
