"""Codecs out of process: one call in a child, so a native crash cannot take the caller.

The native libraries perfscout drives can kill the process they run in (SZ3's filter
segfaults on values near the dtype's largest, SZ 2.1 allocates until the OOM killer,
a forged stream walks zfp off its buffer). :func:`run_isolated` runs one function call
in a child process with the sweep worker's limits (:func:`perfscout.tools.sweep.worker.
limit_memory`: an address-space limit on what the child adds; a wall-clock timeout;
SIGKILL when the caller dies) and hands back its value or its exception. When the child
dies (a signal, an exit without a reply) or overruns its time, :class:`CodecCrashed` says
so with the signal, the limit and a summary of the input; the caller lives on.

Start method. CPU work is **forked** from the caller: nothing is pickled on the way in
(the child sees the caller's arrays, registered plug-in codecs and all), which keeps the
per-call overhead to a fork and a reply (``benchmarks/isolation_overhead.py``). Results
larger than ``SHARED_RESULT_BYTES`` come back through an anonymous shared mapping, not
the pipe. CUDA work starts from a clean **forkserver** process instead: a CUDA context
does not survive ``fork``, and a caller that once touched the GPU would otherwise hand
its children a dead one. The forkserver's children get the caller's registry of codecs
(by import path) before they run.

Inside the child, file descriptor 1 is pointed at stderr: whatever a native library
prints cannot corrupt the caller's ``--json`` stdout.
"""

from __future__ import annotations

import mmap
import multiprocessing as mp
import os
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np

from perfscout.errors import CodecError, PerfscoutError
from perfscout.tools.sweep.worker import die_with_parent, limit_memory

#: Wall-clock limit of one isolated call unless the caller gives one (seconds).
DEFAULT_TIMEOUT_S = 900.0
#: Memory a child may add to what it inherits: at least this many MiB ...
MIN_MEMORY_LIMIT_MB = 4096
#: ... or this many times the input's size (float64 copies, search trials, metrics).
MEMORY_PER_INPUT_BYTE = 24
#: Arrays in a CPU child's reply at least this large come back through shared memory.
SHARED_RESULT_BYTES = 1 << 20

#: Imported once by the forkserver, not by every child (missing ones are skipped).
_FORKSERVER_PRELOAD = ["numpy", "perfscout.tools.evaluate", "perfscout.tools.isolate", "perfscout.analysis.metrics",
                       "perfscout.analysis.timing", "perfscout.codecs.szp_gpu", "perfscout.tools.gpu_eval"]


class CodecCrashed(CodecError):
    """The child died or overran its time; ``status`` is ``codec_crashed`` or ``codec_timeout``."""

    def __init__(self, message: str, status: str = "codec_crashed", signal_name: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.signal_name = signal_name

    def __reduce__(self) -> tuple[type, tuple[str, str, str]]:
        return (type(self), (str(self), self.status, self.signal_name))


def _total_memory_mb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError):
        return float("inf")


def default_memory_limit_mb(nbytes: int) -> int:
    """What a child may add for an input of ``nbytes``: generous, never past the machine."""
    want = max(MIN_MEMORY_LIMIT_MB, MEMORY_PER_INPUT_BYTE * nbytes / 2**20 + 1024)
    return int(min(want, 0.9 * _total_memory_mb()))


def _address_space_bytes() -> int:
    """This process's virtual size (what a forked child starts with)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def input_summary(array: Any) -> str:
    """dtype, shape, finite min/max and the non-finite count: what a crash report needs."""
    if not isinstance(array, np.ndarray):
        return type(array).__name__
    text = f"{array.dtype}{tuple(array.shape)}"
    if array.size == 0 or not np.issubdtype(array.dtype, np.floating):
        return text
    with np.errstate(all="ignore"):
        finite = np.isfinite(array)
        n_bad = int(array.size - np.count_nonzero(finite))
        if n_bad < array.size:
            vals = array[finite] if n_bad else array
            text += f", min {float(vals.min()):.6g}, max {float(vals.max()):.6g}"
    return text + f", {n_bad} non-finite"


# -- the child side -----------------------------------------------------------------------
@dataclass
class _SharedArray:
    """A reply's array left in the shared mapping (offset, dtype, shape)."""

    offset: int
    dtype: str
    shape: tuple[int, ...]


def _pack_arrays(value: Any, shared: mmap.mmap | None) -> Any:
    """Move large NumPy arrays of an Evaluation-like reply into the shared mapping."""
    if shared is None:
        return value
    offset = 0

    def place(a: Any) -> Any:
        nonlocal offset
        if not isinstance(a, np.ndarray) or a.nbytes < SHARED_RESULT_BYTES or offset + a.nbytes > len(shared):
            return a
        a = np.ascontiguousarray(a)
        view = np.frombuffer(shared, dtype=a.dtype, count=a.size, offset=offset).reshape(a.shape)
        view[...] = a
        ref = _SharedArray(offset, a.dtype.str, tuple(a.shape))
        offset += -(-a.nbytes // 64) * 64
        del view
        return ref

    if isinstance(value, np.ndarray):
        return place(value)
    if hasattr(value, "reconstructed"):
        value.reconstructed = place(value.reconstructed)
    return value


def _unpack_arrays(value: Any, shared: mmap.mmap | None) -> Any:
    def take(ref: Any) -> Any:
        if not isinstance(ref, _SharedArray) or shared is None:
            return ref
        dtype = np.dtype(ref.dtype)
        n = int(np.prod(ref.shape))
        return np.frombuffer(shared, dtype=dtype, count=n, offset=ref.offset).reshape(ref.shape).copy()

    if isinstance(value, _SharedArray):
        return take(value)
    if hasattr(value, "reconstructed"):
        value.reconstructed = take(value.reconstructed)
    return value


def _reply(conn: Connection, kind: str, payload: Any) -> None:
    try:
        conn.send((kind, payload))
    except Exception as exc:  # noqa: BLE001 - an unpicklable exception still gets reported
        conn.send(("error", (type(payload).__name__, f"{payload} (reply not picklable: {exc})",
                             isinstance(payload, PerfscoutError))))


def _child_main(conn: Connection, fn: Callable[..., Any], args: tuple, kwargs: dict, limit_mb: int,
                device: str, base_bytes: int, shared: mmap.mmap | None, registry: dict[str, str] | None) -> None:
    """Run ``fn(*args, **kwargs)`` under the limits; reply (``ok``|``raise``|``error``, payload)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    die_with_parent()
    try:
        os.dup2(2, 1)  # a library's prints go to stderr, never into the caller's stdout
    except OSError:
        pass
    if registry:
        from perfscout.codecs import registry as reg

        for codec_id, path in registry.items():
            reg._KNOWN.setdefault(codec_id, path)
    limit_memory(limit_mb, device, base_bytes=base_bytes)
    try:
        value = fn(*args, **kwargs)
        _reply(conn, "ok", _pack_arrays(value, shared))
    except MemoryError:
        _reply(conn, "error", ("MemoryError", f"the codec ran out of memory: it may add at most {limit_mb} MiB "
                                              "to the caller's address space", False))
    except PerfscoutError as exc:
        _reply(conn, "raise", exc)
    except BaseException as exc:  # noqa: BLE001 - reported to the caller, which decides
        _reply(conn, "error", (type(exc).__name__, "".join(traceback.format_exception(exc)), False))
    finally:
        conn.close()


# -- the caller side ----------------------------------------------------------------------
_FORKSERVER: Any = None


_CHILD_PREFIX = "perfscout-codec:"


def _without_main(get_preparation_data: Callable[[str], dict]) -> Callable[[str], dict]:
    """multiprocessing re-imports the caller's ``__main__`` in every forkserver child (the
    ``perfscout`` script, a benchmark, ``<stdin>``): slow, and impossible for some. Our
    children need nothing from it (the function they run lives in perfscout), so for them,
    and only them, the main module is left out."""

    def prepare(name: str) -> dict:
        data = get_preparation_data(name)
        if str(name).startswith(_CHILD_PREFIX):
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data

    prepare.__wrapped__ = get_preparation_data  # type: ignore[attr-defined]
    return prepare


def _context(device: str) -> Any:
    global _FORKSERVER
    if device != "cuda":
        return mp.get_context("fork")
    if _FORKSERVER is None:
        from multiprocessing import spawn

        if not hasattr(spawn.get_preparation_data, "__wrapped__"):
            spawn.get_preparation_data = _without_main(spawn.get_preparation_data)
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(_FORKSERVER_PRELOAD)
        _FORKSERVER = ctx
    return _FORKSERVER


def _died(proc: Any) -> tuple[str, str]:
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return name, f"died from {name} ({code})"
    return "", f"exited with code {code} without a reply"


def run_isolated(
    fn: Callable[..., Any],
    args: tuple = (),
    kwargs: dict[str, Any] | None = None,
    *,
    what: str,
    device: str = "cpu",
    timeout_s: float | None = None,
    memory_limit_mb: int | None = None,
    input_array: Any = None,
    result_nbytes: int = 0,
) -> Any:
    """``fn(*args, **kwargs)`` in a child process; its value, or its exception re-raised.

    ``what`` names the work in a crash report (``"sz3-h5 abs 0.001"``), ``input_array``
    is summarised there. ``result_nbytes`` sizes the shared mapping for a large array in
    the reply (CPU only). A child that dies or overruns ``timeout_s`` raises
    :class:`CodecCrashed`; one that ran out of its memory limit raises CodecError.
    """
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
    nbytes = int(getattr(input_array, "nbytes", 0) or 0)
    limit_mb = default_memory_limit_mb(nbytes) if memory_limit_mb is None else int(memory_limit_mb)
    ctx = _context(device)
    forked = device != "cuda"
    shared = None
    if forked and result_nbytes >= SHARED_RESULT_BYTES:
        try:
            shared = mmap.mmap(-1, result_nbytes + 4096)
        except (OSError, ValueError, OverflowError):  # too large to map: the pipe carries it
            shared = None
    registry = None
    if not forked:
        from perfscout.codecs import registry as reg

        registry = dict(reg._KNOWN)
    recv_end, send_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_child_main, name=f"{_CHILD_PREFIX}{what}",
        args=(send_end, fn, tuple(args), dict(kwargs or {}), limit_mb, device, _address_space_bytes() if forked else 0, shared, registry),
        daemon=True,
    )
    try:
        proc.start()
        send_end.close()
        deadline = time.monotonic() + timeout
        reply = None
        while reply is None:
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                proc.join()
                raise CodecCrashed(
                    f"{what} did not finish within {timeout:g} s (timeout); its process was killed "
                    f"(input: {input_summary(input_array)})", status="codec_timeout")
            ready = wait([recv_end, proc.sentinel], timeout=left)
            if recv_end in ready:
                try:
                    reply = recv_end.recv()
                except (EOFError, OSError):
                    proc.join()
                    break
            elif proc.sentinel in ready:
                # Exited: a reply may still sit in the pipe (sent just before exit).
                if recv_end.poll(0):
                    continue
                proc.join()
                break
        proc.join()
        if reply is None:
            sig, how = _died(proc)
            limit = f"; its address space was limited to {limit_mb} MiB above the caller's" if forked else ""
            raise CodecCrashed(f"{what}: the codec process {how}{limit} (input: {input_summary(input_array)}); "
                               "the caller is unaffected", signal_name=sig)
        kind, payload = reply
        if kind == "ok":
            return _unpack_arrays(payload, shared)
        if kind == "raise":
            raise payload
        name, text, _ = payload
        if name == "MemoryError":
            raise CodecError(f"{what}: {text} (input: {input_summary(input_array)})")
        raise RuntimeError(f"{what} failed in its child process with {name}:\n{text}")
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
        recv_end.close()
        if shared is not None:
            shared.close()

