"""An isolated CPU evaluation whose metric kernels the caller has not loaded yet
(perfscout.tools.evaluate._evaluate_in_two_children): the codec runs in a first child
while the caller loads the kernels, the reconstruction comes back through a shared
mapping, and a second child forked from the now-warm caller checks the bound and
measures. The figures are those of one process; a crash, a hang or a runaway
allocation in either child is contained and named."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from perfscout.analysis import streaming
from perfscout.errors import InputError
from perfscout.tools import evaluate as E
from perfscout.tools.evaluate import evaluate, evaluate_full

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import tests.fakes.crashing_codec  # noqa: E402,F401 - registers fake-crash

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

_RECORD_FIELDS = ("status", "bound_ok", "abs_bound", "ratio", "bitrate", "max_abs_err", "max_rel_err", "rmse",
                  "nrmse", "psnr", "snr", "pearson", "ssim", "err_autocorr_lag1", "chunks", "error")


@pytest.fixture
def cold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A caller that has not loaded the compiled kernels, for pairs of any size, on a
    machine where they come from numba's JIT (no library compiled ahead of time: the
    two-children path is for a kernel load that takes long)."""
    from perfscout.analysis import stream_compiled, stream_kernels, stream_native

    monkeypatch.setenv(streaming.ENV_BACKEND, "numba")
    monkeypatch.setenv(stream_native.ENV_NATIVE, "0")
    monkeypatch.setattr(stream_compiled, "K", stream_kernels)
    streaming._warmed.cache_clear()
    yield
    streaming._warmed.cache_clear()


@pytest.fixture
def field() -> np.ndarray:
    z, y, x = np.ogrid[0:8, 0:40, 0:48]
    return (np.sin(x / 7.0) * np.cos(y / 5.0) + 0.1 * z).astype(np.float32)


def test_two_children_give_the_one_process_figures_and_warm_the_caller(cold: None, field: np.ndarray) -> None:
    assert streaming.kernels_pending(field)
    ev = evaluate_full(field, "sz3", "rel", 1e-3, repeats=1, keep_reconstruction=False)
    assert ev.extra["timing_split"]["children"] == 2  # the two-children path ran
    assert not streaming.kernels_pending(field)  # ... and left the kernels loaded here
    here = evaluate_full(field, "sz3", "rel", 1e-3, repeats=1, isolate=False)
    for name in _RECORD_FIELDS:
        assert getattr(ev.result, name) == getattr(here.result, name), name
    assert ev.check == here.check
    assert ev.metrics["err_hist"] == here.metrics["err_hist"]
    assert ev.compressed.data == here.compressed.data and ev.reconstructed is None
    split = ev.extra["timing_split"]
    for key in ("validate_s", "plan_s", "codec_s", "metric_pass_s", "warm_before_fork_s", "fork_s",
                "codec_reply_s", "second_fork_s", "reply_s"):
        assert split[key] >= 0, key
    # warm now: one child, the kernels inherited
    again = evaluate_full(field, "sz3", "rel", 1e-3, repeats=1, keep_reconstruction=False)
    assert "children" not in again.extra["timing_split"] and again.result.max_abs_err == here.result.max_abs_err


def test_the_reconstruction_comes_back_as_an_array_of_its_own(cold: None, field: np.ndarray) -> None:
    ev = evaluate_full(field, "sz3", "abs", 1e-3, repeats=1)
    here = evaluate_full(field, "sz3", "abs", 1e-3, repeats=1, isolate=False)
    assert ev.extra["timing_split"]["children"] == 2
    assert isinstance(ev.reconstructed, np.ndarray) and ev.reconstructed.flags.owndata  # not a view of the mapping
    np.testing.assert_array_equal(ev.reconstructed, here.reconstructed)
    ev.reconstructed += 1  # writable, and the mapping is gone without harm


def test_an_input_the_second_child_cannot_see_is_finished_by_the_codec_child(cold: None, field: np.ndarray) -> None:
    """A strided input is validated into a copy that only the codec child holds: it runs
    the whole evaluation itself (one child's figures, the kernels loaded there)."""
    strided = np.repeat(field, 2, axis=2)[:, :, ::2]
    assert not strided.flags.c_contiguous
    ev = evaluate_full(strided, "sz3", "abs", 1e-3, repeats=1)
    here = evaluate_full(strided, "sz3", "abs", 1e-3, repeats=1, isolate=False)
    assert "children" not in ev.extra["timing_split"]
    assert ev.result.max_abs_err == here.result.max_abs_err and ev.result.ssim == here.result.ssim
    np.testing.assert_array_equal(ev.reconstructed, here.reconstructed)
    x = field.copy()
    x[0, 0, 0] = np.nan  # a non-finite pass-through: the split stays in the codec child too
    r = evaluate(x, "sz3", "abs", 1e-3, repeats=1, nonfinite="passthrough")
    assert r.status == "ok" and r.bound_ok is True


@pytest.mark.parametrize(("behaviour", "signal_name"), [("segfault", "SIGSEGV"), ("abort", "SIGABRT")])
def test_a_crash_in_the_codec_child_is_a_codec_crashed_record(cold: None, field: np.ndarray, behaviour: str,
                                                              signal_name: str) -> None:
    pid = os.getpid()
    r = evaluate(field, "fake-crash", "abs", 1e-3, repeats=1, options={"behaviour": behaviour})
    assert os.getpid() == pid and r.status == "codec_crashed" and signal_name in r.error
    assert "float32(8, 40, 48)" in r.error


def test_a_hang_and_a_runaway_allocation_in_the_codec_child_are_contained(cold: None, field: np.ndarray) -> None:
    r = evaluate(field, "fake-crash", "abs", 1e-3, repeats=1, options={"behaviour": "hang"}, timeout_s=1.5)
    assert r.status == "codec_timeout" and "1.5 s" in r.error
    r = evaluate(field, "fake-crash", "abs", 1e-3, repeats=1, options={"behaviour": "hog"}, memory_limit_mb=512)
    assert r.status in ("error", "codec_crashed") and ("MemoryError" in r.error or "memory" in r.error.lower())


def test_a_crash_in_the_metric_child_keeps_the_codec_run(cold: None, field: np.ndarray,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def dies(*args: object, **kwargs: object) -> None:
        os.abort()

    monkeypatch.setattr(E, "_finish_for_caller", dies)
    ev = evaluate_full(field, "sz3", "abs", 1e-3, repeats=1, keep_reconstruction=False)
    r = ev.result
    assert r.status == "codec_crashed" and "SIGABRT" in r.error and "bound check and metrics" in r.error
    assert r.compress_s > 0 and r.decompress_s > 0 and ev.compressed is not None  # what was measured stays
    assert r.bound_ok is None and r.psnr is None
    assert any("bound check and metrics ran in a child process" in n for n in ev.notes)


def test_bad_input_still_raises_in_the_caller(cold: None, field: np.ndarray) -> None:
    with pytest.raises(InputError, match="rejected its options"):
        evaluate(field, "fake-crash", "abs", 1e-3, options={"crash_below": "abc"})


def test_children_that_replied_are_reaped_without_the_caller_waiting_for_their_exit(field: np.ndarray) -> None:
    """A child that has replied may still be freeing its memory: the call returns, and the
    child is reaped by the next call, at exit, or by reap_children (none left a zombie)."""
    from perfscout.tools import isolate

    isolate.keep_until_exit(field)  # outside a child: nothing is held
    assert isolate._KEPT_UNTIL_EXIT is None

    def big() -> int:
        hold = np.ones(1 << 24, np.float32)  # 64 MiB the child's exit frees
        isolate.keep_until_exit(hold)
        return os.getpid()

    pids = [isolate.run_isolated(big, what="big") for _ in range(3)]
    assert len(set(pids)) == 3 and os.getpid() not in pids
    assert isolate.reap_children(wait=True) == 0
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists()  # reaped: not even a zombie
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


@pytest.mark.parametrize(("mode", "bound"), [("psnr", 60.0), ("ratio", 8.0), ("pw_rel", 1e-2)])
def test_searched_and_pointwise_modes_hand_over_too(cold: None, field: np.ndarray, mode: str, bound: float) -> None:
    codec = "sz2" if mode == "pw_rel" else "sz3"
    x = field + 2.0 if mode == "pw_rel" else field  # no zeros for a point-wise bound
    kept = evaluate_full(x, codec, mode, bound, repeats=1)
    assert kept.extra["timing_split"]["children"] == 2
    if codec == "sz2":
        # SZ2's pw_rel stream is not the same bytes from one process to the next (same field,
        # same bound: 6 fresh processes gave 6 different streams; in one test run it came out
        # 2 bytes shorter in the child, ratio 18.737 against 18.749),
        # so no second run can be the reference: the handed-over record is checked against
        # its own reconstruction and stream instead.
        y = kept.reconstructed.astype(np.float64)
        err = np.abs(x.astype(np.float64) - y)
        assert kept.result.max_abs_err == pytest.approx(err.max(), rel=1e-12)
        assert kept.result.max_pw_rel_err == pytest.approx((err / np.abs(x)).max(), rel=1e-12)
        assert kept.result.ratio == pytest.approx(x.nbytes / kept.compressed.nbytes, rel=1e-12)
        assert kept.result.bound_ok is True and kept.result.status == "ok"
        return
    here = evaluate_full(x, codec, mode, bound, repeats=1, isolate=False)
    for name in _RECORD_FIELDS:
        assert getattr(kept.result, name) == getattr(here.result, name), name
    np.testing.assert_array_equal(kept.reconstructed, here.reconstructed)
    assert kept.extra["search"] == here.extra["search"]


def test_no_room_for_the_hand_over_mapping_falls_back_to_one_child(cold: None, field: np.ndarray,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise OSError(12, "Cannot allocate memory")

    here = evaluate_full(field, "sz3", "abs", 1e-3, repeats=1, isolate=False)
    monkeypatch.setattr(E.mmap, "mmap", refused)
    r = evaluate(field, "sz3", "abs", 1e-3, repeats=1)  # record only: no mapping needed by one child
    assert r.status == "ok" and r.max_abs_err == here.result.max_abs_err
    assert not streaming.kernels_pending(field)  # loaded first, then forked


def test_the_mapping_is_pre_faulted_only_when_memory_allows(cold: None, field: np.ndarray,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert E._available_memory_bytes() > field.nbytes  # /proc/meminfo's MemAvailable, read for real
    asked: list[int] = []

    def tight() -> int:
        asked.append(1)
        return field.nbytes  # room for one field, not two

    monkeypatch.setattr(E, "_available_memory_bytes", tight)
    ev = evaluate_full(field, "sz3", "abs", 1e-3, repeats=1)
    here = evaluate_full(field, "sz3", "abs", 1e-3, repeats=1, isolate=False)
    assert asked and ev.extra["timing_split"]["children"] == 2
    np.testing.assert_array_equal(ev.reconstructed, here.reconstructed)
