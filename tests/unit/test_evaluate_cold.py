"""evaluate() with repeats=1 runs the codec once each way (no warm-up) and says the timing is cold."""

from __future__ import annotations

import numpy as np
import pytest

from perfscout.codecs.registry import codec_class
from perfscout.datasets.synthetic import synthetic
from perfscout.tools.evaluate import evaluate_full


@pytest.mark.parametrize(("repeats", "runs", "cold"), [(1, 1, True), (3, 4, False)])
def test_codec_runs_and_cold_note(monkeypatch, repeats: int, runs: int, cold: bool) -> None:
    cls = codec_class("sz3")
    counts = {"compress": 0, "decompress": 0}
    for name in counts:
        real = getattr(cls, name)

        def counted(self, *a, _real=real, _name=name, **k):
            counts[_name] += 1
            return _real(self, *a, **k)

        monkeypatch.setattr(cls, name, counted)
    x = synthetic("smooth", (16, 32, 32), "f32").array
    ev = evaluate_full(x, "sz3", "rel", 1e-3, repeats=repeats, isolate=False)
    assert ev.result.status == "ok" and ev.result.bound_ok
    assert counts == {"compress": runs, "decompress": runs}
    assert ev.compress_timing.cold is cold and ev.decompress_timing.cold is cold
    assert any(n.startswith("timing is cold") for n in ev.notes) is cold
    assert np.isfinite(ev.result.compress_s) and ev.result.compress_s > 0
