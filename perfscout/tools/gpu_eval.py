"""GPU evaluation of the device-resident backends (cuSZp, nvCOMP, szp-gpu), done on the GPU.

What one evaluation does, all on one blocking CUDA stream (:func:`~perfscout.codecs.gpu_peers.device.work_stream`):

1. the input goes to the device once (H2D from pinned memory, timed with CUDA events);
   an input that already is a CuPy array stays where it is;
2. ``rel`` is resolved to an absolute bound on the device (min/max pass, timed apart as
   ``range_s``), so that *every* backend compresses with the same absolute bound and no
   range pass is inside anyone's compress time;
3. one warm-up, then ``repeats`` compress calls and ``repeats`` decompress calls, each one
   call between two CUDA events (the device-resident API end to end: allocations, kernels
   and the library's own host steps); medians go to the record;
4. the device-to-device copy of the same bytes, timed in the same run (10 copies per pair
   of events), is the roof: the detail reports each throughput as a fraction of it
   (codec GB/s count uncompressed bytes; the copy counts bytes read plus written);
5. the compressed size the library reported is checked against its buffer, the stream is
   copied to the host (D2H timed), and decoded again *from those host bytes*: the result
   must equal the device-side decode bit for bit;
6. verification and metrics run on the GPU: the bound check finds the candidates (error >
   bound) on the device and judges only those with :func:`perfscout.tools.bounds.verify_bound`
   (the same verdict rules as the CPU path, rounding slack included); ``lossless`` is a
   bit-for-bit comparison; :func:`perfscout.analysis.metrics.quality_metrics` runs on CuPy
   arrays. Nothing of array size is copied back except the timed D2H of the result.

The record gets the DESIGN.md columns; what it has no column for (the copy roof, the
fractions, the range pass, the worst element, the stream checks, and the wall seconds of each
step of the evaluation itself, ``phases_s``: where a task's time goes besides the timed calls)
is appended to ``error`` as one ``gpu_detail={...}`` note (:mod:`perfscout.analysis.report.gpu`
reads it back).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from perfscout.analysis.report.gpu import format_detail
from perfscout.analysis.xp import get_namespace, to_host
from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.gpu_peers import device as D
from perfscout.errors import InputError, PerfscoutError
from perfscout.state.records import CompressionResult
from perfscout.tools import bounds as B

#: Candidates (error > bound) judged per host batch, so a badly broken codec cannot make the
#: check copy the whole array back at once.
CANDIDATE_BATCH = 1 << 23
COPY_BATCH = 10


#: The modes evaluated here; others (psnr/ratio searches) take the host path of evaluate().
MODES = ("abs", "rel", "lossless")


def runs_on_device(cls: type[Codec], mode: str, options: dict[str, Any]) -> bool:
    """Whether :func:`evaluate_on_gpu` should run this backend in ``mode`` (it is usable here)."""
    if mode not in MODES:
        return False
    if getattr(cls, "device_resident", False):
        return True
    if cls.codec_id == "szp-gpu" and options.get("device", "auto") != "cpu":
        from perfscout.codecs.szp import gpu as G

        return G.gpu_available()[0]
    return False


# -- one interface over the backends ---------------------------------------------------------
class _Runner:
    """compress/decompress on the device, and the host round trip, for one backend."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec

    def compress(self, xd: Any) -> D.DeviceBlob:
        raise NotImplementedError

    def decompress(self, blob: D.DeviceBlob, xd: Any) -> Any:
        raise NotImplementedError

    def settle(self, blob: D.DeviceBlob, xd: Any) -> D.DeviceBlob:
        """The blob with the stream's real extent (checked against the library's report)."""
        return blob

    def copy_to_host(self, blob: D.DeviceBlob, pinned: Any) -> None:
        """The stream's device-to-host copy into ``pinned`` (the timed part)."""
        blob.view().get(out=pinned, stream=D.work_stream())

    def host_bytes(self, blob: D.DeviceBlob, pinned: Any) -> bytes:
        """The stream as host bytes, from what :meth:`copy_to_host` left in ``pinned``."""
        return pinned.tobytes()

    def from_host(self, data: bytes, xd: Any) -> tuple[Compressed, Any]:
        raise NotImplementedError

    def eb_used(self) -> float | None:
        return None

    def prepare_decode(self, blob: D.DeviceBlob, xd: Any) -> bool:
        """Prepare what the timed decodes of ``blob`` need (outside the timing); True if
        there was anything to prepare."""
        return False


class _PeerRunner(_Runner):
    codec: D.DeviceCodec
    _target: tuple[D.DeviceBlob, Any] | None = None

    def compress(self, xd: Any) -> D.DeviceBlob:
        return self.codec.device_compress(xd)

    def prepare_decode(self, blob: D.DeviceBlob, xd: Any) -> bool:
        # cuSZp needs a zeroed output: zeroed once here, then every timed decode of this
        # stream writes into it (as cuSZp's own tests do; see gpu_peers.cuszp)
        target = self.codec.decode_target(tuple(xd.shape), xd.dtype)
        self._target = None if target is None else (blob, target)
        return target is not None

    def decompress(self, blob: D.DeviceBlob, xd: Any) -> Any:
        kw = {"out": self._target[1]} if self._target is not None and self._target[0] is blob else {}
        return self.codec.device_decompress(blob, tuple(xd.shape), xd.dtype, self.codec.stream_meta(xd), **kw)

    def settle(self, blob: D.DeviceBlob, xd: Any) -> D.DeviceBlob:
        return self.codec.settle(blob, tuple(xd.shape), xd.dtype)

    def from_host(self, data: bytes, xd: Any) -> tuple[Compressed, Any]:
        c = self.codec.compressed_from(data, tuple(xd.shape), xd.dtype, self.codec.stream_meta(xd))
        return c, self.codec.decompress_device(c)

    def eb_used(self) -> float | None:
        return getattr(self.codec, "eb32", None)


class _SzpRunner(_Runner):
    """szp-gpu's device API (perfscout.codecs.szp.gpu) behind the same interface."""

    def __init__(self, codec: Codec) -> None:
        super().__init__(codec)
        from perfscout.codecs.szp import gpu as G

        self.G = G

    def compress(self, xd: Any) -> D.DeviceBlob:
        ds = self.codec.compress_on_device(xd)  # type: ignore[attr-defined]  # block_ndim "auto" chooses here
        return D.DeviceBlob(ds.body, int(ds.body.size) + 4, owner=ds)  # + the CRC-32 trailer added on the host

    def decompress(self, blob: D.DeviceBlob, xd: Any) -> Any:
        return self.G.decompress_device(blob.owner)

    def copy_to_host(self, blob: D.DeviceBlob, pinned: Any) -> None:
        blob.owner.body.get(out=pinned[: blob.nbytes - 4], stream=D.work_stream())

    def host_bytes(self, blob: D.DeviceBlob, pinned: Any) -> bytes:
        from perfscout.codecs.szp import format as F

        return F.finish(pinned[: blob.nbytes - 4])

    def from_host(self, data: bytes, xd: Any) -> tuple[Compressed, Any]:
        return self.codec._wrap(data, True, ""), self.G.decompress_device(data)  # type: ignore[attr-defined]


def _runner(cls: type[Codec], mode: str, eb: float | None, bound: float, options: dict[str, Any]) -> _Runner:
    if cls.codec_id == "szp-gpu":
        return _SzpRunner(cls("abs", float(eb), **options))  # type: ignore[arg-type]
    if mode == "lossless":
        return _PeerRunner(cls("lossless", bound, **options))
    return _PeerRunner(cls("abs", float(eb), **options))  # type: ignore[arg-type]


# -- timing --------------------------------------------------------------------------------
def _event_samples(fn: Callable[[], Any], repeats: int, batch: int = 1) -> tuple[list[float], Any]:
    """Seconds per call: ``repeats`` samples of ``batch`` calls between two CUDA events on the
    work stream; returns the samples and the last call's result."""
    cp = D.cupy()
    stream = D.work_stream()
    out, result = [], None
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record(stream)
        for _ in range(batch):
            result = fn()
        stop.record(stream)
        stop.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, stop) / 1e3 / batch)
    return out, result


def copy_roof(xd: Any, repeats: int) -> dict[str, float]:
    """Device-to-device copy of ``xd``'s bytes, timed like the codecs (bytes read + written)."""
    cp = D.cupy()
    dst = cp.empty_like(xd)
    stream = D.work_stream()

    def copy() -> None:
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, xd.data.ptr, xd.nbytes,
                                    cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr)

    copy()
    samples, _ = _event_samples(copy, max(3, repeats), batch=COPY_BATCH)
    t = statistics.median(samples)
    return {"copy_s": t, "copy_GBps": 2 * xd.nbytes / t / 1e9 if t > 0 else math.inf}


# -- verification on the device --------------------------------------------------------------
def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(int(flat), shape)) if shape else ()


def verify_on_device(xd: Any, yd: Any, abs_bound: float | None) -> B.BoundCheck:
    """The element-wise bound check of :func:`perfscout.tools.bounds.verify_bound`, with the
    whole-array work where the arrays are (CuPy: the device; NumPy works too, which is how CI
    checks it against that function) and only the candidates judged on the host."""
    xp = get_namespace(xd, yd)
    shape = tuple(xd.shape)
    err = xp.abs(xd.astype(xp.float64).ravel() - yd.astype(xp.float64).ravel())
    err = xp.where(xp.isnan(err), xp.inf, err)  # a NaN out of a codec is an unbounded error
    flat_max = int(xp.argmax(err))
    max_err = float(err[flat_max])
    index = _unravel(flat_max, shape)
    if abs_bound is None:
        return B.BoundCheck("ok", None, max_err, index)
    # candidates: a rounded error at least the bound (equal to it may stand for an exact
    # error beyond it), decided exactly on the host by verify_bound
    cand = xp.flatnonzero((err >= abs_bound) & (err > 0))
    del err
    if cand.size == 0:
        return B.BoundCheck("ok", True, max_err, index)
    n_beyond = n_viol = 0
    worst, worst_flat, worst_err, worst_val = -math.inf, 0, 0.0, 0.0
    xf, yf = xd.ravel(), yd.ravel()
    for start in range(0, int(cand.size), CANDIDATE_BATCH):
        idx = cand[start : start + CANDIDATE_BATCH]
        xs, ys, flat = to_host(xf[idx]), to_host(yf[idx]), to_host(idx)
        sub = B.verify_bound(xs, ys, abs_bound=abs_bound)
        n_beyond += sub.n_beyond
        n_viol += sub.n_violations
        if sub.n_beyond and sub.worst_excess > worst:
            k = sub.worst_index[0]
            worst, worst_flat = sub.worst_excess, int(flat[k])
            worst_err, worst_val = abs(float(xs[k]) - float(ys[k])), float(xs[k])
    if n_beyond == 0:  # every candidate was within the bound in the host's arithmetic
        return B.BoundCheck("ok", True, max_err, index)
    status = "bound_violated" if n_viol else "bound_overshoot"
    detail = (f"{n_viol} of them beyond float rounding" if n_viol
              else f"all within float rounding of {np.dtype(xd.dtype).name}")
    worst_index = _unravel(worst_flat, shape)
    message = (f"{status}: {n_beyond} element(s) exceed the abs bound {abs_bound:.6g}, {detail}; worst excess "
               f"{worst:.3g} ({worst / abs_bound:.3g} of the bound) at index {worst_index} (error "
               f"{worst_err:.6g}, value {worst_val:.6g}); max error {max_err:.6g} at {index}")
    return B.BoundCheck(status, False, max_err, index, n_beyond, n_viol, worst, worst_index, message)


def verify_lossless(xd: Any, yd: Any) -> B.BoundCheck:
    """Bit-for-bit equality (NaN payloads and signed zeros included); NumPy or CuPy arrays."""
    xp = get_namespace(xd, yd)
    shape = tuple(xd.shape)
    word = xp.uint64 if xd.dtype.itemsize == 8 else xp.uint32
    diff = xp.flatnonzero(xd.ravel().view(word) != yd.ravel().view(word))
    err = xp.abs(xd.astype(xp.float64).ravel() - yd.astype(xp.float64).ravel())
    err = xp.where(xp.isnan(err), xp.inf, err)
    flat_max = int(xp.argmax(err))
    max_err = float(err[flat_max])
    index = _unravel(flat_max, shape)
    if diff.size == 0:
        return B.BoundCheck("ok", True, max_err, index)
    first = int(diff[0])
    at = _unravel(first, shape)
    message = (f"bound_violated: lossless round trip differs in {int(diff.size)} element(s); first at index {at} "
               f"(value {float(xd.ravel()[first]):.9g}, decoded {float(yd.ravel()[first]):.9g}); "
               f"max error {max_err:.6g} at {index}")
    return B.BoundCheck("bound_violated", False, max_err, index, int(diff.size), int(diff.size),
                        max_err, at, message)


# -- the bound ---------------------------------------------------------------------------
def resolve_abs_bound(xd: Any, mode: str, bound: float, repeats: int) -> tuple[float | None, str, float | None]:
    """(absolute bound, note, seconds of the range pass) for ``mode``; the same rules as
    :func:`perfscout.tools.bounds.rel_reference`, computed on the device."""
    cp = D.cupy()
    if mode == "lossless":
        return None, "", None
    if mode == "abs":
        return float(bound), "", None
    if mode != "rel":
        raise InputError(f"GPU evaluation takes abs, rel or lossless bounds, not {mode!r}")
    samples, (lo, hi) = _event_samples(lambda: (cp.min(xd), cp.max(xd)), max(1, repeats))
    r = float(hi) - float(lo)
    if r > 0:
        return bound * r, "", statistics.median(samples)
    magnitude = max(abs(float(lo)), abs(float(hi)))
    if magnitude > 0:
        return bound * magnitude, (f"constant field (R = 0): rel bound taken relative to |value| = "
                                   f"{magnitude:.6g}"), statistics.median(samples)
    return bound, "all-zero field (R = 0): rel bound taken as absolute", statistics.median(samples)


# -- the evaluation ------------------------------------------------------------------------
@dataclass
class _Upload:
    xd: Any
    h2d: list[float]
    #: the pinned host copy of the input (None for a device-resident input); reused for the
    #: timed D2H of the result, which has the same shape and dtype, so a task pins its array
    #: size once (pinning 1 GiB costs a few hundred ms)
    pinned: Any = None


def _upload(array: Any, repeats: int) -> _Upload:
    cp = D.cupy()
    if isinstance(array, cp.ndarray):
        return _Upload(cp.ascontiguousarray(array), [])
    import cupyx

    host = np.ascontiguousarray(array)
    pinned = cupyx.empty_pinned(host.shape, dtype=host.dtype)
    pinned[...] = host
    xd = cp.empty(host.shape, dtype=host.dtype)
    samples, _ = _event_samples(lambda: xd.set(pinned, stream=D.work_stream()), max(1, repeats))
    return _Upload(xd, samples, pinned)


@dataclass
class _Phases:
    """Wall seconds per step of one evaluation (the stream synchronised at each mark), so a
    slow task says where its time went: the timed calls are a small part of it on 1 GiB."""

    seconds: dict[str, float] = field(default_factory=dict)
    _last: float = field(default_factory=time.perf_counter)

    def mark(self, name: str) -> None:
        D.work_stream().synchronize()
        now = time.perf_counter()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + now - self._last, 4)
        self._last = now


def _med(samples: list[float]) -> float | None:
    return statistics.median(samples) if samples else None


def evaluate_on_gpu(record: CompressionResult, cls: type[Codec], array: Any, mode: str, bound: float, *,
                    repeats: int, options: dict[str, Any]) -> Any:
    """Fill ``record`` by evaluating ``cls`` on the GPU (module docstring); returns the
    :class:`perfscout.tools.evaluation.Evaluation`. Bad input raises InputError/CodecError
    before anything is measured; a failure while running becomes the record's status."""
    from perfscout.tools.evaluation import Evaluation

    cp = D.cupy()
    ev = Evaluation(result=record)
    cls("lossless" if mode == "lossless" else "abs", bound if mode == "lossless" else 1.0, **options)  # bad options: CodecError now
    try:
        with D.work_stream():
            return _evaluate(ev, cls, array, mode, bound, repeats, options)
    except InputError:
        raise
    except cp.cuda.memory.OutOfMemoryError as exc:
        record.status, record.error = "gpu_out_of_memory", f"{record.codec} ran out of GPU memory: {exc}"
    except PerfscoutError as exc:
        record.status, record.error = "error", f"{record.codec} failed on the GPU: {exc}"
    except Exception as exc:  # noqa: BLE001 - a backend failure is a result, not a crash
        name = type(exc).__name__
        status = "gpu_out_of_memory" if "out of memory" in str(exc).lower() or "OutOfMemory" in name else "error"
        record.status, record.error = status, f"{record.codec} failed on the GPU: {name}: {exc}"  # type: ignore[assignment]
    return ev


def _evaluate(ev: Any, cls: type[Codec], array: Any, mode: str, bound: float, repeats: int,
              options: dict[str, Any]) -> Any:
    import cupyx

    from perfscout.analysis.metrics import quality_metrics

    up = xd = yd = blob = run = pinned = pinned_y = data = None
    try:
        cp = D.cupy()
        record = ev.result
        phases = _Phases()
        up = _upload(array, repeats)
        xd = up.xd
        phases.mark("upload")
        eb, note, range_s = resolve_abs_bound(xd, mode, bound, repeats)
        if note:
            ev.notes.append(note)
        record.abs_bound = 0.0 if mode == "lossless" else eb
        run = _runner(cls, mode, eb, bound, options)
        if isinstance(run.codec, D.DeviceCodec):
            run.codec.check_input(tuple(xd.shape), xd.dtype)  # InputError before any measurement
        record.device_name = D.device_name()

        phases.mark("range")
        blob = run.compress(xd)  # warm-up: library load, kernel compilation, pool growth
        run.decompress(blob, xd)
        phases.mark("warmup")
        comp, blob = _event_samples(lambda: run.compress(xd), repeats)
        zeroing, prepared = _event_samples(lambda: run.prepare_decode(blob, xd), 1)
        dec, yd = _event_samples(lambda: run.decompress(blob, xd), repeats)
        phases.mark("timed_calls")
        roof = copy_roof(xd, repeats)
        phases.mark("copy_roof")

        # the stream: the library's size against its buffer and the stream's own extent, then
        # through host bytes and back
        if not 0 < blob.nbytes <= blob.buffer.nbytes + (4 if isinstance(run, _SzpRunner) else 0):
            raise PerfscoutError(f"{record.codec} reported {blob.nbytes} compressed bytes for a buffer of "
                                 f"{blob.buffer.nbytes}")
        blob = run.settle(blob, xd)
        if blob.reported_nbytes != blob.nbytes:
            ev.notes.append(f"{record.codec} reported {blob.reported_nbytes} compressed bytes, but its stream "
                            f"occupies {blob.nbytes} (its own block sizes): the ratio and the host bytes use "
                            f"{blob.nbytes}")
        pinned = cupyx.empty_pinned((blob.nbytes,), dtype=np.uint8)
        d2h_stream, _ = _event_samples(lambda: run.copy_to_host(blob, pinned), repeats)
        data = run.host_bytes(blob, pinned)
        if len(data) != blob.nbytes:
            raise PerfscoutError(f"{record.codec}: {len(data)} bytes reached the host for a reported {blob.nbytes}")
        compressed, y_host = run.from_host(data, xd)
        word = cp.uint64 if yd.dtype.itemsize == 8 else cp.uint32
        same = bool(cp.all(y_host.ravel().view(word) == yd.ravel().view(word)))
        del y_host
        phases.mark("host_roundtrip")
        pinned_y = up.pinned if up.pinned is not None else cupyx.empty_pinned(yd.shape, dtype=yd.dtype)
        d2h, _ = _event_samples(lambda: yd.get(out=pinned_y, stream=D.work_stream()), repeats)
        phases.mark("d2h")

        record.compress_s, record.decompress_s = _med(comp), _med(dec)
        record.h2d_s, record.d2h_s = _med(up.h2d), _med(d2h)
        for name in ("compress", "decompress"):
            secs = getattr(record, f"{name}_s")
            if secs and secs > 0:
                setattr(record, f"{name}_MBps", record.nbytes / 1e6 / secs)

        check = verify_lossless(xd, yd) if mode == "lossless" else verify_on_device(xd, yd, eb)
        phases.mark("verify")
        ev.check, ev.compressed = check, compressed
        record.bound_ok, record.status = check.bound_ok, check.status  # type: ignore[assignment]
        messages = [m for m in (*ev.notes, check.message) if m]
        if not same:
            record.bound_ok, record.status = False, "error"  # type: ignore[assignment]
            messages.append("the stream decoded from its host bytes differs from the device-side decode")
        try:
            ev.metrics = quality_metrics(xd, yd, blob.nbytes)
        except (ArithmeticError, InputError) as exc:
            messages.append(f"quality metrics failed: {type(exc).__name__}: {exc}")
        phases.mark("metrics")
        for key in ("ratio", "bitrate", "max_abs_err", "max_rel_err", "max_pw_rel_err", "rmse", "nrmse", "psnr",
                    "snr", "pearson", "ssim", "err_autocorr_lag1"):
            value = ev.metrics.get(key)
            setattr(record, key, None if value is None else float(value))

        copy_gbps = roof["copy_GBps"]
        gbps = {k: record.nbytes / s / 1e9 for k, s in (("compress", record.compress_s),
                                                        ("decompress", record.decompress_s)) if s}
        detail: dict[str, Any] = {
            "copy_GBps": copy_gbps, "copy_s": roof["copy_s"],
            "compress_GBps": gbps.get("compress"), "decompress_GBps": gbps.get("decompress"),
            "compress_x_copy": gbps["compress"] / copy_gbps if "compress" in gbps else None,
            "decompress_x_copy": gbps["decompress"] / copy_gbps if "decompress" in gbps else None,
            "compress_min_s": min(comp), "compress_max_s": max(comp),
            "decompress_min_s": min(dec), "decompress_max_s": max(dec),
            "timing": "e2e: one device-resident API call between two CUDA events, median",
            **({"decode_target": "zeroed once outside the timed decodes (the library leaves all-zero blocks "
                                 "unwritten); each timed decode writes into it",
                "decode_zeroing_s": zeroing[0], "decompress_with_zeroing_s": statistics.median(dec) + zeroing[0]}
               if prepared else {}),
            "range_s": range_s, "d2h_stream_s": _med(d2h_stream),
            "library_nbytes": blob.reported_nbytes, "stream_nbytes": blob.nbytes, "host_nbytes": len(data),
            "host_roundtrip_identical": same,
            "abs_bound": eb, "eb_used": run.eb_used(),
            "n_beyond": check.n_beyond, "n_violations": check.n_violations,
            "phases_s": phases.seconds,
        }
        if check.n_beyond:
            detail["worst"] = {"index": list(check.worst_index), "excess": check.worst_excess,
                               "excess_over_bound": (check.worst_excess / eb) if eb else None}
        messages.append(format_detail(detail))
        record.error = "; ".join(messages)
        return ev
    finally:
        # An import that runs for the first time in here can leave an exception whose
        # traceback holds this frame for the life of the process (on the H200: optuna's
        # deferred-import errors, loaded through a lazy module first touched in here, kept
        # the first task's 210 MB of device arrays after the GPU worker released its pool):
        # the frame lets go of the task's device arrays when it ends.
        up = xd = yd = blob = run = pinned = pinned_y = data = None
