"""Native decoders run in a helper process: a forged stream that crashes one costs an error, not the reader.

The C libraries behind sz3, sz2, sz3-h5 and zfp trust their input. Every check that can
be made without decoding runs first, in the caller (:func:`perfscout.codecs._checks.checked_stream`:
seal, shape, dtype, the library's own header; the declared size against memory), but a
forger who recomputes every checksum can still hand a decoder a body that passes them and
makes it read out of bounds: 9 of 200 forged chunks killed a Zarr reader with SIGSEGV.
So the decoder itself runs here, in one long-lived child process per reader process
(``python -m perfscout.codecs.decoder_process``), fed one container at a time over a
pipe; the values come back straight into the caller's array (no second copy), and a
child that dies is reported as :class:`~perfscout.errors.CodecError` naming its signal
and replaced on the next call.

Protocol (binary, on the child's stdin/stdout; anything a library prints goes to its
stderr): request ``b"D" u64 n`` + the container's ``n`` bytes; reply ``b"O" u64 n`` + the
values' raw bytes (C order, native byte order), or ``b"E" u64 n`` + a UTF-8 message.

With ``PERFSCOUT_DECODER_TRANSPORT=shm``, requests of up to ``SHM_MAX`` bytes (the
container or the values, whichever is larger: the usual 1-16 MiB Zarr chunk) travel
through a shared-memory region instead (a memfd both processes map): request
``b"S" u64 n u64 size`` with the container in the region's first ``n`` bytes (``size``:
the region's length, which the child maps again when it changed), reply ``b"O" u64 n``
with the values in the region's first ``n`` bytes; only the 9-17 byte heads cross the
pipe. The parent copies the values out into a private array before it returns: the
child (which may have run a forged stream) never holds a mapping of memory the caller
keeps. Larger requests take the pipe, so the region never holds more than ``SHM_MAX``.
It is off by default: on the loaded 2-core VM neither it nor the pipes widened to 1 MiB
(the default) took a reliable share off the round trip
(``benchmarks/results/numcodecs_decode_cost_cpu.json``): what a request costs is waking the
other process twice, not the bytes. A reader that trusts its stores skips the round trip
(:mod:`perfscout.codecs.numcodecs`: ``PERFSCOUT_TRUSTED_DECODE``, ``trusted_decode``).

The child's address space is capped per request (``RLIMIT_AS``: what it had plus
``AS_HEADROOM`` times the declared size, plus ``AS_BASE``), so a stream whose body makes
a library allocate without end fails there, not in the machine's memory.
"""

from __future__ import annotations

import atexit
import mmap
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from perfscout.errors import CodecError, PerfscoutError

_HEAD = struct.Struct("<cQ")
_SHM_HEAD = struct.Struct("<cQQ")
#: Largest request (container or values) sent through the shared region; larger ones take the pipe.
SHM_MAX = 16 * 2**20
#: Whether requests up to SHM_MAX use the shared region (Linux memfd) rather than the pipe:
#: ``PERFSCOUT_DECODER_TRANSPORT=shm``. Off by default: on the loaded 2-core VM it did not beat
#: the widened pipe (benchmarks/results/numcodecs_decode_cost_cpu.json: the round trip's cost is
#: the two processes' wake-ups, not the bytes), and it keeps up to SHM_MAX resident in both.
SHM_TRANSPORT = hasattr(os, "memfd_create") and os.environ.get("PERFSCOUT_DECODER_TRANSPORT", "") == "shm"
#: The pipes' buffer, raised from Linux's 64 KiB where allowed (fewer wake-ups per request).
PIPE_BYTES = 2**20
#: Per-request address-space allowance of the child, beyond what it had mapped before.
AS_HEADROOM = 8
AS_BASE = 512 * 2**20
#: How long one decode may take: a base plus a generous rate (a decoder looping forever
#: on a forged stream is stopped).
TIMEOUT_BASE_S = 60.0
TIMEOUT_S_PER_GIB = 120.0


class _Child:
    """One decoder process, used under a lock (one request at a time)."""

    def __init__(self, shared: bool | None = None, pipe_bytes: int | None = None) -> None:
        # The transport, fixed per child (the benchmark compares them side by side).
        self.shared = SHM_TRANSPORT if shared is None else shared
        self.pipe_bytes = PIPE_BYTES if pipe_bytes is None else pipe_bytes
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pid_of_parent = 0
        self.shm_fd = -1  # the shared region (a memfd), its mapping here and its length
        self.shm: mmap.mmap | None = None
        self.shm_size = 0

    def _start(self) -> subprocess.Popen[bytes]:
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
        self._drop_region()
        argv = [sys.executable, "-m", "perfscout.codecs.decoder_process"]
        pass_fds: tuple[int, ...] = ()
        if self.shared:
            try:
                self.shm_fd = os.memfd_create("perfscout-decoder", os.MFD_CLOEXEC)
                argv += ["--shm-fd", str(self.shm_fd)]
                pass_fds = (self.shm_fd,)
            except OSError:  # no memfd here (a seccomp filter, an old kernel): the pipe carries everything
                self.shm_fd = -1
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=env, bufsize=0, close_fds=True, pass_fds=pass_fds)
        self.pid_of_parent = os.getpid()
        assert proc.stdin is not None and proc.stdout is not None
        if self.pipe_bytes:
            _widen_pipe(proc.stdin.fileno(), self.pipe_bytes)
            _widen_pipe(proc.stdout.fileno(), self.pipe_bytes)
        return proc

    def _region(self, need: int) -> mmap.mmap:
        """The shared region, at least ``need`` bytes long (grown in whole MiB)."""
        if self.shm is None or self.shm_size < need:
            size = -(-need // 2**20) * 2**20
            if self.shm is not None:
                self.shm.close()
            os.ftruncate(self.shm_fd, size)
            self.shm, self.shm_size = mmap.mmap(self.shm_fd, size), size
        return self.shm

    def _drop_region(self) -> None:
        if self.shm is not None:
            self.shm.close()
        if self.shm_fd >= 0 and self.pid_of_parent == os.getpid():
            os.close(self.shm_fd)
        self.shm, self.shm_size, self.shm_fd = None, 0, -1

    def _alive(self) -> subprocess.Popen[bytes]:
        # After a fork the child process belongs to the parent: start our own.
        if self.proc is None or self.pid_of_parent != os.getpid() or self.proc.poll() is not None:
            if self.pid_of_parent != os.getpid():  # a forked copy: the region is the parent's, not ours
                self.shm, self.shm_size, self.shm_fd = None, 0, -1
            self.proc = self._start()
        return self.proc

    def _died(self, codec_id: str) -> CodecError:
        proc, self.proc = self.proc, None
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exited with status {code}")
        return CodecError(f"{codec_id} stream could not be decoded: the native decoder {how} on it (the chunk is "
                          "corrupt or forged; it was decoded in a helper process, so nothing else was harmed)")

    def decode(self, container: bytes, codec_id: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        out = np.empty(shape, dtype=dtype)
        view = memoryview(out).cast("B")
        allowed_s = TIMEOUT_BASE_S + TIMEOUT_S_PER_GIB * out.nbytes / 2**30
        deadline = time.monotonic() + allowed_s
        with self.lock:
            try:
                proc = self._alive()
            except OSError as exc:  # no interpreter to start (an embedded Python, a process limit)
                raise CodecError(f"{codec_id} stream could not be decoded: the decoder's helper process did not "
                                 f"start ({exc})") from None
            assert proc.stdin is not None and proc.stdout is not None
            shared = self.shm_fd >= 0 and max(len(container), out.nbytes) <= SHM_MAX
            try:
                if shared:
                    region = self._region(max(len(container), out.nbytes))
                    region[: len(container)] = container
                    proc.stdin.write(_SHM_HEAD.pack(b"S", len(container), self.shm_size))
                else:
                    proc.stdin.write(_HEAD.pack(b"D", len(container)))
                    proc.stdin.write(container)
                proc.stdin.flush()
                head = bytearray(_HEAD.size)
                _read_exact(proc.stdout.fileno(), memoryview(head), deadline)
                kind, n = _HEAD.unpack(head)
                if kind == b"E":
                    message = bytearray(min(n, 1 << 16))
                    _read_exact(proc.stdout.fileno(), memoryview(message), deadline)
                    raise CodecError(message.decode("utf-8", "replace"))
                if kind != b"O" or n != out.nbytes:  # the size is ours (the declared one), never the child's
                    raise EOFError("bad reply")
                if shared:
                    view[:] = memoryview(region)[: out.nbytes]  # into the caller's private array
                else:
                    _read_exact(proc.stdout.fileno(), view, deadline)
            except TimeoutError:
                if self.proc is not None:
                    self.proc.kill()
                err = self._died(codec_id)
                raise CodecError(f"{codec_id} stream could not be decoded: the decoder took longer than "
                                 f"{allowed_s:.0f} s and was stopped ({err})") from None
            except (OSError, EOFError):
                raise self._died(codec_id) from None
        return out

    def close(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and self.pid_of_parent == os.getpid():
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
        self._drop_region()


def _widen_pipe(fd: int, nbytes: int) -> None:
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, nbytes)
    except (ImportError, AttributeError, OSError):  # not Linux, or above pipe-max-size: 64 KiB it is
        pass


def _read_exact(fd: int, view: memoryview, deadline: float) -> None:
    pos = 0
    while pos < len(view):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
        got = os.readv(fd, [view[pos:]])
        if got == 0:
            raise EOFError
        pos += got


_CHILD = _Child()
atexit.register(_CHILD.close)


def decode_in_child(container: bytes, codec_id: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """The values of a container (already checked by the caller) decoded by the helper process."""
    return _CHILD.decode(container, codec_id, tuple(shape), np.dtype(dtype))


# -- the child ------------------------------------------------------------------------------
def _cap_address_space(nbytes: int, base: int) -> None:
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        soft = base + AS_HEADROOM * nbytes + AS_BASE
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    except (ImportError, ValueError, OSError):  # not POSIX, or a limit we may not set: uncapped
        pass


def _mapped_bytes() -> int:
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _serve(inp: int, out: int, shm_fd: int = -1) -> None:
    from perfscout.codecs.framing import from_bytes
    from perfscout.codecs.registry import get_codec

    rin, wout = os.fdopen(inp, "rb", buffering=0), os.fdopen(out, "wb", buffering=0)

    def read(n: int) -> bytes:
        buf = bytearray(n)
        view, pos = memoryview(buf), 0
        while pos < n:
            got = rin.readinto(view[pos:])
            if not got:
                raise EOFError
            pos += got
        return bytes(buf)

    base = _mapped_bytes()
    region: mmap.mmap | None = None
    while True:
        try:
            kind, n = _HEAD.unpack(read(_HEAD.size))
            if kind == b"S":
                (size,) = struct.unpack("<Q", read(8))
                if region is None or len(region) != size:  # the parent grew (or replaced) it
                    if region is not None:
                        region.close()
                    region = mmap.mmap(shm_fd, size)
                container = bytes(region[:n])  # a copy: the reply overwrites the region
            else:
                container = read(n)
        except EOFError:
            return
        try:
            compressed, _ = from_bytes(container)
            nbytes = int(np.prod(compressed.shape)) * np.dtype(compressed.dtype).itemsize
            _cap_address_space(nbytes, base + (len(region) if region is not None else 0))
            values = np.ascontiguousarray(get_codec(compressed.codec_id, compressed.mode,
                                                    compressed.bound).decompress(compressed))
            values = values.astype(values.dtype.newbyteorder("="), copy=False)
            if values.shape != tuple(compressed.shape) or values.dtype != np.dtype(compressed.dtype):
                raise CodecError(f"{compressed.codec_id} decoder returned {values.dtype}{values.shape}, the "
                                 f"container says {compressed.dtype}{tuple(compressed.shape)}")
            payload = memoryview(values).cast("B")
            if kind == b"S":
                assert region is not None
                if len(payload) > len(region):  # the parent sized it for the declared values
                    raise CodecError(f"{compressed.codec_id} decoder returned more than the container declares")
                region[: len(payload)] = payload
                wout.write(_HEAD.pack(b"O", len(payload)))
            else:
                wout.write(_HEAD.pack(b"O", len(payload)))
                wout.write(payload)
        except (PerfscoutError, MemoryError, ValueError) as exc:
            message = (str(exc) if isinstance(exc, PerfscoutError)
                       else f"stream could not be decoded: {type(exc).__name__}: {exc}").encode()
            wout.write(_HEAD.pack(b"E", len(message)) + message)
        finally:
            values = payload = None  # type: ignore[assignment]


def main() -> None:
    # The protocol keeps the real stdout; fd 1 becomes stderr, so a library's printing
    # (SZ 2.1 prints its errors) cannot corrupt a reply.
    proto_out = os.dup(1)
    os.dup2(2, 1)
    shm_fd = int(sys.argv[sys.argv.index("--shm-fd") + 1]) if "--shm-fd" in sys.argv else -1
    _serve(0, proto_out, shm_fd)


if __name__ == "__main__":
    main()
