"""Codec plug-ins found through ``perfscout.codecs`` entry points of installed distributions.

The distributions under ``tests/fixtures/plugins/`` are installed for real (``pip install
--target`` into a temporary folder, from a copy so that no build output lands in the
tree); putting that folder on ``sys.path`` is what makes ``importlib.metadata`` see their
``.dist-info``, exactly as after a user's ``pip install``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfscout.codecs import registry
from perfscout.errors import CodecError, CodecUnavailable
from tests.conftest import install_distribution

DISTRIBUTIONS = ("perfscout-plugin-quantize", "perfscout-plugin-broken", "perfscout-plugin-rival")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each fixture distribution pip-installed into a target folder of its own."""
    root = tmp_path_factory.mktemp("plugins")
    return {name: install_distribution(name, root) for name in DISTRIBUTIONS}


@pytest.fixture()
def on_path(installed: dict[str, Path], monkeypatch: pytest.MonkeyPatch):
    """Put some of the installed distributions on sys.path and rescan."""

    def use(*names: str) -> None:
        for name in names:
            monkeypatch.syspath_prepend(str(installed[name]))
        registry.refresh()

    yield use
    monkeypatch.undo()  # sys.path back before the rescan, so no plug-in stays cached
    registry.refresh()
    for name in [m for m in sys.modules if m.startswith("perfscout_plugin_")]:
        del sys.modules[name]


def _failures() -> dict[str, registry.PluginFailure]:
    return {f.id: f for f in registry.plugin_listing().failed}


def test_an_installed_plugin_is_found_listed_and_evaluated(on_path) -> None:
    assert "quantize" not in registry.codec_ids()
    on_path("perfscout-plugin-quantize")

    listing = registry.plugin_listing()
    assert [(p.id, p.distribution, p.value) for p in listing.loaded] == [
        ("quantize", "perfscout-plugin-quantize 0.1.0", "perfscout_plugin_quantize:QuantizeCodec")]
    assert listing.failed == []
    assert registry.codec_ids()[: len(registry._BUILTIN)] == list(registry._BUILTIN)  # built-ins first
    info = registry.info("quantize")
    assert (info.source, info.distribution, info.available) == ("plugin", "perfscout-plugin-quantize 0.1.0", True)
    assert info.modes == ("abs", "rel", "psnr", "ratio")  # rel/psnr/ratio derived from abs
    assert registry.info("sz3").source == "builtin"

    # the plug-in goes through perfscout's own evaluation: decompressed and bound-checked
    from perfscout.tools.evaluate import evaluate

    x = np.linspace(0.0, 1.0, 4096, dtype=np.float32).reshape(64, 64) ** 2
    result = evaluate(x, "quantize", "rel", 1e-3, repeats=1, isolate=False)
    assert result.bound_ok is True and result.ratio > 1
    assert result.max_abs_err <= 1e-3 * float(x.max() - x.min())
    codec = registry.get_codec("quantize", "abs", 1e-2)
    assert np.max(np.abs(codec.decompress(codec.compress(x)) - x)) <= 1e-2


def test_a_plugin_is_gone_after_its_distribution_leaves_sys_path(installed, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(installed["perfscout-plugin-quantize"]))
    registry.refresh()
    assert "quantize" in registry.codec_ids()
    monkeypatch.undo()
    assert "quantize" in registry.codec_ids(), "the scan is cached until refresh()"
    registry.refresh()
    assert "quantize" not in registry.codec_ids()
    with pytest.raises(CodecError, match="unknown codec 'quantize'"):
        registry.get_codec("quantize")


def test_broken_plugins_are_listed_with_the_reason_and_never_break_perfscout(on_path) -> None:
    on_path("perfscout-plugin-broken")
    failed = _failures()
    assert set(failed) == {"explodes", "exits", "absent", "not-a-codec", "mislabelled", "sz3", "../escape"}
    assert all(f.distribution == "perfscout-plugin-broken 0.2.0" for f in failed.values())
    assert failed["explodes"].kind == "import_error"
    assert "RuntimeError: the plug-in's native library failed to initialise" in failed["explodes"].reason
    assert failed["absent"].kind == "import_error"
    assert "perfscout_plugin_broken_not_installed" in failed["absent"].reason
    assert failed["not-a-codec"].kind == "not_a_codec" and "not a subclass" in failed["not-a-codec"].reason
    assert failed["mislabelled"].kind == "id_mismatch" and "'something-else'" in failed["mislabelled"].reason
    assert failed["sz3"].kind == "shadows_builtin" and "built-in is used" in failed["sz3"].reason
    assert failed["exits"].kind == "import_error" and "SystemExit: perfscout_plugin_broken.exits" in failed["exits"].reason
    assert failed["../escape"].kind == "invalid_id"
    # a module that asks the registry while it is imported loads, and saw the built-ins
    assert [p.id for p in registry.plugin_listing().loaded] == ["asks-registry"]
    from perfscout_plugin_broken.asks import SEEN_WHILE_IMPORTED

    assert SEEN_WHILE_IMPORTED[: len(registry._BUILTIN)] == list(registry._BUILTIN)

    # the built-in wins; the refused plug-ins are no codecs, and asking for one says why
    from perfscout.codecs.sz3 import SZ3Codec

    assert registry._load("sz3") is SZ3Codec and registry.source_of("sz3") == "builtin"
    ids = [c.id for c in registry.list_codecs() if c.source != "registered"]  # not tests.fakes
    assert ids == [*registry._BUILTIN, "asks-registry"]
    with pytest.raises(CodecUnavailable, match="plug-in from perfscout-plugin-broken 0.2.0: importing"):
        registry.get_codec("explodes")


def test_two_distributions_claiming_one_id_are_both_refused(on_path) -> None:
    on_path("perfscout-plugin-quantize", "perfscout-plugin-rival")
    failed = [f for f in registry.plugin_listing().failed if f.id == "quantize"]
    assert sorted(f.distribution for f in failed) == ["perfscout-plugin-quantize 0.1.0", "perfscout-plugin-rival 1.0.0"]
    assert all(f.kind == "duplicate" and "none is used" in f.reason for f in failed)
    assert "quantize" not in registry.codec_ids()


def test_refresh_can_ignore_installed_plugins_and_registrations(on_path) -> None:
    on_path("perfscout-plugin-quantize")
    registry.register_codec("fake-crash", "tests.fakes.crashing_codec:CrashingCodec")
    registry.refresh(registered={}, entry_points=False)
    assert registry.codec_ids() == list(registry._BUILTIN)
    assert registry.plugin_listing().enabled is False
    registry.refresh()
    assert "quantize" in registry.codec_ids()


def test_registrations_cannot_replace_a_builtin_and_win_over_a_plugin(on_path) -> None:
    with pytest.raises(CodecError, match="one of perfscout's own codecs"):
        registry.register_codec("sz3", "tests.fakes.crashing_codec:CrashingCodec")
    on_path("perfscout-plugin-quantize")
    registry.register_codec("quantize", "tests.fakes.crashing_codec:CrashingCodec")
    assert registry.source_of("quantize") == "registered"
    assert registry.registered_codecs()["quantize"] == "tests.fakes.crashing_codec:CrashingCodec"
    assert registry.codec_ids().count("quantize") == 1
    registry.unregister_codec("quantize")
    assert registry.source_of("quantize") == "plugin"
    with pytest.raises(CodecError, match="import path must look like"):
        registry.refresh(registered={"x": "no_colon"})
    for bad in ("", "../x", "a b", "x" * 65, None):
        with pytest.raises(CodecError, match="a codec id is"):
            registry.register_codec(bad, "m:C")  # type: ignore[arg-type]


def test_perfscout_codecs_lists_plugins_with_their_distribution_and_failures(installed) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(installed["perfscout-plugin-quantize"]), str(installed["perfscout-plugin-broken"])]))
    cmd = [sys.executable, "-m", "perfscout", "codecs"]
    proc = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    row = next(r for r in doc["codecs"] if r["id"] == "quantize")
    assert (row["source"], row["distribution"], row["available"]) == ("plugin", "perfscout-plugin-quantize 0.1.0", True)
    assert [p["id"] for p in doc["plugins"]["loaded"]] == ["asks-registry", "quantize"]
    assert {f["id"]: f["kind"] for f in doc["plugins"]["failed"]} == {
        "absent": "import_error", "explodes": "import_error", "exits": "import_error", "mislabelled": "id_mismatch",
        "not-a-codec": "not_a_codec", "sz3": "shadows_builtin", "../escape": "invalid_id"}

    text = subprocess.run(cmd, capture_output=True, text=True, env={**env, "COLUMNS": "200"}, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "plug-in quantize from perfscout-plugin-quantize 0.1.0" in text.stdout
    assert "plug-in explodes from perfscout-plugin-broken 0.2.0 not used (import_error)" in text.stdout
