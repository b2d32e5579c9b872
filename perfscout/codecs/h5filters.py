"""SZ2 and SZ3 as HDF5 filters (hdf5plugin), driven through an in-memory h5py file.

Compression writes the whole array as a single chunk of a dataset in a ``core``-driver
file that never touches disk, then lifts the filtered chunk out with
``read_direct_chunk``: those bytes are exactly what an HDF5 file would store. Decoding
writes them back with ``write_direct_chunk`` into a fresh in-memory dataset carrying
the same filter and reads it, so HDF5 runs the filter's decode path. The filter's
``cd_values`` travel in ``meta`` (they hold the mode and bound the stream was made
with), as does the chunk's filter mask (HDF5 stores a chunk unfiltered when an
optional filter declines it; we then report the raw size honestly).

``sz2`` (SZ 2.1): modes ``abs``, ``rel`` and ``pw_rel`` (native point-wise relative).
``sz3-h5`` (SZ3 filter): mode ``abs`` (``rel`` is resolved to ``abs`` by perfscout).

Both filters take down the process on some inputs (found by fuzzing this build in
child processes); those inputs are refused with a :class:`CodecError` before the
library sees them: absolute bounds below the smallest normal double (both filters),
and for SZ2 arrays of exactly 20 values (see :class:`SZ2Codec`).
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

import numpy as np

from perfscout.codecs._checks import check_options, checked_input, checked_stream
from perfscout.codecs.base import Codec, Compressed
from perfscout.codecs.chunked import check_threads, compress_chunked, decompress_chunked, is_chunked
from perfscout.errors import CodecError

_names = itertools.count()

#: Absolute bounds below this (float64's smallest normal) crash both SZ filters.
SMALLEST_NORMAL_BOUND = float(np.finfo(np.float64).tiny)


def _memory_file() -> Any:
    import h5py

    # Every in-memory file needs a distinct name within the process.
    return h5py.File(f"perfscout-{next(_names)}.h5", "w", driver="core", backing_store=False)


class _H5FilterCodec(Codec):
    """Shared machinery; subclasses name the hdf5plugin filter and its mode keywords."""

    family = "sz"
    device = "cpu"
    distribution = "hdf5plugin"
    requires = ("h5py", "hdf5plugin")
    install_hint = "pip install hdf5plugin h5py"
    filter_class: ClassVar[str]  # attribute of hdf5plugin
    filter_key: ClassVar[str]  # key in hdf5plugin.get_config().registered_filters
    mode_keywords: ClassVar[dict[str, str]]  # perfscout mode -> hdf5plugin keyword
    max_ndim: ClassVar[int] = 5

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        super().__init__(mode, bound, **options)
        check_options(self, ("threads",))  # threads: N chunks in parallel (perfscout.codecs.chunked)
        self.threads = check_threads(self.codec_id, self.options.get("threads"))

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        ok, reason = super().availability()
        if not ok:
            return ok, reason
        import hdf5plugin

        if cls.filter_key not in hdf5plugin.get_config().registered_filters:
            return False, f"hdf5plugin {hdf5plugin.version} has no {cls.filter_key!r} filter registered"
        return True, ""

    def _filter(self) -> Any:
        import hdf5plugin

        return getattr(hdf5plugin, self.filter_class)(**{self.mode_keywords[self.mode]: self.bound})

    def _stream_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape handed to the filter (a subclass may work around library limits)."""
        return shape

    def _check_bound(self, data: np.ndarray) -> None:
        """Refuse absolute bounds below the smallest normal double: both SZ filters
        segfault on them (found by fuzzing in child processes)."""
        if self.mode == "pw_rel":
            return
        eb, value_range = self.bound, 1.0
        if self.mode == "rel":  # the filter resolves rel to bound * R itself
            with np.errstate(over="ignore"):
                value_range = float(np.max(data)) - float(np.min(data))
            eb = self.bound * value_range
        if eb < SMALLEST_NORMAL_BOUND and value_range > 0:  # eb may even underflow to 0
            raise CodecError(
                f"{self.codec_id}: absolute bound {eb:.3g} is below the smallest normal double "
                f"({SMALLEST_NORMAL_BOUND:.3g}); the SZ filter crashes on such bounds"
            )

    def compress(self, array: np.ndarray) -> Compressed:
        data = checked_input(self, array, self.max_ndim)
        self._check_bound(data)
        if self.threads > 1 and data.shape[0] > 1:
            return compress_chunked(self, data, self.threads)
        stream_shape = self._stream_shape(data.shape)
        flat = data.reshape(stream_shape)
        origin = (0,) * flat.ndim
        try:
            with _memory_file() as f:
                dset = f.create_dataset("x", data=flat, chunks=stream_shape, **self._filter())
                filters = dset._filters  # {filter id: cd_values}, needed to decode
                mask, chunk = dset.id.read_direct_chunk(origin)
        except (OSError, ValueError, RuntimeError) as exc:
            raise CodecError(f"{self.codec_id} compression failed: {exc}") from exc
        raw = bytes(chunk)
        meta: dict[str, Any] = {"filter_mask": int(mask)}
        if stream_shape != data.shape:
            meta["stream_shape"] = list(stream_shape)
        meta["cd_values"] = [int(v) for v in next(iter(filters.values()))] if filters else []
        return self.sealed(data, raw, **meta)

    def decompress(self, compressed: Compressed) -> np.ndarray:
        if is_chunked(compressed):
            return decompress_chunked(self, compressed)
        shape, dtype = checked_stream(self, compressed)
        out_shape = shape
        if "stream_shape" in compressed.meta:
            try:
                shape = tuple(int(s) for s in compressed.meta["stream_shape"])
            except (TypeError, ValueError) as exc:
                raise CodecError(f"{self.codec_id} stream metadata is malformed: {exc}") from exc
            if int(np.prod(shape)) != int(np.prod(out_shape)) or min(shape) <= 0:
                raise CodecError(f"{self.codec_id} stream shape {shape} does not hold {out_shape}")
        try:
            mask = int(compressed.meta.get("filter_mask", 0))
        except (TypeError, ValueError) as exc:
            raise CodecError(f"{self.codec_id} stream metadata is malformed: filter_mask: {exc}") from exc
        if mask:  # the filter declined the chunk: HDF5 stored the raw values
            expected = int(np.prod(shape)) * dtype.itemsize
            if len(compressed.data) != expected:
                raise CodecError(f"{self.codec_id} unfiltered chunk is {len(compressed.data)} bytes, expected {expected}")
            return np.frombuffer(compressed.data, dtype=dtype).reshape(out_shape).copy()
        try:
            with _memory_file() as f:
                dset = f.create_dataset(
                    "x", shape=shape, dtype=dtype, chunks=shape,
                    **type(self)(compressed.mode, compressed.bound)._filter(),
                )
                dset.id.write_direct_chunk((0,) * len(shape), compressed.data, filter_mask=mask)
                return dset[...].reshape(out_shape)
        except (OSError, ValueError, RuntimeError) as exc:
            raise CodecError(f"{self.codec_id} stream could not be decoded: {exc}") from exc


class SZ2Codec(_H5FilterCodec):
    """SZ 2.1 filter, with guards for inputs that kill the process inside the library.

    Found by fuzzing this build (hdf5plugin 7.1, SZ 2.1.12) in child processes: any
    array of exactly 20 values makes it ``exit()``, abort or segfault (compression and
    decompression alike), and small multi-dimensional arrays (3-D, under ~30 values)
    abort at loose bounds. Arrays of exactly 20 values are refused with a CodecError;
    multi-dimensional arrays under ``SMALL_FLATTEN`` values are compressed as 1-D (the
    stream records ``stream_shape``), where this build is sound.
    """

    codec_id = "sz2"
    native_modes = ("abs", "rel", "pw_rel")
    filter_class = "SZ"
    filter_key = "sz"
    mode_keywords = {"abs": "absolute", "rel": "relative", "pw_rel": "pointwise_relative"}
    CRASHING_SIZE = 20
    SMALL_FLATTEN = 64
    #: pw_rel bounds from here on crash SZ 2.1 (segfault under an address-space limit,
    #: without one it allocates until the OOM killer), on every array tried (1-D to 3-D,
    #: float32 and float64); 15.99999 still works.
    PW_REL_LIMIT = 16.0

    def __init__(self, mode: str = "abs", bound: float = 1e-3, **options: Any) -> None:
        super().__init__(mode, bound, **options)
        if mode == "pw_rel" and not self.bound < self.PW_REL_LIMIT:
            raise CodecError(
                f"sz2: pw_rel {self.bound:g} is refused: SZ 2.1 crashes (or allocates until the "
                f"OOM killer) on point-wise relative bounds >= {self.PW_REL_LIMIT:g}"
            )

    def known_behaviour(self) -> list[str]:
        # Found by perfscout's tests (hdf5plugin 7.1, SZ 2.1.12): the same field and bound in
        # fresh processes gave pw_rel streams that differ in one header byte (offset 31 of a
        # 64^3 float32 stream, four processes, four values), so the bytes, and once the
        # stream's final zstd pass compresses that header its size by a few bytes (ratio
        # 18.737 vs 18.749 once), vary between processes; abs and rel streams, and every
        # decoded value, do not (tests/integration/test_sz2_pw_rel_streams.py).
        if self.mode != "pw_rel":
            return []
        return ["sz2 pw_rel: SZ 2.1 leaves a byte of its stream header unset in this mode, so the stream's "
                "bytes (and its size, by a few bytes) differ from one process to the next; the decoded values "
                "do not. Compare sz2 pw_rel runs by their values and bound checks, not by stream hashes; a "
                "ratio difference of a few bytes is this, not a change"]

    def _stream_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        n = int(np.prod(shape))
        if n == self.CRASHING_SIZE:
            raise CodecError(
                "sz2: SZ 2.1 in this hdf5plugin build crashes the process on arrays of exactly "
                f"{self.CRASHING_SIZE} values; use another codec for this array"
            )
        return (n,) if len(shape) > 1 and n < self.SMALL_FLATTEN else shape


class SZ3H5Codec(_H5FilterCodec):
    """SZ3 filter. Values of magnitude near the dtype's largest (found in child
    processes: every array holding |x| >= max/8 segfaults, at any bound, 1-D to 3-D,
    float32 and float64) overflow the filter's prediction arithmetic (a Lorenzo or
    interpolation prediction sums several values) and crash it; arrays holding
    |x| > max / ``MAGNITUDE_HEADROOM`` are refused with a CodecError, as are absolute
    bounds below the dtype's smallest (subnormal) value."""

    codec_id = "sz3-h5"
    # Only ``absolute`` is offered: the filter itself warns that its other modes are not
    # properly tested, so ``rel`` is resolved to an absolute bound by perfscout instead.
    native_modes = ("abs",)
    filter_class = "SZ3"
    filter_key = "sz3"
    mode_keywords = {"abs": "absolute"}
    MAGNITUDE_HEADROOM = 32.0

    def _check_bound(self, data: np.ndarray) -> None:
        super()._check_bound(data)
        resolution = float(np.finfo(data.dtype).smallest_subnormal)
        if self.mode == "abs" and self.bound < resolution:
            # Found by benchmarks/fuzz_bounds.py: abs 1e-53 on float32 data (subnormal
            # values) segfaults the filter. Such a bound is below the dtype's resolution:
            # it asks for the exact values, which a lossless codec gives.
            raise CodecError(
                f"sz3-h5: absolute bound {self.bound:.3g} is below the smallest {data.dtype} value "
                f"({resolution:.3g}); the SZ3 filter crashes on such bounds; use a lossless codec or a "
                "larger bound"
            )
        limit = float(np.finfo(data.dtype).max) / self.MAGNITUDE_HEADROOM
        peak = float(np.max(np.abs(data)))  # validated input: finite
        if peak > limit:
            raise CodecError(
                f"sz3-h5: the array holds |x| = {peak:.6g}, beyond {limit:.6g} ({data.dtype} max / "
                f"{self.MAGNITUDE_HEADROOM:g}); the SZ3 filter's prediction overflows {data.dtype} "
                "there and crashes the process; use sz3 or zfp, or rescale the data"
            )
