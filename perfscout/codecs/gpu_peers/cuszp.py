"""cuszp: cuSZp (github.com/szcompressor/cuSZp, BSD-3), the SZ team's GPU compressor, called
through its C API (``cuSZp_compress`` / ``cuSZp_decompress``) with ctypes on CuPy device pointers.

perfscout ships no cuSZp code: the user builds ``libcuSZp.so`` from a cuSZp checkout with
``scripts/build_cuszp.sh`` (for the local GPU's architecture). It is found at
``$PERFSCOUT_CUSZP_LIB``, else in the standard places (:func:`standard_places`), else on the
dynamic linker's path; ``availability()`` says exactly which step failed.

Options: ``encoding`` ("plain" or "outlier": cuSZp's fixed-length encodings with Lorenzo
deltas; "fixed": its fixed-length encoding of the quantised values themselves, no deltas;
default "outlier"; the ids ``cuszp-plain`` / ``cuszp-outlier`` fix it, so that a
sweep's rows say which), ``dim`` (1, 2 or 3: cuSZp's 1-D/2-D/3-D processing; default
min(ndim, 3), or 1 when the fastest axis is not a multiple of 4: cuSZp's 2-D/3-D kernels
corrupt such arrays, so asking for them there is refused). The only error mode is an absolute bound, which cuSZp takes as a C ``float``
(the bound it really applies, float32-rounded, is in the stream's meta); perfscout derives
``rel`` from it. cuSZp quantises in the data's own precision and checks nothing, so float32
rounding can put an element beyond the bound: perfscout's element-wise check reports it.

cuSZp's decoders leave blocks whose codes are all zero unwritten (they expect a zeroed output
buffer; found by perfscout's check, as stale values far beyond the bound), so a decode's output must hold
zeros there. ``device_decompress`` allocates a zeroed output when it is given none; a caller
that times decodes (perfscout.tools.gpu_eval, benchmarks/gpu_fair.py) takes one from
:meth:`CuSZpCodec.decode_target` outside the timed region and passes it as ``out`` to every
timed decode of that one stream, as cuSZp's own tests do: a block that is not written keeps
the zero, every other block is overwritten with the same values, so the timed decode does
the work szp-gpu's does (which writes every element) and no 1 GiB memset per call. Its reported compressed size is not always the stream's (found by
perfscout's host round trip on an H200): when its grid has a single thread block (1-D: at
most 32768 elements; 2-D/3-D: at most 512 blocks of 64 elements in float32, 1024 in
float64) the last block never writes the total, and the size comes back as the rate bytes
alone; with 2-D/3-D processing it also leaves out the 1-3 bytes that pad the rate bytes to a
multiple of 4. So perfscout computes the stream's extent from its own block-rate bytes
(:func:`stream_extent`), uses that for the host bytes and the ratio, records the library's
report beside it when they differ, and refuses a host stream whose length is not its
extent before cuSZp reads it. cuSZp's limits, guarded here before the library sees the input: ``int`` element indices
(arrays of 2**31 elements or more are refused) and 32-bit stream offsets (an array whose
worst-case stream exceeds 4 GiB is refused).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from perfscout.codecs.gpu_peers import device as D
from perfscout.errors import CodecError, InputError

ENV_VAR = "PERFSCOUT_CUSZP_LIB"
LIB_NAME = "libcuSZp.so"
BUILD_HINT = ("build it with scripts/build_cuszp.sh SOURCE_DIR (source: github.com/szcompressor/cuSZp) "
              f"or point {ENV_VAR} at a libcuSZp.so")
ENCODINGS = {"fixed": 0, "plain": 1, "outlier": 2}  # cuszp_mode_t (FIXED: no deltas)
TYPES = {"float32": 0, "float64": 1}  # cuszp_type_t
MAX_ELEMENTS = 2**31 - 1
OFFSET_LIMIT = 2**32
F32_MIN_NORMAL = float(np.finfo(np.float32).tiny)
F32_MAX = float(np.finfo(np.float32).max)


# -- finding and loading the library -------------------------------------------------------
def standard_places() -> list[Path]:
    """Where ``scripts/build_cuszp.sh`` installs by default, then the usual prefixes."""
    from perfscout.home import perfscout_home

    places = [perfscout_home() / "cuszp" / "lib" / LIB_NAME, Path.home() / ".local" / "lib" / LIB_NAME]
    places += [Path(p) / LIB_NAME for p in ("/usr/local/lib", "/usr/local/cuSZp/lib", "/opt/cuSZp/lib",
                                            "/usr/lib", "/usr/lib/x86_64-linux-gnu")]
    return places


def locate() -> tuple[str | None, str]:
    """(path or linker name of the library, '') or (None, why it was not found)."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        path = Path(env).expanduser()
        if not path.is_file():
            return None, f"{ENV_VAR}={env} does not name a file"
        return str(path), ""
    for path in standard_places():
        if path.is_file():
            return str(path), ""
    found = _on_linker_path()
    if found:
        return found, ""
    return None, (f"{LIB_NAME} not found ({ENV_VAR} is unset; looked in "
                  f"{', '.join(str(p.parent) for p in standard_places())} and the linker path); {BUILD_HINT}")


@functools.cache
def _on_linker_path() -> str | None:
    """ctypes' search of the linker path, once a process: it runs ``ldconfig -p``, ``gcc``
    and ``ld`` (three child processes, 10-40 ms), and every availability check asked it
    (six times per planned request)."""
    return ctypes.util.find_library("cuSZp")


class Uint3(ctypes.Structure):
    """CUDA's ``uint3`` (cuSZp's ``dims``: x is the fastest-varying axis)."""

    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


@functools.cache
def load_library(path: str) -> ctypes.CDLL:
    """The library with its two entry points typed; CodecError says why it cannot be used."""
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        raise CodecError(f"cannot load {path}: {exc}") from None
    for name in ("cuSZp_compress", "cuSZp_decompress"):
        if not hasattr(lib, name):
            raise CodecError(f"{path} does not export {name}: it is not a cuSZp library (cuSZp 2.x/3.x C API)")
    common = [ctypes.c_float, ctypes.c_int, Uint3, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.cuSZp_compress.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.POINTER(ctypes.c_size_t), *common]
    lib.cuSZp_compress.restype = None
    lib.cuSZp_decompress.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, *common]
    lib.cuSZp_decompress.restype = None
    return lib


def build_info(path: str) -> dict[str, Any] | None:
    """What scripts/build_cuszp.sh recorded beside the library (``libcuSZp.so.json``), if any."""
    side = Path(path + ".json")
    try:
        return json.loads(side.read_text()) if side.is_file() else None
    except (OSError, ValueError):
        return None


def arch_problem(architectures: str, cc: tuple[int, int]) -> str:
    """'' if code built for CMake ``CUDA_ARCHITECTURES`` (e.g. "90", "80-real;86-virtual", "90a")
    can run on a GPU of compute capability ``cc``, else why not.

    Machine code (``-real``, or a bare number) runs on the same major version at an equal or
    higher minor; PTX (``-virtual``, or a bare number) is compiled by the driver for any GPU
    at or above its version; an arch-specific target (``90a``) runs on exactly that one.
    """
    dev = cc[0] * 10 + cc[1]
    targets = [t.strip() for t in re.split(r"[;, ]+", architectures or "") if t.strip()]
    for target in targets:
        m = re.fullmatch(r"(?:sm_|compute_)?(\d+)([af]?)(?:-(real|virtual))?", target)
        if not m:
            continue
        arch, specific, kind = int(m.group(1)), bool(m.group(2)), m.group(3) or ""
        if specific:
            if arch == dev:
                return ""
            continue
        if kind in ("", "real") and arch // 10 == cc[0] and arch % 10 <= cc[1]:
            return ""
        if kind in ("", "virtual") and arch <= dev:
            return ""
    return (f"it was built for CUDA architectures {architectures or '(none recorded)'}, which cannot run on "
            f"this GPU (compute capability {cc[0]}.{cc[1]}); rebuild with CUSZP_ARCH={dev} "
            "scripts/build_cuszp.sh SOURCE_DIR")


# -- geometry ----------------------------------------------------------------------------
#: cuSZp's 2-D and 3-D kernels load and store 4-vectors at element index // 4, so rows
#: (the fastest axis) must be a multiple of this many elements.
VECTOR = 4


def default_dim(shape: tuple[int, ...]) -> int:
    """min(ndim, 3), or 1 when the fastest axis is not a multiple of 4 (see :func:`vector_problem`)."""
    dim = max(1, min(len(shape), 3))
    return dim if dim == 1 or int(shape[-1]) % VECTOR == 0 else 1


def vector_problem(shape: tuple[int, ...], dim: int) -> str:
    """'' if cuSZp's ``dim``-D kernels can take ``shape``, else why not (found by perfscout on
    an H200: a 16983-wide 2-D field decoded its last element as 0, 402 times the bound, and
    two decodes of the same bytes differed)."""
    if dim == 1 or int(shape[-1]) % VECTOR == 0:
        return ""
    return (f"cuSZp's {dim}-D processing moves 4-vectors at element index // 4, which corrupts arrays whose "
            f"fastest axis ({shape[-1]}) is not a multiple of {VECTOR} (wrong and run-to-run different values, "
            "writes past the row); use dim=1")


def cuszp_dims(shape: tuple[int, ...], dim: int) -> tuple[int, int, int]:
    """cuSZp's (x, y, z) for a C-order shape (x fastest); leading axes beyond 3 fold into z."""
    if dim == 1:
        return (int(math.prod(shape)), 1, 1)
    if len(shape) < dim:
        raise InputError(f"cuSZp's {dim}-D processing needs an array of at least {dim} dimensions, "
                         f"got shape {tuple(shape)}; use dim=1" + (" or dim=2" if len(shape) >= 2 else ""))
    x, y = int(shape[-1]), int(shape[-2])
    z = int(math.prod(shape[:-2])) if len(shape) > 2 else 1
    return (x, y, z)


def block_count(dims: tuple[int, int, int], dim: int) -> tuple[int, int]:
    """(blocks, elements per block) of cuSZp's layout; 1-D blocks come in warp chunks of 1024."""
    x, y, z = dims
    if dim == 1:
        return -(-x // 32768) * 1024, 32
    if dim == 2:
        return -(-x // 8) * -(-y // 8) * z, 64
    return -(-x // 4) * -(-y // 4) * -(-z // 4), 64


def rate_layout(dims: tuple[int, int, int], dim: int) -> tuple[int, int]:
    """(bytes of the block-rate section at the stream's start, blocks with a rate byte).

    1-D: one rate byte for every block of the grid's 1024-block chunks (the unused ones hold
    0); 2-D/3-D: one per block, the section padded to a multiple of 4 bytes."""
    blocks, _ = block_count(dims, dim)
    return (blocks, blocks) if dim == 1 else (-(-blocks // 4) * 4, blocks)


def stream_extent(rates: Any, dims: tuple[int, int, int], dim: int, encoding: str = "outlier") -> int:
    """The length in bytes of the cuSZp stream whose block-rate bytes are ``rates`` (uint8,
    NumPy or CuPy, the first ``rate_layout(...)[1]`` bytes of the stream).

    Outlier encoding: a rate byte's low 5 bits are the bit planes r; bit 7 is set for a block
    whose first residual is stored apart, in ((b >> 5) & 3) + 1 bytes. Plain and fixed
    encodings: the byte is r itself. A block takes, besides its rate byte, a sign map and r
    planes of one bit per element (1-D: 32 elements, 4-byte units; 2-D/3-D: 64 elements,
    8-byte units), nothing when r = 0 and it has no outlier, and the outlier's bytes."""
    xp = _namespace(rates)
    r = rates.astype(xp.int64)
    if encoding == "outlier":
        planes, outlier = r & 0x1F, (r >> 7) & 1
    else:
        planes, outlier = r, xp.zeros_like(r)
    unit = 4 if dim == 1 else 8
    size = xp.where(outlier == 1, unit + ((r >> 5) & 3) + 1 + unit * planes,
                    xp.where(planes > 0, unit + unit * planes, 0))
    return rate_layout(dims, dim)[0] + int(size.sum())


def _namespace(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return np
    return D.cupy()


def extent_problem(stream: Any, shape: tuple[int, ...], dim: int, encoding: str = "outlier") -> str:
    """'' if ``stream`` (uint8, NumPy or CuPy) is exactly as long as the cuSZp stream its
    rate bytes describe for ``shape`` with ``dim``-D processing and ``encoding``, else why not."""
    dims = cuszp_dims(shape, dim)
    region, valid = rate_layout(dims, dim)
    n = int(stream.size)
    if n < region:
        return (f"cuszp stream is truncated: {n} bytes, shorter than the {region} block-rate bytes a "
                f"{dim}-D stream of shape {tuple(shape)} starts with")
    extent = stream_extent(stream[:valid], dims, dim, encoding)
    if n != extent:
        kind = "truncated" if n < extent else "longer than its blocks"
        return (f"cuszp stream is {kind}: {n} bytes, but its block rates describe {extent} bytes for shape "
                f"{tuple(shape)} with {dim}-D processing (a cut stream, or not a cuSZp stream of this shape)")
    return ""


def worst_case_nbytes(dims: tuple[int, int, int], dim: int) -> int:
    """An upper bound on cuSZp's stream: per block one rate byte, a sign map, 32 bit planes of
    quantisation codes (they are C ints) and up to 4 bytes of first value; plus slack."""
    blocks, per_block = block_count(dims, dim)
    return blocks * (1 + per_block // 8 + per_block * 4 + 8) + 65536


# -- the backend ---------------------------------------------------------------------------
class CuSZpCodec(D.DeviceCodec):
    codec_id = "cuszp"
    family = "sz"
    native_modes = ("abs",)
    option_names = ("encoding", "dim")
    install_hint = BUILD_HINT
    default_encoding = "outlier"

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        super().__init__(mode, bound, **options)
        self.encoding = str(self.options.get("encoding", self.default_encoding))
        if self.encoding not in ENCODINGS:
            raise CodecError(f"cuszp: encoding must be one of {', '.join(ENCODINGS)}, got {self.encoding!r}")
        dim = self.options.get("dim")
        if dim is not None and (isinstance(dim, bool) or dim not in (1, 2, 3)):
            raise CodecError(f"cuszp: dim must be 1, 2 or 3, got {dim!r}")
        self.dim = None if dim is None else int(dim)
        self.eb32 = float(np.float32(self.bound))
        if not (F32_MIN_NORMAL <= self.eb32 <= F32_MAX):
            raise InputError(f"cuszp takes its bound as a C float: {self.bound:g} is outside float32's normal "
                             f"range [{F32_MIN_NORMAL:.3g}, {F32_MAX:.3g}]")

    # -- identity / availability -----------------------------------------------------------
    @classmethod
    def version(cls) -> str:
        path, _ = locate()
        if path is None:
            return ""
        info = build_info(path) or {}
        commit = str(info.get("commit", ""))[:12]
        return f"cuSZp {commit or '(unknown commit)'} ({path})"

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        path, why = locate()
        if path is None:
            return False, why
        try:
            load_library(path)
        except CodecError as exc:
            return False, f"{exc}; {BUILD_HINT}"
        gpu = D.gpu_reason()
        if gpu:
            return False, f"{path} loads, but {gpu}"
        cc = D.compute_capability()
        info = build_info(path)
        if info and info.get("cuda_architectures"):
            problem = arch_problem(str(info["cuda_architectures"]), cc)
            if problem:
                return False, f"{path}: {problem}"
        problem = _self_test(path, cc)
        return (False, f"{path}: {problem}") if problem else (True, "")

    # -- geometry of this array --------------------------------------------------------------
    def _dim_for(self, shape: tuple[int, ...]) -> int:
        return self.dim if self.dim is not None else default_dim(shape)

    def check_input(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        super().check_input(shape, dtype)
        n = int(math.prod(shape))
        if n > MAX_ELEMENTS:
            raise InputError(f"cuSZp indexes elements with C ints: {n} elements is more than {MAX_ELEMENTS}; split the array")
        dim = self._dim_for(shape)
        dims = cuszp_dims(shape, dim)
        problem = vector_problem(shape, dim)
        if problem:
            raise InputError(problem)
        if dim > 1 and max(dims) >= 2**32:
            raise InputError(f"cuSZp's dims are 32-bit: {dims} does not fit")
        if worst_case_nbytes(dims, dim) >= OFFSET_LIMIT:
            raise InputError(f"cuSZp addresses its stream with 32-bit offsets; {n} elements could need more "
                             "than 4 GiB of stream: split the array")

    def stream_meta(self, xd: Any) -> dict[str, Any]:
        dim = self._dim_for(tuple(xd.shape))
        return {"encoding": self.encoding, "dim": dim, "eb_f32": self.eb32,
                "dims_xyz": list(cuszp_dims(tuple(xd.shape), dim))}

    # -- device calls --------------------------------------------------------------------------
    def _lib(self) -> ctypes.CDLL:
        path, why = locate()
        if path is None:
            raise CodecError(why)
        return load_library(path)

    def device_compress(self, xd: Any) -> D.DeviceBlob:
        cp = D.cupy()
        shape = tuple(xd.shape)
        self.check_input(shape, xd.dtype)
        dim = self._dim_for(shape)
        dims = cuszp_dims(shape, dim)
        cap = worst_case_nbytes(dims, dim)
        out = cp.empty(cap, dtype=cp.uint8)
        size = ctypes.c_size_t(0)
        self._lib().cuSZp_compress(
            ctypes.c_void_p(xd.data.ptr), ctypes.c_void_p(out.data.ptr), ctypes.c_size_t(xd.size),
            ctypes.byref(size), ctypes.c_float(self.eb32), dim, Uint3(*dims), TYPES[xd.dtype.name],
            ENCODINGS[self.encoding], ctypes.c_void_p(D.work_stream().ptr))
        nbytes = int(size.value)
        if not 0 < nbytes <= cap:
            raise CodecError(f"cuSZp reported a compressed size of {nbytes} bytes for a buffer of {cap} bytes "
                             "(its kernels may not have run on this GPU)")
        return D.DeviceBlob(out, nbytes)  # the library's report; settle() finds the real extent

    def settle(self, blob: D.DeviceBlob, shape: tuple[int, ...], dtype: np.dtype) -> D.DeviceBlob:
        """The stream's extent from its rate bytes (module docstring: cuSZp's report can be short)."""
        dim = self._dim_for(shape)
        dims = cuszp_dims(shape, dim)
        _, valid = rate_layout(dims, dim)
        extent = stream_extent(blob.buffer[:valid], dims, dim, self.encoding)
        if not 0 < extent <= blob.buffer.nbytes:
            raise CodecError(f"cuSZp's block rates describe a stream of {extent} bytes in a buffer of "
                             f"{blob.buffer.nbytes} (its kernels may not have run on this GPU)")
        return D.DeviceBlob(blob.buffer, extent, blob.owner, reported_nbytes=blob.reported_nbytes)

    def check_stream(self, blob: D.DeviceBlob, shape: tuple[int, ...], dtype: np.dtype,
                     meta: dict[str, Any]) -> None:
        encoding, dim, _ = _decode_params(meta, shape)
        problem = extent_problem(blob.view(), shape, dim, encoding)
        if problem:
            raise CodecError(problem)

    def decode_target(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """A zeroed output for :meth:`device_decompress` (``out=``), made outside a timed region.

        cuSZp's decoders write nothing for a block whose codes are all zero: they rely on a
        zeroed output (cudaMalloc'd memory often is; a reused pool block is not, and then
        stale values come back, far beyond the bound). The buffer may then take any number of
        decodes *of one stream*: the unwritten blocks keep their zeros."""
        return D.cupy().zeros(shape, dtype=dtype)

    def device_decompress(self, blob: D.DeviceBlob, shape: tuple[int, ...], dtype: np.dtype,
                          meta: dict[str, Any], out: Any = None) -> Any:
        """Decode into ``out`` when given (from :meth:`decode_target`, zeroed, or holding an
        earlier decode of this same stream: the caller's promise), else into a new zeroed
        array (the memset is then part of this call)."""
        cp = D.cupy()
        encoding, dim, eb32 = _decode_params(meta, shape)
        dims = cuszp_dims(shape, dim)
        if blob.nbytes > worst_case_nbytes(dims, dim):
            raise CodecError(f"cuSZp stream of {blob.nbytes} bytes is larger than any stream for shape {shape}")
        if out is None:
            out = cp.zeros(shape, dtype=dtype)
        elif tuple(out.shape) != tuple(shape) or out.dtype != np.dtype(dtype) or not out.flags.c_contiguous:
            raise CodecError(f"cuszp: decode target is {out.dtype} {tuple(out.shape)}, need a C-contiguous "
                             f"{np.dtype(dtype)} {tuple(shape)}")
        self._lib().cuSZp_decompress(
            ctypes.c_void_p(out.data.ptr), ctypes.c_void_p(blob.buffer.data.ptr), ctypes.c_size_t(out.size),
            ctypes.c_size_t(blob.nbytes), ctypes.c_float(eb32), dim, Uint3(*dims), TYPES[np.dtype(dtype).name],
            ENCODINGS[encoding], ctypes.c_void_p(D.work_stream().ptr))
        return out


class CuSZpPlainCodec(CuSZpCodec):
    """cuSZp with its plain encoding (the ``cuszp-plain`` id, so a sweep's rows say which)."""

    codec_id = "cuszp-plain"
    option_names = ("dim",)
    default_encoding = "plain"


class CuSZpOutlierCodec(CuSZpCodec):
    """cuSZp with its outlier encoding (``cuszp-outlier``; plain ``cuszp`` is the same by default)."""

    codec_id = "cuszp-outlier"
    option_names = ("dim",)
    default_encoding = "outlier"


def _decode_params(meta: dict[str, Any], shape: tuple[int, ...]) -> tuple[str, int, float]:
    """(encoding, dim, float32 bound) from a stream's meta; CodecError when they are unusable."""
    try:
        encoding, dim, eb32 = str(meta["encoding"]), int(meta["dim"]), float(meta["eb_f32"])
    except (KeyError, TypeError, ValueError):
        raise CodecError("cuszp stream meta lacks encoding/dim/eb_f32: it cannot be decoded") from None
    if encoding not in ENCODINGS or dim not in (1, 2, 3) or not (F32_MIN_NORMAL <= eb32 <= F32_MAX):
        raise CodecError(f"cuszp stream meta is invalid: encoding={encoding!r} dim={dim!r} eb_f32={eb32!r}")
    if float(np.float32(eb32)) != eb32:
        raise CodecError(f"cuszp stream meta is invalid: eb_f32={eb32!r} is not a float32 value")
    if dim > 1 and len(shape) < dim:
        raise CodecError(f"cuszp stream says {dim}-D processing for a {len(shape)}-D shape {shape}")
    if vector_problem(shape, dim):
        raise CodecError(f"cuszp stream says {dim}-D processing for shape {shape}: {vector_problem(shape, dim)}")
    return encoding, dim, eb32


@functools.cache
def _self_test(path: str, cc: tuple[int, int]) -> str:
    """Run the library once on a small ramp: '' if it round-trips within (twice) its bound,
    else why not. cuSZp checks no CUDA error, so a library whose kernels cannot run on this
    GPU returns silently; this is how perfscout notices."""
    cp = D.cupy()
    codec = CuSZpCodec("abs", 1e-3, encoding="outlier", dim=1)
    x = cp.linspace(-1.0, 1.0, 40000, dtype=cp.float32)
    try:
        with D.work_stream():
            blob = codec.device_compress(x)
            y = codec.device_decompress(blob, tuple(x.shape), np.dtype(np.float32), codec.stream_meta(x))
            D.work_stream().synchronize()
    except CodecError as exc:
        return f"cuSZp's self-test failed ({exc}); " + _rebuild_hint(cc)
    except Exception as exc:  # noqa: BLE001 - a CUDA error here means the library is unusable
        return f"cuSZp's self-test raised {type(exc).__name__}: {exc}; " + _rebuild_hint(cc)
    err = float(cp.max(cp.abs(y.astype(cp.float64) - x.astype(cp.float64))))
    if not math.isfinite(err) or err > 2e-3:
        return (f"cuSZp's self-test decoded a ramp with max error {err:.3g} at bound 1e-3: its kernels did not "
                "run correctly on this GPU; " + _rebuild_hint(cc))
    return ""


def _rebuild_hint(cc: tuple[int, int]) -> str:
    return (f"this GPU is sm_{cc[0]}{cc[1]}; rebuild with CUSZP_ARCH={cc[0]}{cc[1]} scripts/build_cuszp.sh "
            "SOURCE_DIR if it was built for another architecture")
