"""Evaluate one codec on one array: compress, decompress, verify, measure, record.

``evaluate`` returns the stable :class:`~perfscout.state.records.CompressionResult`;
``evaluate_full`` also returns what the record has no column for (the bound check's
worst index, timing spreads, the search trials, the compressed stream itself).

Bad input (unknown codec or mode, impossible bound, empty/0-d/non-float array,
non-finite values under the ``refuse`` policy, a CPU codec asked to run on CUDA)
raises a :class:`~perfscout.errors.PerfscoutError` before anything is measured. A
failure *while running* the codec becomes a record with ``status="error"`` (or
``gpu_unavailable`` / ``gpu_out_of_memory``) and the message, so a sweep loses nothing.
Times are medians over ``repeats`` after one warm-up (the codec's own ``timed_run``
when it has one, e.g. CUDA events on the GPU); MB/s = nbytes / 1e6 / median seconds.
Compression timing covers the codec only: the non-finite split/restore is not timed.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import numpy as np

from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.registry import codec_class, evaluable_modes
from perfscout.errors import CodecError, CodecUnavailable, InputError, PerfscoutError
from perfscout.state.records import CompressionResult
from perfscout.tools import bounds as B

DEVICES = ("cpu", "cuda")
_DTYPE_NAMES = {"float32": "f32", "float64": "f64"}


@dataclass
class Evaluation:
    """A record plus the detail behind it."""

    result: CompressionResult
    check: B.BoundCheck | None = None
    compressed: Compressed | None = None
    reconstructed: np.ndarray | None = None  # non-finite values restored
    nonfinite: B.NonfiniteSplit | None = None
    search: B.SearchOutcome | None = None
    compress_timing: Any = None  # analysis.timing.TimingStats (None when the codec timed itself)
    decompress_timing: Any = None
    metrics: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def sections(self) -> dict[str, bytes]:
        """Side data stored beside the codec stream (non-finite pass-through)."""
        return self.nonfinite.sections() if self.nonfinite is not None and self.nonfinite.count else {}


@lru_cache(maxsize=1)
def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _as_array(data: Any) -> tuple[np.ndarray, str]:
    """(array, dataset name) from an ndarray or a datasets.Field."""
    if isinstance(data, np.ndarray):
        return data, ""
    array = getattr(data, "array", None)
    if isinstance(array, np.ndarray):
        return array, str(getattr(data, "name", ""))
    raise InputError(f"data must be a NumPy array or a datasets.Field, got {type(data).__name__}")


def _validated(array: np.ndarray, nonfinite: str) -> np.ndarray:
    from perfscout.datasets import validate_array

    if nonfinite not in B.NONFINITE_POLICIES:
        raise InputError(f"nonfinite policy must be one of {', '.join(B.NONFINITE_POLICIES)}, got {nonfinite!r}")
    if array.ndim == 0 or array.size == 0:
        raise InputError(f"need a non-empty array with at least one axis, got shape {array.shape}")
    if array.dtype.name not in _DTYPE_NAMES:
        raise InputError(f"dtype {array.dtype} is not supported; use float32 (f32) or float64 (f64)")
    if nonfinite == "refuse":
        B.refuse_nonfinite(array)
    elif B.find_nonfinite(array)[0] == array.size:
        raise InputError("every element is non-finite: there is nothing for a codec to compress")
    return validate_array(array, allow_nonfinite=True)  # native byte order, C-contiguous


def _codec_class_for(codec: str, mode: str, device: str) -> type[Codec]:
    if device not in DEVICES:
        raise InputError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    cls = codec_class(codec)  # CodecError (unknown) / CodecUnavailable propagate
    if cls.device != device:
        raise InputError(f"codec {codec!r} runs on {cls.device}, not {device}; pick a {device} codec or --device {cls.device}")
    if mode not in evaluable_modes(cls):
        raise CodecError(
            f"codec {codec!r} does not support mode {mode!r}; it supports {', '.join(evaluable_modes(cls))}"
        )
    return cls


def _failure_status(exc: BaseException) -> str:
    name = type(exc).__name__.lower()
    if "outofmemory" in name or "out of memory" in str(exc).lower():
        return "gpu_out_of_memory"
    return "error"


def evaluate(
    data: Any,
    codec: str,
    mode: str,
    bound: float,
    *,
    device: str = "cpu",
    repeats: int = 3,
    dataset: str | None = None,
    nonfinite: str = "refuse",
    options: dict[str, Any] | None = None,
    run_id: str = "",
    task_key: str = "",
    platform_id: str = "",
) -> CompressionResult:
    """Compress ``data`` with ``codec`` in ``mode`` at ``bound``; verify; time; one record."""
    return evaluate_full(
        data, codec, mode, bound, device=device, repeats=repeats, dataset=dataset,
        nonfinite=nonfinite, options=options, run_id=run_id, task_key=task_key,
        platform_id=platform_id,
    ).result


def evaluate_full(
    data: Any,
    codec: str,
    mode: str,
    bound: float,
    *,
    device: str = "cpu",
    repeats: int = 3,
    dataset: str | None = None,
    nonfinite: str = "refuse",
    options: dict[str, Any] | None = None,
    run_id: str = "",
    task_key: str = "",
    platform_id: str = "",
) -> Evaluation:
    """Like :func:`evaluate`, returning the :class:`Evaluation` with the detail."""
    started_at = _now()
    array, field_name = _as_array(data)
    bound = B.check_mode_bound(mode, bound)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise InputError(f"repeats must be an integer >= 1, got {repeats!r}")
    array = _validated(array, nonfinite)
    record = CompressionResult(
        run_id=run_id, task_key=task_key, dataset=dataset or field_name or "array",
        shape=",".join(str(s) for s in array.shape), dtype=_DTYPE_NAMES[array.dtype.name],
        nbytes=int(array.nbytes), codec=codec, device=device, mode=mode, bound=bound,
        repeats=repeats, started_at=started_at, platform_id=platform_id,
        device_name=cpu_name() if device == "cpu" else "",
    )
    try:
        cls = _codec_class_for(codec, mode, device)
    except CodecUnavailable as exc:
        if device != "cuda":
            raise
        record.status, record.error = "gpu_unavailable", str(exc)
        return Evaluation(result=record)
    record.codec_version = cls.version()
    opts = dict(options or {})

    split = B.split_nonfinite(array) if nonfinite == "passthrough" and B.find_nonfinite(array)[0] else None
    work = split.filled if split is not None else array
    side_nbytes = split.side_nbytes if split is not None else 0
    ev = Evaluation(result=record, nonfinite=split)
    if split is not None:
        ev.notes.append(f"{split.count} non-finite value(s) passed through losslessly ({side_nbytes} bytes beside the stream)")

    def make(codec_mode: str, codec_bound: float) -> Codec:
        return cls(codec_mode, codec_bound, **opts)  # bad options raise CodecError: bad input

    # -- resolve the mode into what the codec runs and what is verified ----------------
    abs_bound: float | None = None
    pw_rel_bound: float | None = None
    if mode == "abs":
        runner, abs_bound = make("abs", bound), bound
    elif mode == "rel":
        ref, note = B.rel_reference(work)
        abs_bound = bound * ref
        if note:
            ev.notes.append(note)
        use_native = "rel" in cls.native_modes and not note
        runner = make("rel", bound) if use_native else make("abs", abs_bound)
    elif mode == "pw_rel":
        runner, pw_rel_bound = make("pw_rel", bound), bound
    elif mode == "fixed_rate":
        runner = make("fixed_rate", bound)
    else:
        make("abs", 1.0)  # options are checked before the search spends time
        try:
            if mode == "psnr":
                ev.search = B.search_psnr(
                    work, bound, lambda eb: make("abs", eb).compress(work),
                    lambda c: make("abs", c.bound).decompress(c),
                )
            else:
                ev.search = B.search_ratio(
                    work, bound, lambda eb: make("abs", eb).compress(work), side_nbytes=side_nbytes
                )
        except PerfscoutError as exc:
            if isinstance(exc, InputError):
                raise
            record.status, record.error = "error", f"{mode} search failed: {exc}"
            return ev
        except Exception as exc:  # noqa: BLE001 - a backend failure is a result, not a crash
            record.status, record.error = _failure_status(exc), f"{mode} search failed: {type(exc).__name__}: {exc}"
            return ev
        abs_bound = ev.search.abs_bound
        runner = make("abs", abs_bound)
        ev.notes.append(
            f"{mode} search: {ev.search.iterations} trial(s), achieved {ev.search.achieved:.6g} "
            f"(target {bound:g}) at abs bound {abs_bound:.6g}"
        )
    record.abs_bound = abs_bound

    # -- run and time ---------------------------------------------------------------
    try:
        timed = runner.timed_run(work, repeats)
        if timed is not None:
            compressed, recon = timed.compressed, np.asarray(timed.reconstructed)
            record.compress_s, record.decompress_s = timed.compress_s, timed.decompress_s
            record.h2d_s, record.d2h_s = timed.h2d_s, timed.d2h_s
            record.device_name = timed.device_name or record.device_name
        else:
            from perfscout.analysis.timing import time_callable

            ev.compress_timing, compressed = time_callable(lambda: runner.compress(work), repeats=repeats)
            ev.decompress_timing, recon = time_callable(lambda: runner.decompress(compressed), repeats=repeats)
            record.compress_s = ev.compress_timing.median_s
            record.decompress_s = ev.decompress_timing.median_s
    except PerfscoutError as exc:
        record.status, record.error = "error", str(exc)
        return ev
    except Exception as exc:  # noqa: BLE001 - a backend failure is a result, not a crash
        record.status, record.error = _failure_status(exc), f"{codec} failed: {type(exc).__name__}: {exc}"
        return ev
    for name in ("compress", "decompress"):
        secs = getattr(record, f"{name}_s")
        if secs and secs > 0:
            setattr(record, f"{name}_MBps", record.nbytes / 1e6 / secs)

    # A CUDA codec may fall back to its CPU reference (no GPU, no CuPy): the record then
    # says where it really ran, and the status says the GPU measurement did not happen.
    gpu_fallback = ""
    ran_on = str((compressed.meta or {}).get("device", cls.device))
    if device == "cuda" and ran_on != "cuda":
        reason = str((compressed.meta or {}).get("reason", "")) or "the codec ran on the CPU"
        gpu_fallback = f"gpu_unavailable: {codec} ran its CPU reference instead ({reason})"
        record.device, record.device_name = "cpu", cpu_name()
    elif device == "cuda" and not record.device_name:
        record.device_name = str((compressed.meta or {}).get("device_name", ""))

    if recon.shape != work.shape or recon.dtype != work.dtype:
        record.status = "error"
        record.error = f"{codec} returned {recon.dtype}{recon.shape} for {work.dtype}{work.shape}"
        return ev
    ev.compressed = compressed

    # -- verify element by element -------------------------------------------------------
    if split is not None:
        recon = B.restore_nonfinite(recon, split)
    ev.reconstructed = recon
    finite = array if split is None else np.where(split.mask, split.fill_value, array).astype(array.dtype)
    check_recon = recon if split is None else np.where(split.mask, finite, recon).astype(array.dtype)
    check = B.verify_bound(finite, check_recon, abs_bound=abs_bound, pw_rel_bound=pw_rel_bound)
    if split is not None and not np.array_equal(
        recon[split.mask].view(f"u{array.dtype.itemsize}"), split.values.view(f"u{array.dtype.itemsize}")
    ):
        raise AssertionError("non-finite pass-through did not restore the exact bit patterns")
    ev.check = check

    from perfscout.analysis.metrics import quality_metrics

    messages = [check.message] if check.message else []
    try:
        metrics = quality_metrics(array, recon, compressed.nbytes + side_nbytes)
    except ArithmeticError as exc:
        # Extreme magnitudes can overflow a metric's float64 intermediates; the bound
        # verdict above stands on its own, so keep it and say what is missing.
        metrics = {}
        messages.append(f"quality metrics failed: {type(exc).__name__}: {exc}")
    ev.metrics = metrics
    for key in ("ratio", "bitrate", "max_abs_err", "max_rel_err", "max_pw_rel_err", "rmse",
                "nrmse", "psnr", "snr", "pearson", "ssim", "err_autocorr_lag1"):
        value = metrics.get(key)
        setattr(record, key, None if value is None else float(value))
    record.bound_ok, record.status = check.bound_ok, check.status  # type: ignore[assignment]
    if gpu_fallback:
        messages.insert(0, gpu_fallback)
        if record.status == "ok":
            record.status = "gpu_unavailable"
    if mode == "psnr" and ev.search is not None and record.psnr is not None and record.psnr < bound:
        record.bound_ok, record.status = False, "bound_violated"
        messages.append(ev.search.note("PSNR") or f"PSNR {record.psnr:.4g} dB is below the target {bound:g} dB")
    if mode == "ratio" and ev.search is not None and not ev.search.reached:
        messages.append(ev.search.note("ratio"))
    record.error = "; ".join(messages)
    return ev
