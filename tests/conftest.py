"""Shared test fixtures.

Real data lives in ``../shared/data`` beside the checkout (never copied into the
project). Tests that need it use the ``shared_data`` fixture, which skips with a
clear message when it is absent. ``gpu`` tests skip cleanly without a CUDA device.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PERFSCOUT_SHARED_DATA", ROOT.parent / "shared" / "data"))

# Hypothesis: no per-example deadline (codecs have uneven first-call costs), fixed
# example counts so CI time is predictable on 2 cores.
settings.register_profile(
    "ci", deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow]
)
# `make test-fast` (HYPOTHESIS_PROFILE=fast): a third of the examples of the properties that
# take the profile's count; a test's own @settings(max_examples=...) keeps its count.
settings.register_profile(
    "fast", deadline=None, max_examples=20, suppress_health_check=[HealthCheck.too_slow]
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
