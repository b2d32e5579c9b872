"""A GPU evaluation does not outlive itself in device memory (the GPU worker releases CuPy's
pool after each task and expects nothing of the task left in it).

Found on the H200: the first evaluation of a GPU worker kept 210 MB of device arrays (the
field, its reconstruction, the streams) after its end. An import that ran for the first time
inside the evaluation (optuna's, through a lazy module) kept its deferred-import exception,
whose traceback held the evaluation's frames and their locals for the life of the process.
The test plants the same thing without depending on what is installed: a call inside the
evaluation keeps an exception it raised and caught, as such libraries do.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

cp = pytest.importorskip("cupy", reason="CuPy is needed for the GPU evaluation tests")
from perfscout.codecs.gpu_peers import device as D  # noqa: E402
from perfscout.sweep.gpuworker import release_gpu_memory  # noqa: E402
from perfscout.tools.evaluate import evaluate_full  # noqa: E402


def test_a_traceback_a_library_keeps_does_not_keep_the_evaluations_device_arrays(monkeypatch) -> None:
    kept: list[BaseException] = []
    real = D.device_name

    def name_and_keep_an_error() -> str:
        try:
            raise ModuleNotFoundError("No module named 'planted'")
        except ModuleNotFoundError:
            kept.append(sys.exc_info()[1])  # kept to be raised later, traceback and all
        return real()

    monkeypatch.setattr(D, "device_name", name_and_keep_an_error)
    z, y, x = np.mgrid[0:128, 0:128, 0:128].astype(np.float32)
    field = np.sin(x / 9) * np.cos(y / 7) + 0.01 * z
    release_gpu_memory()
    ev = evaluate_full(field, "szp-gpu", "rel", 1e-3, device="cuda", repeats=1, isolate=False,
                       keep_reconstruction=False)
    assert ev.result.status == "ok", ev.result.error
    assert kept and kept[0].__traceback__ is not None  # the planted library did keep it
    del ev
    left = release_gpu_memory()
    assert 0 <= left < field.nbytes, f"{left} bytes of device memory still held after the evaluation ended"
