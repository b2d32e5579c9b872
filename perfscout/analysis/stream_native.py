"""The metric pass's kernels compiled ahead of time: one shared library, loaded with ctypes.

Why: numba's import plus the load of its cached kernels keeps ~50 MiB of anonymous pages
resident (numba's typing machinery, LLVM) and takes ~0.5 s, 1-2 s on a busy 2-core
machine. An isolated evaluation forks its child from the caller, so the child starts
with all of that counted in its RSS (0.2x the input at 256 MiB) and a first call had to
hide the load behind the codec in a second child (benchmarks/isolation_fresh.py). The
library holds the same machine code and loads in 0.04-0.06 s (measured) without numba or llvmlite.

How it is made (:func:`build`, in a child Python so that the caller never imports numba):
every kernel of :mod:`perfscout.analysis.stream_kernels` is wrapped, for float32 and
float64, in a numba ``cfunc`` with a plain C signature (pointers and lengths; the tuple
a kernel returns is written to small output arrays). numba compiles and optimises them
as it compiles the JIT kernels (the kernels keep their own fast-math flags: a call into
a dispatcher compiles the callee with its options); their LLVM modules are linked into
one, emitted as position-independent object code for this CPU, and linked by the
system's C compiler into a ``.so``. The kernels never raise (NumPy's error model, no
bounds checks, no allocation); the few runtime symbols numba's wrappers reference on an
exception path are defined to abort with a message, never to continue silently.

Where it lives: next to numba's cache of these kernels (``analysis/__pycache__``) when
that is writable, else in the per-user cache directory (platformdirs). The file name is
a key of everything the machine code depends on: this module's and the kernels' source,
numba's and llvmlite's versions, the CPU (model and flags: a library built for one CPU
is never loaded on another sharing the file system) and numba's CPU overrides. One
process builds (a lock file), the others wait and load it; the library is renamed into
place whole. A build that fails (no C compiler) leaves a note with the reason under the
same key, so later processes do not retry while the compiler it would run is the same
(none, say); the metric pass then runs numba's JIT kernels, the same figures.
``PERFSCOUT_NATIVE_KERNELS=0`` turns the library off.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from perfscout.io import write_atomic

#: ``0`` (or ``off``/``no``/``false``): never build or load the library (numba's JIT kernels run).
ENV_NATIVE = "PERFSCOUT_NATIVE_KERNELS"
#: A build compiles every kernel twice (float32, float64): ~20 s here, once per machine and version.
BUILD_TIMEOUT_S = 900
_HERE = Path(__file__).resolve().parent
_SOURCES = (_HERE / "stream_kernels.py", Path(__file__).resolve())
_DTYPES = {"f32": np.float32, "f64": np.float64}


def enabled() -> bool:
    return os.environ.get(ENV_NATIVE, "").strip().lower() not in ("0", "off", "no", "false")


def _cpu_identity() -> str:
    """The CPU the machine code is for: model and flags from /proc/cpuinfo (empty when
    unreadable: then no library is used, see :func:`library_path`)."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return ""
    model = flags = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key in ("model name", "Processor", "CPU part") and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = " ".join(sorted(value.split()))
    return f"{model}|{flags}" if flags else ""


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


@functools.lru_cache(maxsize=1)
def library_key() -> str:
    """A digest of what the library's machine code depends on ("" when it cannot be told)."""
    cpu = _cpu_identity()
    numba, llvmlite = _version("numba"), _version("llvmlite")
    if not (cpu and numba and llvmlite):
        return ""
    h = hashlib.sha256()
    for src in _SOURCES:
        h.update(src.read_bytes())
    for part in (numba, llvmlite, cpu, os.uname().machine, sys.implementation.cache_tag or "",
                 os.environ.get("NUMBA_CPU_NAME", ""), os.environ.get("NUMBA_CPU_FEATURES", ""),
                 os.environ.get("NUMBA_OPT", "")):
        h.update(b"\0" + part.encode())
    return h.hexdigest()[:20]


def _writable_dir(d: Path) -> bool:
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return d.is_dir() and os.access(d, os.W_OK | os.X_OK)


def library_path() -> Path | None:
    """Where this machine's library is (or would be built): None when the key cannot be
    told or no cache directory is writable."""
    key = library_key()
    if not key:
        return None
    name = f"stream_kernels-{key}.so"
    for d in _cache_dirs():
        if (d / name).is_file():
            return d / name
    for d in _cache_dirs():
        if _writable_dir(d):
            return d / name
    return None


def _cache_dirs() -> list[Path]:
    dirs = [_HERE / "__pycache__"]
    try:
        import platformdirs

        dirs.append(Path(platformdirs.user_cache_dir("perfscout")) / "kernels")
    except Exception:  # noqa: BLE001 - no per-user directory (no HOME): the package's only
        pass
    return dirs


def built() -> bool:
    """Whether this machine's library exists (nothing is loaded or built): loading it
    then takes 0.04-0.06 s."""
    if not enabled():
        return False
    path = library_path()
    return path is not None and path.is_file()


def _failure_note(path: Path) -> Path:
    return path.with_suffix(".failed")


def _compiler() -> str:
    """The C compiler a build would run (``$CC``, else ``cc``), as found on PATH ("" for none)."""
    return shutil.which(os.environ.get("CC", "cc")) or ""


def _noted_failure(path: Path) -> str | None:
    """The reason a build of ``path`` failed before, while it still holds: None when no build
    failed, or when the compiler a build would run is another than then (one installed
    since, say: then it is tried again)."""
    try:
        first, _, reason = _failure_note(path).read_text(errors="replace").partition("\n")
    except OSError:
        return None
    return reason if first == f"compiler: {_compiler()}" else None


@functools.lru_cache(maxsize=1)
def load() -> NativeKernels | None:
    """This machine's library, built first when missing (in a child Python, under a lock);
    None when it is turned off, cannot be built here (the reason is in
    :func:`last_failure`), or does not load."""
    if not enabled():
        return None
    path = library_path()
    if path is None:
        _note_failure("no cache directory is writable, or the CPU or numba's version cannot be told")
        return None
    if not path.is_file():
        noted = _noted_failure(path)
        if noted is not None:
            _note_failure(noted)
            return None
        if not _build_locked(path):
            return None
    why = _open(path)
    if isinstance(why, NativeKernels):
        return why
    # Damaged (cut short, overwritten) or foreign: built again, once.
    if not _build_locked(path, replace=True):
        return None
    again = _open(path)
    if isinstance(again, NativeKernels):
        return again
    _note_failure(f"the library {path} does not load: {again}")
    return None


#: The library's file ends with the SHA-256 of what precedes it and this mark (the dynamic
#: loader reads an ELF file by its headers' offsets, so a trailer changes nothing for it).
#: A file cut short is told from a whole one before it is mapped: the loader of a
#: truncated ELF file can fault (SIGBUS) on pages past its end.
_TRAILER = b"perfscout-kernels-sha256"


def _seal(body: bytes) -> bytes:
    return body + hashlib.sha256(body).digest() + _TRAILER


def _intact(path: Path) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    end = len(data) - len(_TRAILER)
    return (end > 32 and data[end:] == _TRAILER
            and hashlib.sha256(data[: end - 32]).digest() == data[end - 32 : end])


def _open(path: Path) -> NativeKernels | str:
    """The loaded library, or why it cannot be."""
    if not _intact(path):
        return "its checksum does not match (a damaged or foreign file)"
    try:
        return NativeKernels(ctypes.CDLL(str(path)))
    except (OSError, AttributeError) as exc:
        return f"{type(exc).__name__}: {exc}"


_LAST_FAILURE: list[str] = []


def last_failure() -> str:
    """Why :func:`load` returned None in this process ("" when it did not)."""
    return _LAST_FAILURE[-1] if _LAST_FAILURE else ""


def _note_failure(reason: str) -> None:
    _LAST_FAILURE.append(reason.strip())


def _build_locked(path: Path, replace: bool = False) -> bool:
    """Build ``path`` unless another process has (one builder at a time: a lock file
    beside it); True when the library is there afterwards. ``replace``: the file there
    is damaged: built again unless another process has replaced it meanwhile."""
    lock = path.with_suffix(".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        _note_failure(f"cannot lock {lock}: {exc}")
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if path.is_file() and (not replace or _intact(path)):
            return True
        noted = _noted_failure(path)
        if noted is not None:
            _note_failure(noted)
            return False
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}
        try:
            proc = subprocess.run([sys.executable, "-m", "perfscout.analysis.stream_native", "build", str(path)],
                                  capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env,
                                  stdin=subprocess.DEVNULL)
            ok, why = proc.returncode == 0 and path.is_file(), (proc.stderr or proc.stdout)[-2000:]
        except (OSError, subprocess.TimeoutExpired) as exc:
            ok, why = False, f"{type(exc).__name__}: {exc}"
        if not ok:
            reason = f"building the metric kernels' library failed: {why.strip()}"
            try:
                write_atomic(_failure_note(path), f"compiler: {_compiler()}\n{reason}\n")
            except OSError:
                pass
            _note_failure(reason)
        return ok
    finally:
        os.close(fd)


# -- the library's C functions and their Python faces -------------------------------------

#: The C signature of each function (per dtype suffix), the one description both sides read:
#: the build's numba ``cfunc`` signatures and the loader's ctypes argtypes. Codes: ``x`` a
#: pointer to the data's dtype (float32 or float64), ``D``/``I``/``J`` pointers to
#: float64/int64/int32, ``d``/``i`` a float64/int64 value, ``v``
#: nothing (a result only). (result, arguments)
_SIGNATURES: dict[str, tuple[str, str]] = {
    "pass_a": ("v", "xxiidDI"),
    "beyond": ("i", "xxiidI"),
    "pass_b": ("v", "xxidddidiJID"),
    "scatter": ("v", "xxiJiDiIi"),
    "ssim_tile": ("d", "xx" + "i" * 13 + "dd" + "DDDDD" + "iii"),
}
_CTYPES: dict[str, Any] = {"v": None, "d": ctypes.c_double, "i": ctypes.c_int64,
                           **dict.fromkeys("xDIJ", ctypes.c_void_p)}

def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _contiguous(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _out(a: np.ndarray, dtype: Any) -> np.ndarray:
    """An array a kernel writes: it must be the caller's own memory, as the JIT kernel's."""
    if not (a.flags.c_contiguous and a.flags.writeable and a.dtype == dtype):
        raise ValueError(f"a kernel's output must be a writable C-contiguous {np.dtype(dtype)} array")
    return a


class NativeKernels:
    """The kernels of :mod:`perfscout.analysis.stream_kernels` with the JIT dispatchers'
    arguments and results, calling the library (ctypes releases the GIL for each call, as
    the kernels' ``nogil`` does)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        self._fn: dict[tuple[str, Any], Any] = {}
        for name, (result, arguments) in _SIGNATURES.items():
            for suffix, dtype in _DTYPES.items():
                fn = getattr(lib, f"perfscout_{name}_{suffix}")  # AttributeError: not our library
                fn.restype, fn.argtypes = _CTYPES[result], [_CTYPES[c] for c in arguments]
                self._fn[name, np.dtype(dtype)] = fn

    def _get(self, name: str, x: np.ndarray, y: np.ndarray) -> Any:
        if x.dtype != y.dtype or (name, x.dtype) not in self._fn:
            raise TypeError(f"the compiled kernels take float32 or float64 pairs of one dtype, got {x.dtype}/{y.dtype}")
        return self._fn[name, x.dtype]

    def pass_a_kernel(self, x: np.ndarray, y: np.ndarray, bound_kind: int, bound: float) -> tuple:
        x, y = _contiguous(x), _contiguous(y)
        f, i = np.empty(3), np.empty(3, np.int64)
        self._get("pass_a", x, y)(_ptr(x), _ptr(y), x.size, bound_kind, bound, _ptr(f), _ptr(i))
        return bool(i[0]), float(f[0]), float(f[1]), float(f[2]), int(i[1]), int(i[2])

    def beyond_kernel(self, x: np.ndarray, y: np.ndarray, bound_kind: int, bound: float, cand: np.ndarray) -> int:
        x, y, cand = _contiguous(x), _contiguous(y), _out(cand, np.int64)
        if cand.size < x.size:
            raise ValueError("the candidates' buffer must hold one index per element")
        return int(self._get("beyond", x, y)(_ptr(x), _ptr(y), x.size, bound_kind, bound, _ptr(cand)))

    def pass_b_kernel(self, x: np.ndarray, y: np.ndarray, kx: float, ky: float, ke: float, binned: bool, sc: float,
                      half: int, idx: np.ndarray) -> tuple:
        x, y, idx = _contiguous(x), _contiguous(y), _out(idx, np.int32)
        if idx.size < x.size:
            raise ValueError("the bin indices' buffer must hold one index per element")
        i, f = np.empty(3, np.int64), np.empty(11)
        self._get("pass_b", x, y)(_ptr(x), _ptr(y), x.size, kx, ky, ke, int(bool(binned)), sc, half, _ptr(idx),
                                  _ptr(i), _ptr(f))
        ee, sdx, sb, dxx, dxy, dbb, lag, first_b, last_b, sdy, dyy = (float(v) for v in f)
        return int(i[0]), ee, int(i[1]), int(i[2]), sdx, sb, dxx, dxy, dbb, lag, first_b, last_b, sdy, dyy

    def scatter_kernel(self, x: np.ndarray, y: np.ndarray, idx: np.ndarray, per_coarse: int, edges: np.ndarray,
                       fine: np.ndarray) -> None:
        x, y = _contiguous(x), _contiguous(y)
        idx, edges, fine = _contiguous(np.asarray(idx, np.int32)), _contiguous(np.asarray(edges, np.float64)), \
            _out(fine, np.int64)
        self._get("scatter", x, y)(_ptr(x), _ptr(y), x.size, _ptr(idx), per_coarse, _ptr(edges), edges.size,
                                   _ptr(fine), fine.size)

    def ssim_tile_kernel(self, x: np.ndarray, y: np.ndarray, lo0: int, hi0: int, lo1: int, hi1: int, lo2: int,
                         hi2: int, w0: int, w1: int, w2: int, n_win: int, c1n: float, c2n: float,
                         maps: np.ndarray, rows: np.ndarray, ring: np.ndarray, s: np.ndarray,
                         diss: np.ndarray) -> float:
        if x.ndim != 3 or x.shape != y.shape:
            raise ValueError("the SSIM tile kernel takes two 3-D arrays of one shape")
        x, y = _contiguous(x), _contiguous(y)
        maps, rows, ring, s, diss = (_out(b, np.float64) for b in (maps, rows, ring, s, diss))
        if not (maps.shape[0] == rows.shape[0] == s.shape[0] == ring.shape[1] == 4
                and maps.shape[1] == rows.shape[1] and ring.shape[2] == s.shape[1] == diss.shape[0]):
            raise ValueError("the SSIM tile kernel's buffers do not match one another")
        n0, n1, n2 = x.shape
        return float(self._get("ssim_tile", x, y)(
            _ptr(x), _ptr(y), n0, n1, n2, lo0, hi0, lo1, hi1, lo2, hi2, w0, w1, w2,
            n_win, float(c1n), float(c2n), _ptr(maps), _ptr(rows), _ptr(ring), _ptr(s), _ptr(diss),
            maps.shape[1], ring.shape[0], ring.shape[2]))


# -- the build (run as ``python -m perfscout.analysis.stream_native build PATH``) ----------

#: C code linked into the library: the one numba runtime helper the kernels call (a
#: reshape without a copy: the SSIM tile's rows of a plane as one flat run, written here
#: for C order, the only order the kernels reshape in), and, for numba's exception path
#: (a kernel that raised, which they do not), functions that abort with a message.
_RUNTIME_C = """#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The strides of `dims` viewed as `newdims` without a copy; 0 when that needs a copy.
   C order: each run of old axes that maps onto a run of new axes (equal products) must
   be contiguous within itself; its new strides are then the run's innermost stride
   times the new inner extents. */
int numba_attempt_nocopy_reshape(intptr_t nd, const intptr_t *dims, const intptr_t *strides, intptr_t newnd,
                                 const intptr_t *newdims, intptr_t *newstrides, intptr_t itemsize, int is_f_order) {
  intptr_t od[64], os[64], ond = 0, i, j, k, oi, oj, ni, nj, pold, pnew, size = 1;
  if (is_f_order || nd > 64) return 0;
  for (i = 0; i < nd; i++) {
    size *= dims[i];
    if (dims[i] != 1) { od[ond] = dims[i]; os[ond] = strides[i]; ond++; }
  }
  if (size == 0 || ond == 0) {
    for (j = 0; j < newnd; j++) newstrides[j] = itemsize;
    return 1;
  }
  oi = 0; oj = 1; ni = 0; nj = 1;
  while (ni < newnd && oi < ond) {
    pold = od[oi]; pnew = newdims[ni];
    while (pold != pnew) {
      if (pold < pnew) { if (oj >= ond) return 0; pold *= od[oj++]; }
      else { if (nj >= newnd) return 0; pnew *= newdims[nj++]; }
    }
    for (k = oi; k < oj - 1; k++)
      if (os[k] != os[k + 1] * od[k + 1]) return 0;
    newstrides[nj - 1] = os[oj - 1];
    for (k = nj - 2; k >= ni; k--) newstrides[k] = newstrides[k + 1] * newdims[k + 1];
    ni = nj++; oi = oj++;
  }
  for (k = ni; k < newnd; k++) {  /* trailing axes of length 1 */
    if (newdims[k] != 1) return 0;
    newstrides[k] = itemsize;
  }
  return oi >= ond;
}

#define PERFSCOUT_STUB(name) void name(void) { \\
  fputs("perfscout metric kernels: " #name " reached (a compiled kernel raised); aborting\\n", stderr); abort(); }
PERFSCOUT_STUB(numba_do_raise) PERFSCOUT_STUB(numba_gil_ensure) PERFSCOUT_STUB(numba_gil_release)
PERFSCOUT_STUB(numba_runtime_build_excinfo_struct) PERFSCOUT_STUB(numba_unpickle)
PERFSCOUT_STUB(numba_unpickle_bytes) PERFSCOUT_STUB(NRT_Free) PERFSCOUT_STUB(NRT_MemInfo_call_dtor)
PERFSCOUT_STUB(NRT_MemInfo_alloc_aligned) PERFSCOUT_STUB(NRT_decref_safe)
"""


def _cfuncs() -> dict[str, Any]:
    """Every kernel as a C-callable numba ``cfunc``, per dtype: {C name: CFunc}."""
    from numba import carray, cfunc, types

    from perfscout.analysis import stream_kernels as K

    P, i64, f64 = types.CPointer, types.int64, types.float64
    out: dict[str, Any] = {}
    for suffix, dtype in _DTYPES.items():
        T = types.float32 if dtype is np.float32 else types.float64
        opts = dict(nopython=True, nogil=True, error_model="numpy")

        def pass_a(xp: Any, yp: Any, n: int, kind: int, bound: float, fo: Any, io: Any) -> None:
            x, y = carray(xp, (n,)), carray(yp, (n,))
            finite, lo_e, hi_e, amax, first, beyond = K.pass_a_kernel(x, y, kind, bound)
            fo[0], fo[1], fo[2] = lo_e, hi_e, amax
            io[0], io[1], io[2] = finite, first, beyond

        def beyond(xp: Any, yp: Any, n: int, kind: int, bound: float, cp: Any) -> int:
            return K.beyond_kernel(carray(xp, (n,)), carray(yp, (n,)), kind, bound, carray(cp, (n,)))

        def pass_b(xp: Any, yp: Any, n: int, kx: float, ky: float, ke: float, binned: int, sc: float, half: int,
                   ip: Any, io: Any, fo: Any) -> None:
            r = K.pass_b_kernel(carray(xp, (n,)), carray(yp, (n,)), kx, ky, ke, binned != 0, sc, half, carray(ip, (n,)))
            io[0], io[1], io[2] = r[0], r[2], r[3]
            fo[0], fo[1], fo[2], fo[3], fo[4], fo[5] = r[1], r[4], r[5], r[6], r[7], r[8]
            fo[6], fo[7], fo[8], fo[9], fo[10] = r[9], r[10], r[11], r[12], r[13]

        def scatter(xp: Any, yp: Any, n: int, ip: Any, per_coarse: int, ep: Any, n_edges: int, hp: Any,
                    n_fine: int) -> None:
            K.scatter_kernel(carray(xp, (n,)), carray(yp, (n,)), carray(ip, (n,)), per_coarse, carray(ep, (n_edges,)),
                             carray(hp, (n_fine,)))

        def ssim_tile(xp: Any, yp: Any, n0: int, n1: int, n2: int, lo0: int, hi0: int, lo1: int, hi1: int, lo2: int,
                      hi2: int, w0: int, w1: int, w2: int, n_win: int, c1n: float, c2n: float, mp: Any, rp: Any,
                      gp: Any, sp: Any, dp: Any, block_in: int, slots: int, block_out: int) -> float:
            return K.ssim_tile_kernel(
                carray(xp, (n0, n1, n2)), carray(yp, (n0, n1, n2)), lo0, hi0, lo1, hi1, lo2, hi2, w0, w1, w2,
                n_win, c1n, c2n, carray(mp, (4, block_in)), carray(rp, (4, block_in)),
                carray(gp, (slots, 4, block_out)), carray(sp, (4, block_out)), carray(dp, (block_out,)))

        numba_type = {"v": types.void, "d": f64, "i": i64, "x": P(T), "D": P(f64),
                      "I": P(i64), "J": P(types.int32)}
        wrappers = {"pass_a": pass_a, "beyond": beyond, "pass_b": pass_b, "scatter": scatter, "ssim_tile": ssim_tile}
        for name, fn in wrappers.items():
            result, arguments = _SIGNATURES[name]
            sig = numba_type[result](*(numba_type[c] for c in arguments))
            out[f"perfscout_{name}_{suffix}"] = cfunc(sig, **opts)(fn)
    return out


def build(path: Path) -> None:
    """Compile the kernels into the shared library ``path`` (renamed into place whole)."""
    import llvmlite.binding as ll

    cfuncs = _cfuncs()
    linked = None
    for name, cf in cfuncs.items():
        module = ll.parse_assembly(cf._library.get_llvm_str())
        module.get_function(cf.native_name).name = name  # the C entry point, under a plain name
        if linked is None:
            linked = module
        else:
            linked.link_in(module)
    assert linked is not None
    linked.verify()
    target = ll.Target.from_triple(ll.get_process_triple())
    machine = target.create_target_machine(cpu=ll.get_host_cpu_name(), features=ll.get_host_cpu_features().flatten(),
                                           opt=3, reloc="pic", codemodel="default")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="perfscout-kernels-") as tmp:
        obj, stubs, lib = Path(tmp) / "kernels.o", Path(tmp) / "stubs.c", Path(tmp) / "kernels.so"
        obj.write_bytes(machine.emit_object(linked))
        stubs.write_text(_RUNTIME_C)
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(lib), str(obj), str(stubs), "-lm"], check=True,
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
        NativeKernels(ctypes.CDLL(str(lib)))  # every function is there before the name is taken
        write_atomic(path, _seal(lib.read_bytes()), fsync=True)  # whole under its name, or not there


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] != "build":
        print("usage: python -m perfscout.analysis.stream_native build PATH", file=sys.stderr)
        return 2
    try:
        build(Path(argv[1]))
    except subprocess.CalledProcessError as exc:
        print(f"{' '.join(exc.cmd)} failed ({exc.returncode}): {exc.stderr.strip()[-1500:]}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:  # no C compiler
        print(f"no C compiler to link the kernels: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
