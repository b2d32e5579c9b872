"""evaluate(): the record, its metrics checked independently, every mode on every CPU
backend, the non-finite policy, statuses, and bad input."""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np
import pytest

from perfscout.codecs import Codec, Compressed, TimedRun, get_codec, list_codecs, register_codec
from perfscout.codecs import registry
from perfscout.datasets import synthetic
from perfscout.errors import CodecError, InputError
from perfscout.state.records import RESULT_COLUMNS
from perfscout.tools import bounds as B
from perfscout.tools.bounds import NonfiniteInputError
from perfscout.tools.evaluate import evaluate, evaluate_full

CPU_CODECS = ("sz3", "sz2", "sz3-h5", "zfp")
MODE_BOUNDS = {"abs": 1e-3, "rel": 1e-3, "pw_rel": 1e-2, "psnr": 70.0, "ratio": 6.0, "fixed_rate": 10.0}
CASES = [(c.id, m) for c in list_codecs() if c.id in CPU_CODECS for m in c.modes]


@pytest.fixture(scope="module")
def grf() -> np.ndarray:
    return synthetic("grf", (48, 64), dtype="f32", seed=3).array


def independent(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    e = y.astype(np.float64) - x.astype(np.float64)
    R = float(x.max()) - float(x.min())
    mse = float(np.mean(e * e))
    psnr = math.inf if mse == 0 else 20 * math.log10(R) - 10 * math.log10(mse)
    return {"max": float(np.abs(e).max()), "psnr": psnr, "R": R}


def test_cases_cover_every_evaluable_mode() -> None:
    assert ("sz2", "pw_rel") in CASES and ("zfp", "fixed_rate") in CASES
    assert {m for _, m in CASES} == set(MODE_BOUNDS)


@pytest.mark.parametrize("codec,mode", CASES)
def test_every_backend_and_mode(grf: np.ndarray, codec: str, mode: str) -> None:
    x = grf if mode != "pw_rel" else grf - grf.min() + 1.0  # pw_rel: no zeros
    bound = MODE_BOUNDS[mode]
    ev = evaluate_full(x, codec, mode, bound, repeats=1, dataset="grf-test")
    r = ev.result
    assert r.status == "ok", r.error
    assert tuple(r.row()) == RESULT_COLUMNS
    assert (r.dataset, r.shape, r.dtype, r.nbytes, r.codec, r.mode, r.bound) == ("grf-test", "48,64", "f32", x.nbytes, codec, mode, bound)
    y = ev.reconstructed
    ind = independent(x, y)
    assert r.max_abs_err == pytest.approx(ind["max"], rel=1e-12)
    assert r.psnr == pytest.approx(ind["psnr"], rel=1e-9)
    assert r.ratio == pytest.approx(x.nbytes / ev.compressed.nbytes)
    assert r.bitrate == pytest.approx(8 * ev.compressed.nbytes / x.size)
    assert r.compress_MBps == pytest.approx(x.nbytes / 1e6 / r.compress_s)
    assert r.decompress_MBps == pytest.approx(x.nbytes / 1e6 / r.decompress_s)
    assert r.codec_version and r.device == "cpu" and r.device_name
    if mode == "fixed_rate":
        assert r.bound_ok is None and r.abs_bound is None
        return
    assert r.bound_ok is True
    if mode == "abs":
        assert r.abs_bound == bound and ind["max"] <= bound
    elif mode == "rel":
        assert r.abs_bound == pytest.approx(bound * ind["R"]) and ind["max"] <= r.abs_bound
    elif mode == "pw_rel":
        assert r.abs_bound is None
        assert np.all(np.abs(y.astype(np.float64) - x) <= bound * np.abs(x.astype(np.float64)))
    elif mode == "psnr":
        assert r.psnr >= bound and ind["max"] <= r.abs_bound
        assert ev.search is not None and ev.search.abs_bound == r.abs_bound
        # in the window [target, target + 0.5 dB], or the search says the control is too coarse
        assert r.psnr <= bound + B.PSNR_WINDOW_DB or ev.search.too_coarse
        assert ev.extra["search"]["window"] == [bound, bound + B.PSNR_WINDOW_DB]
    elif mode == "ratio":
        assert ev.search is not None and ind["max"] <= r.abs_bound
        if ev.search.reached:
            assert abs(r.ratio - bound) <= B.RATIO_TOLERANCE * bound
        else:  # zfp's ratio moves in power-of-two steps; the miss is said, never hidden
            assert "not reached" in r.error and ev.search.too_coarse


def test_record_metadata(grf: np.ndarray) -> None:
    field = synthetic("smooth", (20, 30), dtype="f64", seed=1)
    r = evaluate(field, "sz3", "abs", 1e-4, repeats=2, run_id="R1", task_key="T1", platform_id="P1")
    assert (r.dataset, r.dtype, r.repeats, r.run_id, r.task_key, r.platform_id) == (field.name, "f64", 2, "R1", "T1", "P1")
    stamp = datetime.fromisoformat(r.started_at)
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0
    assert r.error == "" and r.h2d_s is None


@pytest.mark.parametrize("codec", CPU_CODECS)
def test_rel_on_constant_field_is_relative_to_the_magnitude(codec: str) -> None:
    x = np.full((12, 10), -2.5, dtype=np.float32)
    ev = evaluate_full(x, codec, "rel", 1e-3, repeats=1)
    assert ev.result.abs_bound == pytest.approx(2.5e-3)
    assert ev.result.bound_ok is True and ev.result.status == "ok"
    assert np.abs(ev.reconstructed.astype(np.float64) - x).max() <= 2.5e-3
    assert any("constant field" in n for n in ev.notes)


@pytest.mark.parametrize("codec", CPU_CODECS)
def test_rel_on_all_zero_field_is_absolute(codec: str) -> None:
    x = np.zeros((40,), dtype=np.float64)
    ev = evaluate_full(x, codec, "rel", 1e-3, repeats=1)
    assert ev.result.abs_bound == 1e-3 and ev.result.bound_ok is True
    assert np.abs(ev.reconstructed).max() <= 1e-3
    assert any("all-zero" in n for n in ev.notes)


def test_nonfinite_refused_by_default(grf: np.ndarray) -> None:
    x = grf.copy()
    x[3, 4] = np.nan
    with pytest.raises(NonfiniteInputError, match=r"1 non-finite.*\(3, 4\).*passthrough"):
        evaluate(x, "sz3", "rel", 1e-3)
    with pytest.raises(InputError, match="nonfinite policy"):
        evaluate(grf, "sz3", "rel", 1e-3, nonfinite="drop")


@pytest.mark.parametrize("codec", CPU_CODECS)
def test_nonfinite_passthrough_is_lossless(grf: np.ndarray, codec: str) -> None:
    x = grf.copy()
    x[0, 0], x[10, 20], x[47, 63] = np.nan, np.inf, -np.inf
    ev = evaluate_full(x, codec, "rel", 1e-3, repeats=1, nonfinite="passthrough")
    r, y = ev.result, ev.reconstructed
    assert r.status == "ok" and r.bound_ok is True
    bad = ~np.isfinite(x)
    assert np.array_equal(y[bad].view(np.uint32), x[bad].view(np.uint32))
    finite_x = x[~bad].astype(np.float64)
    assert np.abs(y[~bad] - finite_x).max() <= r.abs_bound
    assert r.abs_bound == pytest.approx(1e-3 * (finite_x.max() - finite_x.min()))
    side = sum(len(b) for b in ev.sections().values())
    assert side > 0 and r.ratio == pytest.approx(x.nbytes / (ev.compressed.nbytes + side))
    assert "3 non-finite" in ev.notes[0]


def test_all_nonfinite_is_refused_even_in_passthrough() -> None:
    with pytest.raises(InputError, match="every element is non-finite"):
        evaluate(np.full(5, np.nan, dtype=np.float32), "sz3", "abs", 1e-3, nonfinite="passthrough")


def test_violation_is_reported_with_location() -> None:
    # zfp's accuracy mode cannot hold 1e-3 on values spanning 60 decades in float32.
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(500) * 10.0 ** rng.integers(-30, 30, 500)).astype(np.float32)
    ev = evaluate_full(x, "zfp", "abs", 1e-3, repeats=1)
    r = ev.result
    assert r.status == "bound_violated" and r.bound_ok is False
    assert f"at index {ev.check.worst_index}" in r.error and ev.check.n_violations > 0
    assert r.max_abs_err == pytest.approx(float(np.abs(ev.reconstructed.astype(np.float64) - x).max()))
    # The SZ family stores such values exactly instead: the same input holds its bound.
    assert evaluate(x, "sz3", "abs", 1e-3, repeats=1).bound_ok is True


def test_sz2_pointwise_mode_does_not_keep_zeros_and_says_so() -> None:
    # SZ 2.1's point-wise mode moves exact zeros of mixed-sign data; the check catches it.
    x = np.concatenate([np.linspace(-1, 2, 200), np.zeros(20)]).astype(np.float32)
    r = evaluate(x, "sz2", "pw_rel", 1e-3, repeats=1)
    assert r.status == "bound_violated" and r.bound_ok is False and "point-wise" in r.error
    assert "at index (2" in r.error  # the zeros start at index 200


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"bound": 0.0}, InputError, "bound must be a finite number > 0"),
        ({"bound": -1.0}, InputError, "> 0"),
        ({"bound": math.nan}, InputError, "finite"),
        ({"bound": math.inf}, InputError, "finite"),
        ({"mode": "l2"}, InputError, "unknown mode"),
        ({"codec": "bzip9"}, CodecError, "unknown codec 'bzip9'"),
        ({"mode": "pw_rel", "codec": "zfp"}, CodecError, "does not support mode 'pw_rel'"),
        ({"mode": "fixed_rate", "bound": 8.0}, CodecError, "does not support mode 'fixed_rate'"),
        ({"device": "cuda"}, InputError, "runs on cpu, not cuda"),
        ({"device": "tpu"}, InputError, "device must be one of"),
        ({"repeats": 0}, InputError, "repeats"),
        ({"options": {"level": 9}}, CodecError, "unknown option"),
    ],
)
def test_bad_requests(grf: np.ndarray, kwargs: dict, error: type, match: str) -> None:
    args = {"codec": "sz3", "mode": "rel", "bound": 1e-3, **kwargs}
    with pytest.raises(error, match=match):
        evaluate(grf, args.pop("codec"), args.pop("mode"), args.pop("bound"), **args)


@pytest.mark.parametrize(
    "data,match",
    [
        (np.zeros((0, 3), dtype=np.float32), "empty|non-empty"),
        (np.array(1.0, dtype=np.float32), "0-d|non-empty"),
        (np.arange(12, dtype=np.int32).reshape(3, 4), "int32"),
        (np.zeros((2,) * 5, dtype=np.float32), "axes"),
        ([1.0, 2.0], "NumPy array"),
    ],
)
def test_bad_arrays(data: object, match: str) -> None:
    with pytest.raises(InputError, match=match):
        evaluate(data, "sz3", "abs", 1e-3)


def test_psnr_on_constant_field_is_input_error() -> None:
    with pytest.raises(InputError, match="R is 0"):
        evaluate(np.ones((8, 8), dtype=np.float32), "sz3", "psnr", 60)


def test_gpu_codec_says_where_it_ran(grf: np.ndarray) -> None:
    info = {i.id: i for i in list_codecs()}["szp-gpu"]
    r = evaluate(grf, "szp-gpu", "rel", 1e-3, device="cuda", repeats=1)
    if not info.available:  # the module is missing or broken here: a record, not a crash
        assert r.status == "gpu_unavailable" and r.bound_ok is None and "szp-gpu" in r.error
        return
    from perfscout.codecs.szp import gpu as G

    on_gpu, _ = G.gpu_available()
    assert r.bound_ok is True and r.ratio > 1
    if on_gpu:
        assert (r.status, r.device) == ("ok", "cuda") and r.h2d_s is not None and r.device_name
    else:  # it ran its NumPy reference: the measurement is kept, the status says no GPU
        assert (r.status, r.device) == ("gpu_unavailable", "cpu")
        assert "ran its CPU reference" in r.error
    with pytest.raises(InputError, match="runs on cuda, not cpu"):
        evaluate(grf, "szp-gpu", "rel", 1e-3, device="cpu")


# -- error and self-timing paths, driven by real codecs wrapped in small subclasses --------
class _FailingSZ3(Codec):
    """Real SZ3 compression, then a decode failure: the error must become a record."""

    codec_id, family, native_modes = "test-failing", "sz", ("abs",)

    @classmethod
    def version(cls) -> str:
        return "test"

    def compress(self, array: np.ndarray) -> Compressed:
        return get_codec("sz3", "abs", self.bound).compress(array)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        raise CodecError("simulated decoder failure")


class _SelfTimedSZ3(_FailingSZ3):
    """Times itself like the GPU codec does (TimedRun with H2D/D2H apart)."""

    codec_id = "test-selftimed"

    def decompress(self, compressed: Compressed) -> np.ndarray:
        return get_codec("sz3", "abs", self.bound).decompress(compressed)

    def timed_run(self, array: np.ndarray, repeats: int) -> TimedRun:
        packed = self.compress(array)
        return TimedRun(packed, self.decompress(packed), 0.002, 0.001, h2d_s=0.0005, d2h_s=0.0004, device_name="Test Device")


class _NaNSZ3(_SelfTimedSZ3):
    """Real SZ3 round trip whose decoder then loses every value (NaN everywhere)."""

    codec_id = "test-nan"

    def decompress(self, compressed: Compressed) -> np.ndarray:
        return np.full_like(super().decompress(compressed), np.nan)

    def timed_run(self, array: np.ndarray, repeats: int) -> None:
        return None


@pytest.fixture()
def test_codecs(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "perfscout_test_codecs", sys.modules[__name__])
    registry.register_codec("test-failing", "perfscout_test_codecs:_FailingSZ3")
    registry.register_codec("test-selftimed", "perfscout_test_codecs:_SelfTimedSZ3")
    registry.register_codec("test-nan", "perfscout_test_codecs:_NaNSZ3")


def test_all_nan_reconstruction_keeps_the_measured_record(grf: np.ndarray, test_codecs: None) -> None:
    # Metrics have nothing finite to compare; the verdict and the timings still stand.
    r = evaluate(grf, "test-nan", "abs", 1e-3, repeats=1)
    assert r.status == "bound_violated" and r.bound_ok is False and r.max_abs_err is None
    assert "quality metrics failed" in r.error and "no element is finite" in r.error
    assert r.compress_s is not None and r.decompress_s is not None


def test_codec_failure_becomes_error_record(grf: np.ndarray, test_codecs: None) -> None:
    r = evaluate(grf, "test-failing", "abs", 1e-3, repeats=1)
    assert r.status == "error" and "simulated decoder failure" in r.error
    assert r.bound_ok is None and r.ratio is None and r.codec_version == "test"


def test_codec_timed_run_is_used(grf: np.ndarray, test_codecs: None) -> None:
    r = evaluate(grf, "test-selftimed", "rel", 1e-3, repeats=1)
    assert (r.compress_s, r.decompress_s, r.h2d_s, r.d2h_s, r.device_name) == (0.002, 0.001, 0.0005, 0.0004, "Test Device")
    assert r.compress_MBps == pytest.approx(grf.nbytes / 1e6 / 0.002)
    assert r.status == "ok" and r.bound_ok is True


def test_register_codec_accepts_plugins(test_codecs: None) -> None:
    register_codec("test-failing", "perfscout_test_codecs:_FailingSZ3")
    assert registry.info("test-failing").available


def test_sz2_pointwise_sign_loss_is_reported() -> None:
    # SZ 2.1's point-wise mode reconstructs the leading -1 here as 0; never hidden.
    x = np.ones(45, dtype=np.float32)
    x[0] = -1.0
    r = evaluate(x, "sz2", "pw_rel", 1e-2, repeats=1)
    assert r.status == "bound_violated" and r.bound_ok is False and "index (0,)" in r.error
    assert r.max_abs_err == 1.0


def test_evaluate_and_evaluate_full_share_one_option_list() -> None:
    """evaluate is a thin wrapper: its options are EvaluateOptions, exactly evaluate_full's keywords."""
    import inspect
    import typing

    from perfscout.tools.evaluate import EvaluateOptions, evaluate_full

    params = inspect.signature(evaluate_full).parameters
    keywords = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    # keep_reconstruction is evaluate_full's alone: evaluate returns the record, never the array
    assert keywords == [*typing.get_type_hints(EvaluateOptions), "keep_reconstruction"]
    x = np.linspace(0, 1, 256, dtype=np.float32).reshape(16, 16)
    kw = dict(repeats=1, isolate=False, dataset="ramp", run_id="r", task_key="k")
    short, full = evaluate(x, "sz3", "abs", 1e-3, **kw), evaluate_full(x, "sz3", "abs", 1e-3, **kw).result
    assert (short.dataset, short.run_id, short.task_key, short.repeats) == ("ramp", "r", "k", 1)
    assert short.model_dump(exclude={"started_at", "compress_s", "decompress_s", "compress_MBps", "decompress_MBps"}) == \
        full.model_dump(exclude={"started_at", "compress_s", "decompress_s", "compress_MBps", "decompress_MBps"})
    with pytest.raises(TypeError):
        evaluate(x, "sz3", "abs", 1e-3, bogus=1)  # type: ignore[call-arg]
