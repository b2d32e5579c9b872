"""Codecs out of process: one call in a child, so a native crash cannot take the caller.

The native libraries perfscout drives can kill the process they run in (SZ3's filter
segfaults on values near the dtype's largest, SZ 2.1 allocates until the OOM killer,
a forged stream walks zfp off its buffer). :func:`run_isolated` runs one function call
in a child process with the contained-process limits (:func:`perfscout.tools.process_limits.
limit_memory`: an address-space limit on what the child adds; a wall-clock timeout;
SIGKILL when the caller dies) and hands back its value or its exception. When the child
dies (a signal, an exit without a reply) or overruns its time, :class:`CodecCrashed` says
so with the signal, the limit and a summary of the input; the caller lives on.

Start method. CPU work is **forked** from the caller (``os.fork`` itself: it also works
inside daemonic Dask or pool workers, where multiprocessing refuses to start children):
nothing is pickled on the way in (the child sees the caller's arrays, registered plug-in
codecs and all), which keeps the per-call overhead to a fork and a reply
(``benchmarks/isolation_overhead.py``). Results larger than ``SHARED_RESULT_BYTES`` come
back through an anonymous shared mapping, not the pipe (or one the caller made and keeps,
as views: evaluate's hand-over between its two children). A child that has replied is
not waited for while it exits (freeing a field-sized array is ~0.1 s): it is reaped by
the next call, at exit, or by :func:`reap_children`. CUDA work starts from a clean **forkserver** process instead: a CUDA context
does not survive ``fork``, and a caller that once touched the GPU would otherwise hand
its children a dead one. The forkserver's children get the caller's registry of codecs
(by import path) before they run.

Inside the child, file descriptor 1 is pointed at stderr: whatever a native library
prints cannot corrupt the caller's ``--json`` stdout.
"""

from __future__ import annotations

import atexit
import mmap
import multiprocessing as mp
import os
import pickle
import select
import signal
import struct
import threading
import ctypes  # noqa: F401 - imported once by the caller, not by every forked child (die_with_parent)
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

import numpy as np

from perfscout.errors import CodecError, PerfscoutError
from perfscout.tools.process_limits import die_with_parent, limit_memory

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
                       "perfscout.analysis.timing", "perfscout.codecs.szp.codec", "perfscout.tools.gpu_eval"]


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
#: In a forked child: objects its exit frees (set by keep_until_exit), not the reply's path.
_KEPT_UNTIL_EXIT: list[Any] | None = None


def keep_until_exit(*objects: Any) -> None:
    """In an isolated child, hold ``objects`` until the child exits: freeing a field-sized
    array costs ~0.1 s (munmap of 256 MiB on the 2-core VM) and would come before the
    reply; the exit frees it while the caller, which does not wait for it
    (:func:`reap_children`), goes on. Outside a child: nothing (the caller frees as usual)."""
    if _KEPT_UNTIL_EXIT is not None:
        _KEPT_UNTIL_EXIT.extend(o for o in objects if o is not None)


@dataclass
class _SharedArray:
    """A reply's array left in the shared mapping (offset, dtype, shape)."""

    offset: int
    dtype: str
    shape: tuple[int, ...]


def _pack_arrays(value: Any, shared: mmap.mmap | None) -> Any:
    """Move large NumPy arrays of an Evaluation-like reply into the shared mapping (and a
    device array, which would need CUDA in the caller to unpickle, to the host)."""
    recon = getattr(value, "reconstructed", None)
    if recon is not None and not isinstance(recon, np.ndarray) and hasattr(recon, "get"):
        value.reconstructed = recon.get()
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


def _unpack_arrays(value: Any, shared: mmap.mmap | None, copy: bool = True) -> Any:
    """The reply with its shared arrays back in place: copies (the mapping is closed after
    the call), or views of a mapping the caller owns (``copy=False``)."""

    def take(ref: Any) -> Any:
        if not isinstance(ref, _SharedArray) or shared is None:
            return ref
        dtype = np.dtype(ref.dtype)
        n = int(np.prod(ref.shape))
        view = np.frombuffer(shared, dtype=dtype, count=n, offset=ref.offset).reshape(ref.shape)
        return view.copy() if copy else view

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

        for codec_id, path in registry.items():  # the parent's run-time registrations
            reg.register_codec(codec_id, path)
    limit_memory(limit_mb, device, base_bytes=base_bytes)
    global _KEPT_UNTIL_EXIT
    _KEPT_UNTIL_EXIT = []
    try:
        value = fn(*args, **kwargs)
        keep_until_exit(getattr(value, "reconstructed", None), value)  # packing replaces them; exit frees them
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


class _PipeWriter:
    """The child's end of a forked call: length-prefixed pickles on a pipe."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, obj: Any) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(struct.pack("<Q", len(data)) + data)
        while view:
            view = view[os.write(self.fd, view):]

    def close(self) -> None:
        os.close(self.fd)


#: Forked children that replied and were still exiting: reaped later (reap_children).
_UNREAPED: set[int] = set()
_UNREAPED_LOCK = threading.Lock()


def reap_children(wait: bool = False) -> int:
    """Reap the isolated children that had replied but not yet exited when their call
    returned (a child's exit frees its field-sized memory, ~0.1 s the caller need not
    wait for); ``wait``: block until each has. Called by every isolated call and at exit;
    call it with ``wait=True`` before reading ``RUSAGE_CHILDREN``. Returns how many
    remain. A pid someone else reaped (``os.wait()``) is simply dropped."""
    with _UNREAPED_LOCK:
        pids = list(_UNREAPED)
    for pid in pids:
        try:
            done, _ = os.waitpid(pid, 0 if wait else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            with _UNREAPED_LOCK:
                _UNREAPED.discard(pid)
    with _UNREAPED_LOCK:
        return len(_UNREAPED)


atexit.register(reap_children, True)


def _run_forked(fn: Callable[..., Any], args: tuple, kwargs: dict, limit_mb: int, device: str,
                shared: mmap.mmap | None, timeout: float,
                while_waiting: Callable[[], Any] | None = None) -> tuple[Any, int | None, bool]:
    """(reply or None, wait status or None, timed out) of ``fn`` in a forked child.

    ``os.fork`` directly, not multiprocessing: no pickling on the way in, no "daemonic
    processes may not have children" inside Dask or pool workers, a few ms less. The reply
    is length-prefixed, so a pipe end inherited by a sibling child (another thread forking
    at the same moment) cannot keep us waiting for an EOF."""
    base = _address_space_bytes()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read_fd)
            _child_main(_PipeWriter(write_fd), fn, args, kwargs, limit_mb, device, base, shared, None)  # type: ignore[arg-type]
        except BaseException:  # noqa: BLE001 - nothing may unwind into the caller's stack
            code = 70
        finally:
            os._exit(code)
    os.close(write_fd)
    buf = bytearray()
    need: int | None = None
    status: int | None = None
    deadline = time.monotonic() + timeout
    try:
        if while_waiting is not None:  # the caller's own work, on another core while the child runs
            try:
                while_waiting()
            except BaseException:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise
        while True:
            if need is None and len(buf) >= 8:
                need = 8 + struct.unpack_from("<Q", buf)[0]
            if need is not None and len(buf) >= need:
                break
            if status is not None:  # exited and the pipe is drained
                break
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None, None, True
            ready, _, _ = select.select([read_fd], [], [], min(left, 0.05))
            if ready:
                chunk = os.read(read_fd, 1 << 20)
                if chunk:
                    buf += chunk
                    continue
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
                while select.select([read_fd], [], [], 0)[0]:
                    chunk = os.read(read_fd, 1 << 20)
                    if not chunk:
                        break
                    buf += chunk
    finally:
        os.close(read_fd)
    complete = need is not None and len(buf) >= need
    if status is None:
        done, st = os.waitpid(pid, os.WNOHANG if complete else 0)
        if done:
            status = st
        else:  # replied and exiting: its exit is not the caller's wait
            with _UNREAPED_LOCK:
                _UNREAPED.add(pid)
    reply = None
    if complete:
        try:
            reply = pickle.loads(bytes(buf[8:need]))
        except Exception:  # noqa: BLE001 - a torn reply is a crash
            reply = None
    if reply is None and status is None:  # a torn reply: the crash report needs the exit status
        with _UNREAPED_LOCK:
            _UNREAPED.discard(pid)
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            status = None
    return reply, status, False


def _run_forkserver(fn: Callable[..., Any], args: tuple, kwargs: dict, limit_mb: int, device: str,
                    what: str, timeout: float) -> tuple[Any, int | None, bool]:
    """The same from a forkserver (CUDA work), through multiprocessing."""
    from perfscout.codecs import registry as reg

    ctx = _context(device)
    recv_end, send_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, name=f"{_CHILD_PREFIX}{what}",
                       args=(send_end, fn, args, kwargs, limit_mb, device, 0, None, reg.registered_codecs()), daemon=False)
    try:
        proc.start()
        send_end.close()
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                proc.join()
                return None, None, True
            ready = wait([recv_end, proc.sentinel], timeout=left)
            if recv_end in ready:
                try:
                    reply = recv_end.recv()
                except (EOFError, OSError):
                    reply = None
                proc.join()
                return reply, _exit_status(proc.exitcode), False
            if proc.sentinel in ready and not recv_end.poll(0):
                proc.join()
                return None, _exit_status(proc.exitcode), False
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
        recv_end.close()


def _exit_status(exitcode: int | None) -> int | None:
    """multiprocessing's exitcode (-signal or code) as an os.wait status."""
    if exitcode is None:
        return None
    return -exitcode if exitcode < 0 else exitcode << 8


def _died(status: int | None) -> tuple[str, str]:
    if status is not None and os.WIFSIGNALED(status):
        num = os.WTERMSIG(status)
        try:
            name = signal.Signals(num).name
        except ValueError:
            name = f"signal {num}"
        return name, f"died from {name} (-{num})"
    code = os.WEXITSTATUS(status) if status is not None else None
    return "", f"exited with code {code} without a reply"


def _default_timeout_s(nbytes: int) -> float:
    """DEFAULT_TIMEOUT_S, longer for large inputs (2 s per MiB: a searched mode on a
    slow machine); a timeout must catch a hang, never a legitimately slow evaluation."""
    return DEFAULT_TIMEOUT_S + 2.0 * nbytes / 2**20


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
    shared: mmap.mmap | None = None,
    while_waiting: Callable[[], Any] | None = None,
) -> Any:
    """``fn(*args, **kwargs)`` in a child process; its value, or its exception re-raised.

    ``what`` names the work in a crash report (``"sz3-h5 abs 0.001"``), ``input_array``
    is summarised there. ``result_nbytes`` sizes the shared mapping for a large array in
    the reply (CPU only). A child that dies or overruns ``timeout_s`` (default: 900 s plus
    2 s per MiB of input) raises :class:`CodecCrashed`; one that ran out of its memory
    limit raises CodecError.

    CPU only: ``shared`` is a mapping the caller made and owns (it closes it): the reply's
    large arrays come back as views of it, not copies (``result_nbytes`` is then ignored).
    ``while_waiting`` runs in this process right after the fork, before the reply is
    awaited (evaluate loads the metric kernels meanwhile); the timeout counts it.
    """
    if _UNREAPED:
        reap_children()
    nbytes = int(getattr(input_array, "nbytes", 0) or 0)
    timeout = _default_timeout_s(max(nbytes, result_nbytes)) if timeout_s is None else float(timeout_s)
    limit_mb = default_memory_limit_mb(nbytes) if memory_limit_mb is None else int(memory_limit_mb)
    forked = device != "cuda"
    own_shared = shared is None
    if not forked and not own_shared:
        raise ValueError("a caller's shared mapping is for forked (CPU) children only")
    if forked and own_shared and result_nbytes >= SHARED_RESULT_BYTES:
        try:
            shared = mmap.mmap(-1, result_nbytes + 4096)
        except (OSError, ValueError, OverflowError):  # too large to map: the pipe carries it
            shared = None
    try:
        if forked:
            reply, status, timed_out = _run_forked(fn, tuple(args), dict(kwargs or {}), limit_mb, device, shared, timeout,
                                                   while_waiting)
        else:
            reply, status, timed_out = _run_forkserver(fn, tuple(args), dict(kwargs or {}), limit_mb, device, what,
                                                       timeout)
        if timed_out:
            raise CodecCrashed(
                f"{what} did not finish within {timeout:g} s (timeout); its process was killed "
                f"(input: {input_summary(input_array)})", status="codec_timeout")
        if reply is None:
            sig, how = _died(status)
            limit = f"; its address space was limited to {limit_mb} MiB above the caller's" if forked else ""
            raise CodecCrashed(f"{what}: the codec process {how}{limit} (input: {input_summary(input_array)}); "
                               "the caller is unaffected", signal_name=sig)
        kind, payload = reply
        if kind == "ok":
            return _unpack_arrays(payload, shared, copy=own_shared)
        if kind == "raise":
            raise payload
        name, text, _ = payload
        if name == "MemoryError":
            raise CodecError(f"{what}: {text} (input: {input_summary(input_array)})")
        raise RuntimeError(f"{what} failed in its child process with {name}:\n{text}")
    finally:
        if own_shared and shared is not None:
            shared.close()
