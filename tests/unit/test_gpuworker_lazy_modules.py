"""The GPU worker runs its tasks in one long-lived process: a lazily loaded module first
touched inside a task, whose import keeps an exception (as optuna keeps its deferred-import
errors), would keep the task's frames and their arrays for the life of the worker. The
worker loads every lazy module at start (sweep.gpuworker.load_lazy_modules): planted here
with a real importlib.util.LazyLoader, without CUDA."""

from __future__ import annotations

import gc
import importlib.util
import sys
import weakref
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from perfscout.sweep.gpuworker import PRELOAD, load_lazy_modules

#: A module whose import catches and keeps an ImportError, traceback and all.
KEEPER = """KEPT = []
try:
    import perfscout_test_no_such_module  # noqa: F401
except ImportError as exc:
    KEPT.append(exc)
"""


def _lazy_import(name: str) -> ModuleType:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.loader is not None
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)  # deferred: runs on the first attribute access
    return module


def _task(module: ModuleType) -> weakref.ref:
    field = np.ones(1 << 16)  # the task's field
    assert module.KEPT  # the module's first touch, inside the task
    return weakref.ref(field)


@pytest.fixture
def keepers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names = ["perfscout_test_keeper_a", "perfscout_test_keeper_b", "perfscout_test_keeper_c"]
    for name in names:
        (tmp_path / f"{name}.py").write_text(KEEPER)
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    return names


def test_a_lazy_module_first_touched_in_a_task_keeps_its_field(keepers: list[str]) -> None:
    """The hazard itself (so the next test can fail): without the load at start, the field
    outlives the task."""
    ref = _task(_lazy_import(keepers[0]))
    gc.collect()
    assert ref() is not None
    sys.modules[keepers[0]].KEPT.clear()  # lets it go
    gc.collect()
    assert ref() is None


def test_lazy_modules_loaded_at_the_worker_start_keep_no_task(keepers: list[str]) -> None:
    modules = [_lazy_import(name) for name in keepers[1:]]
    assert all(type(m) is not ModuleType for m in modules)  # still lazy
    assert load_lazy_modules() == {}
    assert all(type(m) is ModuleType and m.KEPT for m in modules)  # loaded, their exceptions kept
    ref = _task(modules[0])
    gc.collect()
    assert ref() is None  # the task's field is gone with the task


def test_a_lazy_module_that_fails_to_load_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "perfscout_test_broken_lazy"
    (tmp_path / f"{name}.py").write_text("raise RuntimeError('cannot load here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    _lazy_import(name)
    failed = load_lazy_modules()
    assert failed == {name: "RuntimeError: cannot load here"}
    sys.modules.pop(name, None)


def test_the_worker_preloads_cupyx_whose_optional_submodules_are_lazy() -> None:
    assert "cupy" in PRELOAD and "cupyx" in PRELOAD
