"""Evaluate one codec on one array: compress, decompress, verify, measure, record.

``evaluate`` returns the stable :class:`~perfscout.state.records.CompressionResult`;
``evaluate_full`` also returns what the record has no column for (the bound check's
worst index, timing spreads, the search trials, the compressed stream itself).

Bad input (unknown codec or mode, impossible bound, empty/0-d/non-float array,
non-finite values under the ``refuse`` policy, a CPU codec asked to run on CUDA)
raises a :class:`~perfscout.errors.PerfscoutError` before anything is measured. A
failure *while running* the codec becomes a record with ``status="error"`` (or
``gpu_unavailable`` / ``gpu_out_of_memory``) and the message, so a sweep loses nothing.
Times are medians over ``repeats`` after one warm-up (none for ``repeats=1``: that one
measurement is cold, and the notes say so; the codec's own ``timed_run`` when it has one,
e.g. CUDA events on the GPU); MB/s = nbytes / 1e6 / median seconds.
Compression timing covers the codec only: the non-finite split/restore is not timed.
"""

from __future__ import annotations

import copy
import math
import mmap
import os
import platform
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import numpy as np
from typing_extensions import TypedDict, Unpack

from perfscout.analysis.timing import check_repeats
from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.registry import codec_class, evaluable_modes
from perfscout.datasets.field import dtype_tag, shape_str, validate_array
from perfscout.errors import CodecError, CodecUnavailable, InputError, PerfscoutError
from perfscout.state.records import CompressionResult
from perfscout.tools import bounds as B
from perfscout.tools.evaluation import Evaluation

DEVICES = ("cpu", "cuda")
_METRIC_COLUMNS = ("ratio", "bitrate", "max_abs_err", "max_rel_err", "max_pw_rel_err", "rmse",
                   "nrmse", "psnr", "snr", "pearson", "ssim", "err_autocorr_lag1")


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


def _validated(array: np.ndarray, nonfinite: str,
               threads: int | None = None) -> tuple[np.ndarray, tuple[float, float] | None]:
    """The array as every codec takes it (see datasets.validate_array), policy applied, and
    its (min, max) when every element is finite (else None): finite extremes prove that
    (NaN propagates into both, an infinity would be one), so one min and one max answer
    the policy and give a ``rel`` bound its range, not four passes."""
    if nonfinite not in B.NONFINITE_POLICIES:
        raise InputError(f"nonfinite policy must be one of {', '.join(B.NONFINITE_POLICIES)}, got {nonfinite!r}")
    array = validate_array(array, allow_nonfinite=True)  # the policy below says what NaN/Inf mean
    lo, hi = B.min_max(array, threads)  # one read of the input, on the cores the metric pass takes
    if math.isfinite(lo) and math.isfinite(hi):
        return array, (lo, hi)
    if nonfinite == "refuse":
        B.refuse_nonfinite(array)
    elif B.find_nonfinite(array)[0] == array.size:
        raise InputError("every element is non-finite: there is nothing for a codec to compress")
    return array, None


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


class EvaluateOptions(TypedDict, total=False):
    """The keyword options of :func:`evaluate_full` (and so of :func:`evaluate`), written
    once; the defaults are :func:`evaluate_full`'s."""

    device: str  # "cpu" (default) or "cuda": must be where the codec runs
    repeats: int  # timed runs; the median is reported (default 3; 1 = cold, no warm-up)
    dataset: str | None  # name in the record (default: the field's own name, else "array")
    nonfinite: str  # NaN/Inf in the input: "refuse" (default) or "passthrough" (B.NONFINITE_POLICIES)
    options: dict[str, Any] | None  # the codec's own options (e.g. szp-gpu's block_ndim)
    run_id: str  # record keys, for a run or a sweep that stores the record
    task_key: str
    platform_id: str
    isolate: bool  # run the codec in a child process (default True; see evaluate_full)
    timeout_s: float | None  # wall-clock limit of that child (default grows with the input)
    memory_limit_mb: int | None  # what the child may add to the address space
    metric_threads: int | None  # threads of the check + metric pass (default: the codec's `threads`
    #   option, else OMP_NUM_THREADS, else every core: analysis.tile_pool.resolve_threads)


def evaluate(data: Any, codec: str, mode: str, bound: float,
             **options: Unpack[EvaluateOptions]) -> CompressionResult:
    """Compress ``data`` with ``codec`` in ``mode`` at ``bound``; verify; time; one record.

    A thin wrapper: ``evaluate_full(...).result``, with the same options
    (:class:`EvaluateOptions`); the codec runs in a child process by default."""
    return evaluate_full(data, codec, mode, bound, keep_reconstruction=False, **options).result


class _RunFailed(Exception):
    """A failure while running the codec: becomes the record's status and message."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def _guarded(what: str, fn: Any) -> Any:
    """Run ``fn()``; a codec failure becomes _RunFailed (bad input still propagates)."""
    try:
        return fn()
    except InputError:
        raise
    except PerfscoutError as exc:
        raise _RunFailed("error", f"{what}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - a backend failure is a result, not a crash
        raise _RunFailed(_failure_status(exc), f"{what}: {type(exc).__name__}: {exc}") from exc


def make_codec(cls: type[Codec], mode: str, bound: float, options: dict[str, Any]) -> Codec:
    """``cls(mode, bound, **options)``; an option of the wrong type (``block_ndim=abc``)
    is bad input, said clearly, not a ValueError from deep inside the backend."""
    try:
        return cls(mode, bound, **options)
    except PerfscoutError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        given = ", ".join(f"{k}={v!r}" for k, v in options.items()) or "none"
        raise InputError(f"codec {cls.codec_id!r} rejected its options ({given}): {exc}") from exc


@dataclass
class _Plan:
    """What the codec runs, and what every element is checked against."""

    runner: Codec
    abs_bound: float | None = None
    pw_rel_bound: float | None = None
    x_extremes: tuple[float, float] | None = None  # the input's range, when resolving the bound read it


def _plan(cls: type[Codec], mode: str, bound: float, work: np.ndarray, opts: dict[str, Any],
          ev: Evaluation, side_nbytes: int, extremes: tuple[float, float] | None = None) -> _Plan:
    """Resolve ``mode``/``bound`` into a codec instance (searching for psnr/ratio);
    ``extremes``: ``work``'s finite (min, max) when the caller has read them."""

    def make(codec_mode: str, codec_bound: float) -> Codec:
        if codec_mode == "abs":  # never an infinite bound in the data's own type
            codec_bound = B.codec_abs_bound(codec_bound, work.dtype)
        return make_codec(cls, codec_mode, codec_bound, opts)  # bad options: bad input

    if mode == "abs":
        return _Plan(make("abs", bound), abs_bound=bound)
    if mode == "rel":
        if extremes is None:
            extremes = B.finite_extremes(work)  # read once: the metric pass gets it too
        abs_bound, note, range_fits = B.rel_abs_bound(work, bound, extremes=extremes)
        if note:
            ev.notes.append(note)
        # A native rel computes R in the data's type: only when R fits there (and R > 0).
        native = "rel" in cls.native_modes and range_fits
        if "rel" in cls.native_modes and not range_fits and not note:
            ev.notes.append("value range too wide for the codec's own rel mode: ran abs "
                            f"{abs_bound:.6g} (rel bound x R, computed without overflow)")
        return _Plan(make("rel", bound) if native else make("abs", abs_bound), abs_bound=abs_bound,
                     x_extremes=extremes)
    if mode == "pw_rel":
        return _Plan(make("pw_rel", bound), pw_rel_bound=bound)
    if mode == "fixed_rate":
        return _Plan(make("fixed_rate", bound))
    make("abs", 1.0)  # options are checked before the search spends time
    control = B.AbsControl(float(getattr(cls, "abs_control_step", 0.0) or 0.0))  # zfp: powers of two
    if mode == "psnr":
        ev.search = _guarded("psnr search failed", lambda: B.search_psnr(
            work, bound, lambda eb: make("abs", eb).compress(work),
            lambda c: make("abs", c.bound).decompress(c), control=control, side_nbytes=side_nbytes,
        ))
    else:
        ev.search = _guarded("ratio search failed", lambda: B.search_ratio(
            work, bound, lambda eb: make("abs", eb).compress(work), side_nbytes=side_nbytes, control=control,
        ))
    assert ev.search is not None
    ev.notes.append(search_note(ev.search))
    ev.extra["search"] = ev.search.summary()
    return _Plan(make("abs", ev.search.abs_bound), abs_bound=ev.search.abs_bound)


def search_note(search: B.SearchOutcome) -> str:
    """One sentence on a psnr/ratio search: its trials against the budget, where it landed
    against the window, and why when it did not land inside it."""
    each = "one compress and one decompress" if search.metric == "psnr" else "one compress"
    unit = " dB" if search.metric == "psnr" else ""
    lo, hi = search.window
    text = (f"{search.metric} search: {search.iterations} trial(s) of at most {search.max_trials} ({each} "
            f"each), achieved {search.achieved:.6g}{unit} at abs bound {search.abs_bound:.6g}")
    if search.in_window:
        return f"{text}, in the window [{lo:.6g}, {hi:.6g}]{unit}"
    return f"{text}; {search.note(search.metric.upper() if search.metric == 'psnr' else 'ratio')}"


def _run_timed(runner: Codec, work: np.ndarray, repeats: int, record: CompressionResult,
               ev: Evaluation) -> tuple[Compressed, np.ndarray]:
    """Compress and decompress with timing: the codec's own, or medians of perf_counter_ns."""
    from perfscout.analysis.timing import time_callable

    timed = _guarded(f"{record.codec} failed", lambda: runner.timed_run(work, repeats))
    if timed is not None:
        record.compress_s, record.decompress_s = timed.compress_s, timed.decompress_s
        record.h2d_s, record.d2h_s = timed.h2d_s, timed.d2h_s
        record.device_name = timed.device_name or record.device_name
        compressed, recon = timed.compressed, np.asarray(timed.reconstructed)
    else:
        ev.compress_timing, compressed = _guarded(
            f"{record.codec} compression failed", lambda: time_callable(lambda: runner.compress(work), repeats=repeats))
        ev.decompress_timing, recon = _guarded(
            f"{record.codec} decompression failed",
            lambda: time_callable(lambda: runner.decompress(compressed), repeats=repeats))
        record.compress_s = ev.compress_timing.median_s
        record.decompress_s = ev.decompress_timing.median_s
        if ev.compress_timing.cold:  # repeats=1: no warm-up ran (it would double the codec's cost)
            ev.notes.append("timing is cold: repeats=1 runs no untimed warm-up, so first-call costs "
                            "(fresh buffers, cold caches) are in the one measurement; repeats >= 2 "
                            "gives a warm median")
    for name in ("compress", "decompress"):
        secs = getattr(record, f"{name}_s")
        if secs and secs > 0:
            setattr(record, f"{name}_MBps", record.nbytes / 1e6 / secs)
    if recon.shape != work.shape or recon.dtype != work.dtype:
        raise _RunFailed("error", f"{record.codec} returned {recon.dtype}{recon.shape} for {work.dtype}{work.shape}")
    return compressed, recon


def _chunk_count(compressed: Compressed) -> int:
    """Streams in the result (a CPU codec's ``threads`` option makes several, :mod:`perfscout.codecs.chunked`)."""
    chunks = (compressed.meta or {}).get("chunks", 1)
    return chunks if isinstance(chunks, int) and chunks >= 1 else 1


def _codec_notes(compressed: Compressed) -> list[str]:
    """Sentences a codec left in its meta (``notes``: e.g. szp's automatic block-shape choice)."""
    notes = (compressed.meta or {}).get("notes", [])
    return [n for n in notes if isinstance(n, str)] if isinstance(notes, list) else []


def _gpu_fallback(device: str, cls: type[Codec], compressed: Compressed, record: CompressionResult) -> str:
    """A CUDA codec may run its CPU reference (no GPU, no CuPy): say so, and where it ran."""
    meta = compressed.meta or {}
    if device != "cuda":
        return ""
    if str(meta.get("device", cls.device)) == "cuda":
        record.device_name = record.device_name or str(meta.get("device_name", ""))
        return ""
    record.device, record.device_name = "cpu", cpu_name()
    reason = str(meta.get("reason", "")).removeprefix("gpu_unavailable:").strip() or "no reason given"
    return f"gpu_unavailable: {record.codec} ran its CPU reference instead ({reason})"


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
    isolate: bool = True,
    timeout_s: float | None = None,
    memory_limit_mb: int | None = None,
    metric_threads: int | None = None,
    keep_reconstruction: bool = True,
) -> Evaluation:
    """Like :func:`evaluate`, returning the :class:`Evaluation` with the detail.

    ``keep_reconstruction=False`` leaves the decompressed array out of the Evaluation
    (``reconstructed`` is None): an isolated child then sends back only the record and the
    stream, not a copy of the whole field through shared memory (two more passes over it).

    ``isolate`` (default): the whole evaluation runs in a child process
    (:func:`perfscout.tools.isolate.run_isolated`: forked for CPU codecs, from a clean
    forkserver for CUDA) with a wall-clock ``timeout_s`` and a ``memory_limit_mb`` on what
    it may add. Bad input raises here as it would in-process; a child that dies (a
    segfault, an abort, the OOM killer) or overruns its time becomes a record with status
    ``codec_crashed`` / ``codec_timeout``, the signal and a summary of the input, and the
    caller lives on. ``isolate=False`` runs in this process (the sweep's worker, itself
    the isolation, does). A first CPU call whose metric pass takes the compiled kernels
    runs the codec in one child while this process loads them, and the check and metrics
    in a second child forked after (:func:`_evaluate_in_two_children`): the same figures.
    ``extra["timing_split"]`` says where the time went (benchmarks/isolation_fresh.py).
    """
    kwargs = dict(device=device, repeats=repeats, dataset=dataset, nonfinite=nonfinite, options=options,
                  run_id=run_id, task_key=task_key, platform_id=platform_id, metric_threads=metric_threads)
    if not isolate:
        here = _evaluate_here if keep_reconstruction else _evaluate_without_reconstruction
        return here(data, codec, mode, bound, **kwargs)  # type: ignore[arg-type]
    from perfscout.tools.isolate import CodecCrashed, run_isolated

    started_at = _now()
    array, field_name = _as_array(data)
    bound = B.check_mode_bound(mode, bound)  # the cheap refusals, before any child starts
    what = f"{codec} {mode} {bound:g}"
    t_called = time.perf_counter()
    if device == "cpu":  # forked children inherit the metric pass's compiled kernels
        from perfscout.analysis.streaming import kernels_pending, warm_before_fork

        if kernels_pending(array):
            # Loading them here first (numba's import, the cached kernels: ~0.5 s, 1-2 s
            # on a busy machine) would come before the codec; loaded while the codec runs
            # in its child, on another core, the check and the metrics follow in a
            # second child forked from this warm process (_evaluate_in_two_children).
            try:
                return _evaluate_in_two_children(array, codec, mode, bound, {**kwargs, "dataset": dataset or field_name or None},
                                                 what=what, timeout_s=timeout_s, memory_limit_mb=memory_limit_mb,
                                                 keep_reconstruction=keep_reconstruction)
            except CodecCrashed as exc:
                return _crashed_record(exc, array, codec, mode, bound, run_id, task_key, dataset or field_name,
                                       device, repeats, started_at, platform_id)
        warm_before_fork(array)
    t_forking = time.perf_counter()
    try:
        ev = run_isolated(
            _evaluate_here if keep_reconstruction else _evaluate_without_reconstruction,
            (array, codec, mode, bound), {**kwargs, "dataset": dataset or field_name or None},
            what=what, device=device, timeout_s=timeout_s, memory_limit_mb=memory_limit_mb,
            input_array=array, result_nbytes=int(array.nbytes) if keep_reconstruction else 0,
        )
        split = ev.extra.get("timing_split")
        if isinstance(split, dict) and device == "cpu":  # one clock (CLOCK_MONOTONIC) on both sides of the fork
            split["warm_before_fork_s"] = t_forking - t_called
            split["fork_s"] = split["started"] - t_forking
            split["reply_s"] = time.perf_counter() - split["finished"]
        return ev
    except CodecCrashed as exc:
        return _crashed_record(exc, array, codec, mode, bound, run_id, task_key, dataset or field_name,
                               device, repeats, started_at, platform_id)


def _crashed_record(exc: Any, array: np.ndarray, codec: str, mode: str, bound: float, run_id: str, task_key: str,
                    dataset: str, device: str, repeats: Any, started_at: str, platform_id: str) -> Evaluation:
    """The record of an evaluation whose child did not survive (CodecCrashed ``exc``)."""
    record = CompressionResult(
        run_id=run_id, task_key=task_key, dataset=dataset or "array",
        shape=shape_str(array.shape), dtype=_dtype_text(array.dtype), nbytes=int(array.nbytes),
        codec=codec, device=device, mode=mode, bound=bound, repeats=repeats if isinstance(repeats, int) else 0,
        started_at=started_at, platform_id=platform_id, status=exc.status,
        error=str(exc), device_name=cpu_name() if device == "cpu" else "",
    )
    return Evaluation(result=record, notes=[f"{exc.status}: the evaluation ran in a child process, "
                                             "which did not survive; this process did"])


#: Niceness of the caller's kernel load beside the codec child (a thread's own; the thread
#: ends with the load). On an idle second core it changes nothing. With one other busy
#: process on the 2-core VM (load 2-3, 256 MiB): at 19 the load waits for the codec
#: (evaluate 1.37-1.51x the codec's own time, 0.9-2.7 s of it waiting for the kernels);
#: at 0 it slows the codec instead (1.48-2.01x, the codec child 4.8-5.7 s against 2.9-4.3 s).
KERNEL_LOAD_NICENESS = 19


def _evaluate_in_two_children(array: np.ndarray, codec: str, mode: str, bound: float, kwargs: dict[str, Any], *,
                              what: str, timeout_s: float | None, memory_limit_mb: int | None,
                              keep_reconstruction: bool) -> Evaluation:
    """An isolated CPU evaluation whose metric kernels this process has still to load: a
    first child validates, plans and runs the codec while this process loads the kernels
    (:func:`perfscout.analysis.streaming.warm_before_fork`, on another core); the
    reconstruction comes back through a shared mapping as a view, and a second child,
    forked from this now-warm process, checks the bound and measures the pair. Each
    child is contained as one is (crash, timeout, memory limit: a crash of either is a
    CodecCrashed). A codec child that cannot hand over (a non-finite pass-through, an
    input validation copied) finishes the evaluation itself, as one child does."""
    from perfscout.analysis.streaming import warm_before_fork
    from perfscout.tools.isolate import CodecCrashed, _default_timeout_s, run_isolated

    options, metric_threads = kwargs.get("options"), kwargs.get("metric_threads")
    timeout = _default_timeout_s(int(array.nbytes)) if timeout_s is None else float(timeout_s)
    deadline = time.monotonic() + timeout
    warm: dict[str, float] = {}

    def warm_up() -> None:
        if KERNEL_LOAD_NICENESS:
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), KERNEL_LOAD_NICENESS)  # this thread only
            except (OSError, AttributeError):
                pass
        t = time.perf_counter()
        warm_before_fork(array)
        t1 = time.perf_counter()
        # Allocate the mapping's pages here too (one write a page), still beside the codec:
        # the codec child then only maps them when it copies its reconstruction in
        # (measured: 0.12 s instead of 0.26 s for 256 MiB on the 2-core VM). This brings
        # a field's worth of memory forward to while the codec holds its own peak, so only
        # when the machine has room for it twice over (else the copy allocates them, later).
        # Whether it pays depends on the guest's memory state (benchmarks/isolation_prefault_ab.py):
        # on the H200 host it did in 4 of 4 fresh-process pairs (1.01-1.22x against 1.25-1.57x
        # the codec's own time); on the 2-core VM in 6 of 6 pairs (1.42x against 1.48x), and
        # 12 minutes before that not, in 5 of 5 (the codec child 0.2-0.3 s slower beside it).
        if _available_memory_bytes() >= 2 * int(array.nbytes):
            np.frombuffer(shared, dtype=np.uint8)[::mmap.PAGESIZE] = 0
        warm["done"] = time.perf_counter()
        warm["s"], warm["prefault_s"] = t1 - t, warm["done"] - t1

    def load_kernels() -> None:
        """The caller's side while the codec child runs: a thread at the lowest priority
        (a thread's niceness goes with it), so that the codec keeps its core when the
        machine has none spare."""
        worker = threading.Thread(target=warm_up, name="perfscout-warm-kernels", daemon=True)
        worker.start()
        worker.join()

    t_forking = time.perf_counter()
    try:
        shared = mmap.mmap(-1, int(array.nbytes) + 4096)  # the reconstruction's way back, as views
    except (OSError, ValueError, OverflowError):  # no room to map it: one child, the kernels loaded first
        warm_before_fork(array)
        return run_isolated(
            _evaluate_here if keep_reconstruction else _evaluate_without_reconstruction, (array, codec, mode, bound),
            kwargs, what=what, device="cpu", timeout_s=timeout, memory_limit_mb=memory_limit_mb, input_array=array,
            result_nbytes=int(array.nbytes) if keep_reconstruction else 0)
    coded: Any = None
    try:
        coded = run_isolated(_code_for_caller, (array, codec, mode, bound, keep_reconstruction), kwargs,
                             what=what, device="cpu", timeout_s=timeout, memory_limit_mb=memory_limit_mb,
                             input_array=array, shared=shared, while_waiting=load_kernels)
        t_back = time.perf_counter()
        if isinstance(coded, Evaluation):  # finished in the codec child (or failed there)
            if isinstance(coded.reconstructed, np.ndarray) and coded.reconstructed.base is not None:
                coded.reconstructed = np.array(coded.reconstructed)  # out of the mapping closed below
            return coded
        kept: dict[str, np.ndarray] = {}

        def release_mapping() -> None:
            """Once the metric child is forked this process needs the mapping no more (but
            for a copy of the reconstruction): unmapped now, its pages are freed by the
            last child to exit, not while the caller waits (~0.1 s for 256 MiB)."""
            if keep_reconstruction:
                kept["y"] = np.array(coded.reconstructed)
            coded.reconstructed = None
            try:
                shared.close()
            except BufferError:  # a view still held somewhere: the finally below, or the GC, unmaps it
                pass

        try:
            ev = run_isolated(_finish_for_caller, (coded, array, mode, bound, options, metric_threads), {},
                              what=f"{what} (bound check and metrics)", device="cpu",
                              timeout_s=max(1.0, deadline - time.monotonic()), memory_limit_mb=memory_limit_mb,
                              input_array=array, while_waiting=release_mapping)
        except CodecCrashed as exc:
            # The codec's run stands (its times, its stream); what did not survive is said.
            ev = coded.ev
            ev.result.status, ev.result.error = exc.status, str(exc)  # type: ignore[assignment]
            ev.notes.append(f"{exc.status}: the bound check and metrics ran in a child process, which did "
                            "not survive; this process did")
            return ev
        t_done = time.perf_counter()
        if keep_reconstruction:
            ev.reconstructed = kept["y"]
            if ev.search is not None and coded.ev.search is not None:
                ev.search.reconstructed = coded.ev.search.reconstructed
        split = ev.extra.get("timing_split")
        if isinstance(split, dict):
            split["warm_before_fork_s"] = warm.get("s", 0.0)  # overlapped with the codec child
            split["prefault_s"] = warm.get("prefault_s", 0.0)  # so was this
            split["fork_s"] = split["started"] - t_forking
            # the codec child's reply is read once the kernels are loaded: a wait when they took longer
            split["kernel_wait_s"] = max(0.0, warm.get("done", coded.t_coded) - coded.t_coded)
            split["codec_reply_s"] = t_back - coded.t_coded - split["kernel_wait_s"]
            split["second_fork_s"] = split["handover_s"] - split["codec_reply_s"] - split["kernel_wait_s"]
            split["reply_s"] = t_done - split["finished"]
            split["children"] = 2
        return ev
    finally:
        if coded is not None and not isinstance(coded, Evaluation):
            coded.reconstructed = None
        coded = None
        try:
            shared.close()
        except BufferError:  # a view still held (a caller's exception traceback): the GC unmaps it
            pass


def _available_memory_bytes() -> int:
    """MemAvailable of /proc/meminfo (0 when unreadable: then nothing is brought forward)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _code_for_caller(data: np.ndarray, codec: str, mode: str, bound: float, keep_reconstruction: bool,
                     **kwargs: Any) -> Evaluation | _Coded:
    """The codec child of :func:`_evaluate_in_two_children`: the :class:`_Coded` state
    (its reconstruction goes back through the shared mapping), or the whole evaluation
    when the second child could not take over: it sees only the caller's own array, so a
    validated copy or a non-finite split stays here."""
    from perfscout.tools.isolate import keep_until_exit

    coded = _code(data, codec, mode, bound, **kwargs)
    if isinstance(coded, Evaluation):
        ev = coded
    else:
        array, work, split = coded.ev.extra.pop("_work")
        if split is None and work is data and array is data:
            if not keep_reconstruction and coded.ev.search is not None:
                keep_until_exit(coded.ev.search)
                coded.ev.search = copy.copy(coded.ev.search)
                coded.ev.search.reconstructed = None  # not through the pipe
            return coded
        ev = _finish(coded, array, work, split, mode, bound, kwargs.get("options"), kwargs.get("metric_threads"))
    if not keep_reconstruction:
        keep_until_exit(ev.reconstructed, ev.search)
        ev.reconstructed = None
        if ev.search is not None:
            ev.search = copy.copy(ev.search)
            ev.search.reconstructed = None
    return ev


def _finish_for_caller(coded: _Coded, array: np.ndarray, mode: str, bound: float, options: dict[str, Any] | None,
                       metric_threads: int | None) -> Evaluation:
    """The metric child of :func:`_evaluate_in_two_children`: the bound check and the
    metrics of the codec child's run; the reconstruction stays with the caller (its
    shared mapping), so only the record and the detail go back."""
    ev = _finish(coded, array, array, None, mode, bound, options, metric_threads)
    ev.reconstructed = None
    if ev.search is not None:
        ev.search.reconstructed = None
    return ev


def _evaluate_without_reconstruction(*args: Any, **kwargs: Any) -> Evaluation:
    """:func:`_evaluate_here`, its decompressed arrays dropped before they are returned (in a
    child: before the reply is packed)."""
    from perfscout.tools.isolate import keep_until_exit

    ev = _evaluate_here(*args, **kwargs)
    keep_until_exit(ev.reconstructed, ev.search)  # in a child its exit frees them, after the reply
    ev.reconstructed = None
    if ev.search is not None:
        ev.search = copy.copy(ev.search)
        ev.search.reconstructed = None
    return ev


def _dtype_text(dtype: np.dtype) -> str:
    try:
        return dtype_tag(dtype)
    except PerfscoutError:
        return str(dtype)


@dataclass
class _Coded:
    """An evaluation up to its codec run: what the bound check and the metric pass take
    over (:func:`_finish`). Crosses the pipe from a codec child (``reconstructed``
    through the shared mapping), so it holds no codec instance and no input array."""

    ev: Evaluation
    reconstructed: Any
    abs_bound: float | None
    pw_rel_bound: float | None
    x_extremes: tuple[float, float] | None
    gpu_note: str
    t_start: float
    t_validated: float
    t_planned: float
    t_coded: float


def _evaluate_here(data: Any, codec: str, mode: str, bound: float, **kwargs: Any) -> Evaluation:
    """:func:`evaluate_full` in this process."""
    coded = _code(data, codec, mode, bound, **kwargs)
    if isinstance(coded, Evaluation):
        return coded
    array, work, split = coded.ev.extra.pop("_work")
    return _finish(coded, array, work, split, mode, bound, kwargs.get("options"), kwargs.get("metric_threads"))


def _code(
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
    metric_threads: int | None = None,
) -> Evaluation | _Coded:
    """Validate, plan and run the codec: a finished Evaluation when nothing is left to
    check (bad codec state, a failed run, the GPU path), else the :class:`_Coded` state
    with ``ev.extra["_work"]`` = (validated input, what the codec compressed, the
    non-finite split) for :func:`_finish` in the same process."""
    t_start = time.perf_counter()
    started_at = _now()
    array, field_name = _as_array(data)
    bound = B.check_mode_bound(mode, bound)
    check_repeats(repeats)
    if metric_threads is not None:
        from perfscout.analysis.tile_pool import resolve_threads

        resolve_threads(metric_threads)  # a bad value is refused before the codec runs
    array, extremes = _validated(array, nonfinite, metric_threads)
    if mode == "ratio" and bound > array.nbytes:
        # a stream holds at least one byte: such a target cannot be reached by any codec,
        # and the search would report its closest trial as if the request made sense
        raise InputError(f"a target ratio of {bound:g} on {array.nbytes} bytes of data would need a stream "
                         f"smaller than one byte; no codec can exceed {array.nbytes}x here")
    record = CompressionResult(
        run_id=run_id, task_key=task_key, dataset=dataset or field_name or "array",
        shape=shape_str(array.shape), dtype=dtype_tag(array.dtype),
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
    if device == "cuda":
        from perfscout.tools import gpu_eval  # device-resident backends: timed and verified on the GPU

        if gpu_eval.runs_on_device(cls, mode, dict(options or {})):
            if extremes is None and nonfinite == "passthrough":  # some element is not finite
                raise InputError("non-finite pass-through is not available on the GPU evaluation path; "
                                 "remove the NaN/Inf values or use a CPU codec")
            return gpu_eval.evaluate_on_gpu(record, cls, array, mode, bound, repeats=repeats,
                                            options=dict(options or {}))

    t_validated = time.perf_counter()
    has_nonfinite = extremes is None  # passthrough (refuse raised): some element is not finite
    split = B.split_nonfinite(array) if has_nonfinite else None
    work = split.filled if split is not None else array
    side_nbytes = split.side_nbytes if split is not None else 0
    ev = Evaluation(result=record, nonfinite=split)
    if split is not None:
        ev.notes.append(f"{split.count} non-finite value(s) passed through losslessly "
                        f"({side_nbytes} bytes beside the stream)")
    try:
        plan = _plan(cls, mode, bound, work, dict(options or {}), ev, side_nbytes,
                     extremes=extremes if split is None else None)
        record.abs_bound = plan.abs_bound
        t_planned = time.perf_counter()
        compressed, recon = _run_timed(plan.runner, work, repeats, record, ev)
        t_coded = time.perf_counter()
    except _RunFailed as exc:
        record.status, record.error = exc.status, str(exc)  # type: ignore[assignment]
        return ev
    ev.compressed = compressed
    record.chunks = _chunk_count(compressed)
    ev.notes.extend(_codec_notes(compressed) + plan.runner.known_behaviour())
    gpu_note = _gpu_fallback(device, cls, compressed, record)
    ev.extra["_work"] = (array, work, split)
    return _Coded(ev, recon, plan.abs_bound, plan.pw_rel_bound, plan.x_extremes, gpu_note,
                  t_start, t_validated, t_planned, t_coded)


def _finish(coded: _Coded, array: np.ndarray, work: np.ndarray, split: B.NonfiniteSplit | None, mode: str,
            bound: float, options: dict[str, Any] | None, metric_threads: int | None) -> Evaluation:
    """The element-by-element bound check and the quality metrics of a codec run."""
    ev, recon = coded.ev, coded.reconstructed
    record, compressed, gpu_note = ev.result, ev.compressed, coded.gpu_note
    assert compressed is not None
    side_nbytes = split.side_nbytes if split is not None else 0
    t_finish = time.perf_counter()
    # -- verify element by element (non-finite positions: restored exactly, not checked) --
    # ``work`` holds the fill value at the non-finite positions; giving the check that
    # same value there makes those positions exact, as the restore below makes them.
    checked = recon if split is None else np.where(split.mask, work, recon)
    fused = None
    if split is None:  # one pass over the pair for the verdict and the metrics
        if metric_threads is None and isinstance((options or {}).get("threads"), int):
            metric_threads = int((options or {})["threads"])  # the cores the sweep gave this task
        fused = B.verify_and_measure(work, recon, compressed.nbytes, abs_bound=coded.abs_bound,
                                     pw_rel_bound=coded.pw_rel_bound, threads=metric_threads,
                                     x_extremes=coded.x_extremes)
        check = fused.check
    else:
        check = B.verify_bound(work, checked, abs_bound=coded.abs_bound, pw_rel_bound=coded.pw_rel_bound)
    if split is not None:
        recon = B.restore_nonfinite(recon, split)
    ev.reconstructed, ev.check = recon, check
    record.bound_ok, record.status = check.bound_ok, check.status  # type: ignore[assignment]
    messages = [m for m in (gpu_note, check.message) if m]
    if gpu_note and record.status == "ok":
        record.status = "gpu_unavailable"

    # -- quality metrics (analysis.metrics; non-finite elements count as exact) -----------
    from perfscout.analysis.metrics import quality_metrics

    try:
        if fused is None:
            ev.metrics = quality_metrics(array, recon, compressed.nbytes + side_nbytes, threads=metric_threads)
        elif fused.metrics_error is not None:
            raise fused.metrics_error
        else:
            ev.metrics = fused.metrics
    except (ArithmeticError, InputError) as exc:
        # Extreme magnitudes can overflow a metric's float64 intermediates, and a codec
        # that returns no finite value leaves nothing to compare (InputError here is the
        # codec's fault: the input was validated). The bound verdict above stands on its
        # own, so keep it and say what is missing.
        messages.append(f"quality metrics failed: {type(exc).__name__}: {exc}")
    for key in _METRIC_COLUMNS:
        value = ev.metrics.get(key)
        setattr(record, key, None if value is None else float(value))
    if mode == "psnr" and ev.search is not None and record.psnr is not None and record.psnr < bound:
        record.bound_ok, record.status = False, "bound_violated"
        messages.append(ev.search.note("PSNR") or f"PSNR {record.psnr:.4g} dB is below the target {bound:g} dB")
    if mode == "ratio" and ev.search is not None and not ev.search.reached:
        messages.append(ev.search.note("ratio"))
    record.error = "; ".join(messages)
    t_end = time.perf_counter()
    # Where the time went (benchmarks/isolation_fresh.py); an isolated call adds the caller's side.
    ev.extra["timing_split"] = {
        "validate_s": coded.t_validated - coded.t_start, "plan_s": coded.t_planned - coded.t_validated,
        "codec_s": coded.t_coded - coded.t_planned, "handover_s": t_finish - coded.t_coded,
        "metric_pass_s": t_end - t_finish, "started": coded.t_start, "finished": t_end}
    return ev
