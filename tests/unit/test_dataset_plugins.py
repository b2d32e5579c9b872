"""Synthetic-field generators from ``perfscout.datasets`` entry points of installed distributions
(tests/fixtures/plugins/perfscout-plugin-fields, pip-installed into a temporary target)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

from perfscout.errors import InputError
from tests.conftest import install_distribution

# the module (perfscout.datasets.synthetic is also the name of its function there)
S = importlib.import_module("perfscout.datasets.synthetic")


@pytest.fixture(scope="module")
def fields_dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_distribution("perfscout-plugin-fields", tmp_path_factory.mktemp("fields"))


@pytest.fixture()
def with_fields(fields_dist: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(fields_dist))
    S.refresh_generators()
    yield
    monkeypatch.undo()
    S.refresh_generators()
    sys.modules.pop("perfscout_plugin_fields", None)


def test_an_installed_generator_makes_fields_like_a_builtin(with_fields) -> None:
    # callable generators load (their bugs show when they run); names sorted after the built-ins
    assert S.synthetic_kinds() == (*S.SYNTHETIC_KINDS, "raises", "ramp", "wrong-shape")
    field = S.parse_synthetic("ramp:16,32:f64:seed=3")
    assert field.array.shape == (16, 32) and field.array.dtype == np.float64
    assert np.array_equal(field.array, S.parse_synthetic("ramp:16,32:f64:seed=3").array)  # deterministic by seed
    assert not np.array_equal(field.array, S.parse_synthetic("ramp:16,32:f64").array)
    assert field.description == "A linear ramp over the flattened field plus 1e-3 noise. (plug-in from perfscout-plugin-fields 0.3.0)"
    assert S.synthetic("ramp", (8, 8)).array.dtype == np.float32

    from perfscout.tools.evaluate import evaluate

    result = evaluate(field, "sz3", "rel", 1e-3, repeats=1, isolate=False)
    assert result.bound_ok is True and result.dataset.startswith("ramp:16,32")


def test_broken_generators_are_listed_and_their_bugs_are_input_errors(with_fields) -> None:
    failed = {f.id: f.kind for f in S.generator_listing().failed}
    assert failed == {"not-callable": "not_callable", "grf": "shadows_builtin", "Ramp2": "invalid_id"}
    assert {p.id for p in S.generator_listing().loaded} == {"ramp", "wrong-shape", "raises"}
    with pytest.raises(InputError, match=r"'wrong-shape' returned float32\(62,\), not a real array of shape \(7, 9\)"):
        S.synthetic("wrong-shape", (7, 9))
    with pytest.raises(InputError, match="'raises' failed: ValueError: this generator only makes 7-D fields"):
        S.synthetic("raises", (4, 4))
    # the built-in grf is still the built-in (the plug-in's "grf" is the ramp)
    assert S.describe_kind("grf").startswith("Gaussian random field")


def test_without_the_distribution_the_kind_is_unknown(fields_dist: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    S.refresh_generators()
    assert S.synthetic_kinds() == S.SYNTHETIC_KINDS
    with pytest.raises(InputError, match="unknown synthetic kind 'ramp'; known: grf, smooth, grayscott"):
        S.parse_synthetic("ramp:8,8")


def test_perfscout_datasets_list_shows_generator_plugins(fields_dist: Path) -> None:
    import json
    import os
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(fields_dist), COLUMNS="200")
    cmd = [sys.executable, "-m", "perfscout", "datasets", "list"]
    doc = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=120,
                                    check=True).stdout)
    assert doc["generators"]["group"] == "perfscout.datasets"
    assert [g["id"] for g in doc["generators"]["loaded"]] == ["raises", "ramp", "wrong-shape"]
    text = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    assert "synthetic kind ramp from perfscout-plugin-fields 0.3.0" in text
    assert "generator grf from perfscout-plugin-fields 0.3.0 not used (shadows_builtin)" in text
