"""perfscout's codecs as numcodecs codecs: ``perfscout.sz3``, ``perfscout.sz2``,
``perfscout.sz3-h5``, ``perfscout.zfp`` and ``perfscout.szp``.

Each class wraps the backend of :func:`perfscout.codecs.registry.get_codec` (nothing is
re-implemented) and is registered through the ``numcodecs.codecs`` entry point, so
``numcodecs.get_codec({"id": "perfscout.sz3", ...})`` finds it without importing perfscout
first; :mod:`perfscout.codecs.numcodecs.zarr3` makes the same codecs Zarr v3 serializers
(in Zarr format 2 stores they are used directly as the ``compressor``).

- ``encode(array) -> bytes``: the perfscout container (:mod:`perfscout.codecs.framing`:
  magic, JSON header with codec, mode, bound, shape, dtype, then the library's own stream
  and a CRC-32), so a chunk decodes alone and ``perfscout decompress`` reads it too.
  Input must be a float32/float64 array: raw bytes carry no dtype or shape.
- ``decode(buf, out=None)``: any bytes-like object; corrupt, truncated or forged chunks
  raise a :class:`~perfscout.errors.CodecError`. The CLI's guards, in the same order:
  container CRC, codec, the stream's seal and its library header against the declared
  shape and dtype, the declared size against free memory, non-finite sections inflated
  to no more than the shape needs; then the native decoder runs in a helper process
  (:mod:`perfscout.codecs.decoder_process`: a forged body that still crashes it is an
  error, not the reader's death). szp's decoder is perfscout's own and runs here.
- Trusted stores: the helper process costs a round trip per chunk. A reader may opt in to
  decoding in this process, after the same checks (container, seal, library header,
  declared size, capped inflates), in one of two ways, both on the *reader's* side, so a
  store (whose metadata its writer chose) can never switch it on by itself:
  ``PERFSCOUT_TRUSTED_DECODE=1`` in the reader's environment trusts every chunk this
  process reads (for a pipeline that reads only stores it wrote); or the config key
  ``trusted_decode=True`` (it round-trips through ``get_config``/``from_config`` and the
  Zarr metadata) makes the *writer* sign each chunk with a keyed MAC (HMAC-SHA256) under
  ``$PERFSCOUT_HOME/trusted_decode.key`` (32 random bytes, created ``0600`` at the first
  such write), and a reader holding the same key file decodes in-process exactly the
  chunks whose MAC verifies; a chunk without one, or under another key (a forged store
  that copied the metadata), goes through the helper as before.
- Native modes only. ``rel`` is value-range relative over the *whole* field, which a
  chunk cannot see, so it is resolved at configuration time: ``mode="rel", bound=b,
  value_range=R`` becomes ``mode="abs", bound=b*R`` and the config states ``rel_bound=b``
  and ``value_range=R``. ``psnr``/``ratio`` are searched per field: resolve them with
  ``perfscout export`` (or ``perfscout eval``) to the absolute bound they settled on.
- ``verify=True`` (default): every chunk is decoded once after encoding and checked
  element by element against the bound by :func:`perfscout.codecs.verify.verify_bound`
  (the check ``perfscout eval`` makes, exact, float-rounding slack as in DESIGN.md); a
  chunk that breaks it raises instead of being written. ``nonfinite="passthrough"`` stores
  NaN/Inf positions and bit patterns beside the stream (the container's sections, as
  ``perfscout eval --nonfinite passthrough`` does); the default refuses them.
"""

from __future__ import annotations

import hmac
import logging
import math
import os
import struct
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numcodecs.abc import Codec as _NumcodecsCodec
from numcodecs.compat import ensure_bytes, ndarray_copy

from perfscout.codecs import verify as V
from perfscout.codecs._checks import checked_stream
from perfscout.codecs.base import crc32
from perfscout.codecs.decoder_process import decode_in_child
from perfscout.codecs.framing import from_bytes, to_bytes
from perfscout.codecs.registry import get_codec
from perfscout.codecs.streams import check_stream_header
from perfscout.errors import CodecError, PerfscoutError
from perfscout.io import write_new

#: perfscout backend id -> numcodecs codec id.
NUMCODECS_IDS: dict[str, str] = {
    "sz3": "perfscout.sz3",
    "sz2": "perfscout.sz2",
    "sz3-h5": "perfscout.sz3-h5",
    "zfp": "perfscout.zfp",
    "szp-gpu": "perfscout.szp",
}
NONFINITE_POLICIES = V.NONFINITE_POLICIES
_SEARCHED = ("psnr", "ratio")
#: Backends whose decoder is perfscout's own Python (memory-safe on any input): decoded
#: in this process. Every other backend's native decoder runs in the helper process.
_IN_PROCESS = ("szp-gpu",)
#: The reader's blanket opt-in (its environment, never a store's metadata).
TRUSTED_DECODE_ENV = "PERFSCOUT_TRUSTED_DECODE"
#: The container section holding a trusted writer's MAC, and the key file (under PERFSCOUT_HOME).
MAC_SECTION = "trust_mac"
KEY_NAME = "trusted_decode.key"
_KEY_BYTES = 32
_MAC_BYTES = 32
_DOMAIN = b"perfscout trusted chunk v1\0"
log = logging.getLogger(__name__)


def trusted_by_environment() -> bool:
    """Whether this process's environment says every chunk it reads is trusted
    (``PERFSCOUT_TRUSTED_DECODE=1``); CodecError for a value that is neither on nor off."""
    value = os.environ.get(TRUSTED_DECODE_ENV, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise CodecError(f"{TRUSTED_DECODE_ENV} must be 1 (trust every chunk this process reads) or 0, got {value!r}")


def key_path() -> Path:
    from perfscout.home import perfscout_home

    return perfscout_home() / KEY_NAME


def trust_key(*, create: bool = False) -> bytes | None:
    """This user's MAC key for trusted chunks (``$PERFSCOUT_HOME/trusted_decode.key``); None
    when there is none and ``create`` is False. Created ``0600``, never overwritten."""
    path = key_path()
    if create and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        # whole or absent: zarr encodes chunks on several threads, and a reader of a key
        # created in place saw it empty between the create and the write; a writer that
        # loses the race reads the winner's key
        write_new(path, os.urandom(_KEY_BYTES), mode=0o600)
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CodecError(f"cannot read the trusted-decode key {path}: {exc}") from None
    if len(key) != _KEY_BYTES:
        raise CodecError(f"the trusted-decode key {path} is {len(key)} bytes, not {_KEY_BYTES}: it is damaged; "
                         "restore it from a copy (chunks signed with the old key then decode in-process again)")
    return key


def _mac(key: bytes, signed: bytes | memoryview) -> bytes:
    """HMAC-SHA256 of ``signed`` (domain-separated). SHA-256 rather than keyed BLAKE2b:
    OpenSSL's runs on the CPU's SHA instructions, 0.56 vs 0.99 ms per 400 KB here."""
    h = hmac.new(key, _DOMAIN, "sha256")
    h.update(signed)
    return h.digest()


class PerfscoutCodec(_NumcodecsCodec):
    """Base class; one subclass per backend names ``codec_id`` and ``backend``."""

    codec_id: ClassVar[str]
    backend: ClassVar[str]  # key in perfscout.codecs.registry

    def __init__(self, mode: str = "abs", bound: float = 1e-3, *, value_range: float | None = None,
                 rel_bound: float | None = None, nonfinite: str = "refuse", verify: bool = True,
                 trusted_decode: bool = False, **options: Any) -> None:
        try:  # configs come from JSON files: say which number is wrong, not a bare ValueError
            bound = float(bound)
            value_range = None if value_range is None else float(value_range)
            rel_bound = None if rel_bound is None else float(rel_bound)
        except (TypeError, ValueError) as exc:
            raise CodecError(f"{self.codec_id}: bound, value_range and rel_bound must be numbers: {exc}") from exc
        mode, bound, rel_bound = _resolve(self.codec_id, mode, bound, value_range, rel_bound)
        if nonfinite not in NONFINITE_POLICIES:
            raise CodecError(f"{self.codec_id}: nonfinite must be 'refuse' or 'passthrough', got {nonfinite!r}")
        self.mode = mode
        self.bound = bound
        self.rel_bound = rel_bound  # the rel bound this absolute one was derived from, if any
        self.value_range = None if rel_bound is None else float(value_range)  # type: ignore[arg-type]
        self.nonfinite = nonfinite
        self.verify = bool(verify)
        if not isinstance(trusted_decode, bool):  # "false" from a hand-written JSON is truthy
            raise CodecError(f"{self.codec_id}: trusted_decode must be true or false, got {trusted_decode!r}")
        self.trusted_decode = trusted_decode
        self.options = dict(options)
        # The backend checks mode, bound and options now, so a bad config fails at set-up.
        self._codec = get_codec(self.backend, mode, bound, **options)

    # -- config (numcodecs: from_config(get_config()) rebuilds an equal codec) ---------------
    def get_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"id": self.codec_id, "mode": self.mode, "bound": self.bound}
        if self.rel_bound is not None:
            config.update(rel_bound=self.rel_bound, value_range=self.value_range)
        config.update(nonfinite=self.nonfinite, verify=self.verify, **self.options)
        if self.trusted_decode:  # only when set: existing configs and zarr.json stay as they were
            config["trusted_decode"] = True
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> PerfscoutCodec:
        cfg = dict(config)
        codec_id = cfg.pop("id", cls.codec_id)  # numcodecs.get_codec pops it; a bare config keeps it
        if codec_id != cls.codec_id:
            raise CodecError(f"config is for codec {codec_id!r}, not {cls.codec_id!r}")
        return cls(**cfg)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "id")
        return f"{type(self).__name__}({args})"

    # -- the work -------------------------------------------------------------------------
    def encode(self, buf: Any) -> bytes:
        array = _float_array(self.codec_id, buf)
        count, first = V.find_nonfinite(array)
        split = None
        if count:
            if self.nonfinite == "refuse":
                raise CodecError(
                    f"{self.codec_id}: chunk holds {count} non-finite value(s), first at index {first}; "
                    "configure nonfinite='passthrough' to store them exactly")
            split = V.split_nonfinite(array)  # the container layout perfscout eval writes
        values = array if split is None else split.filled
        compressed = self._codec.compress(values)
        if self.verify:
            self._check(values, self._codec.decompress(compressed), None if split is None else split.mask)
        sections = split.sections() if split is not None else {}
        if not self.trusted_decode or self.backend in _IN_PROCESS:
            return to_bytes(compressed, sections)
        key = trust_key(create=True)
        assert key is not None
        # The MAC section is the last one, and the MAC covers every byte before it (prefix,
        # header, stream, other sections): the reader checks it on the chunk as stored, no copy.
        placeholder = to_bytes(compressed, {**sections, MAC_SECTION: bytes(_MAC_BYTES)})
        body = placeholder[: -_MAC_BYTES - 4]
        body += _mac(key, body)
        return body + struct.pack("<I", crc32(body))

    def decode(self, buf: Any, out: Any = None) -> np.ndarray:
        """The chunk's values; CodecError for anything forged or corrupt. Everything that can
        be checked without decoding is, first (the container's CRC, the codec, the stream's
        seal and its own header against the declared shape and dtype, the declared size
        against this machine's memory, the non-finite sections inflated to no more than
        the shape needs); then the native decoder runs in a helper process
        (:mod:`perfscout.codecs.decoder_process`), so a stream that still crashes it is
        an error here, never this process's death, unless the reader trusts the chunk
        (``PERFSCOUT_TRUSTED_DECODE=1``, or ``trusted_decode`` with the chunk's MAC verified
        under this user's key): then it runs here, after the same checks."""
        raw = ensure_bytes(buf)
        compressed, sections = from_bytes(raw)
        signed = list(sections)[-1:] == [MAC_SECTION]  # the MAC, when there is one, is the last section
        mac = sections.pop(MAC_SECTION, None)
        if compressed.codec_id != self.backend:
            raise CodecError(f"{self.codec_id}: chunk was written by perfscout codec {compressed.codec_id!r}, "
                             f"not {self.backend!r}")
        try:
            decoder = self._codec if (compressed.mode, compressed.bound) == (self.mode, self.bound) else \
                get_codec(self.backend, compressed.mode, compressed.bound)
        except PerfscoutError as exc:  # a forged mode or bound: the chunk, not the caller, is wrong
            raise CodecError(f"{self.codec_id}: chunk header is malformed: {exc}") from None
        if self.backend in _IN_PROCESS:  # szp: its own header carries layout and CRC (no seal)
            check_stream_header(compressed)
            shape, dtype = tuple(int(d) for d in compressed.shape), np.dtype(compressed.dtype)
        else:
            shape, dtype = checked_stream(decoder, compressed)
        _check_fits(self.codec_id, shape, dtype)
        restore = V.unpack_nonfinite(sections, shape, dtype)  # before decoding: a bad section costs nothing
        if self.backend in _IN_PROCESS or self._trusted(raw if signed else None, mac):
            values = decoder.decompress(compressed)
        else:
            # The stream's copy is dropped first: the reply lands in a fresh array, so the
            # peak is the values plus the non-finite mask (1.25x the declared size for float32).
            del compressed, sections
            values = decode_in_child(raw, self.backend, shape, dtype)
        if restore is not None:
            mask, stored = restore
            if not values.flags.writeable:  # the helper's reply is ours to write: no second copy
                values = values.copy()
            values[mask] = stored
        return ndarray_copy(values, out) if out is not None else values

    def _trusted(self, raw: bytes | None, mac: bytes | None) -> bool:
        """Whether this chunk's native decode may run in this process (after every check):
        the reader's environment says so, or the codec is ``trusted_decode`` and the chunk's
        MAC (its last section) verifies under this user's key over every byte before it."""
        if trusted_by_environment():
            return True
        if not self.trusted_decode:
            return False
        key = trust_key() if raw is not None and mac is not None and len(mac) == _MAC_BYTES else None
        if key is not None and hmac.compare_digest(mac, _mac(key, memoryview(raw)[: -_MAC_BYTES - 4])):  # type: ignore[arg-type]
            return True
        if not getattr(self, "_said_untrusted", False):  # once per codec: a store of another key is slow, not wrong
            self._said_untrusted = True
            why = ("it carries no MAC" if mac is None or raw is None else f"no key at {key_path()}" if key is None
                   else f"its MAC does not verify under {key_path()}")
            log.warning("%s: a chunk of a trusted_decode store is decoded in the helper process: %s (a store "
                        "written under another key, or forged)", self.codec_id, why)
        return False

    def _check(self, original: np.ndarray, decoded: np.ndarray, nonfinite: np.ndarray | None) -> None:
        """Refuse a chunk whose reconstruction breaks the bound beyond float rounding: the
        verdict of :func:`perfscout.codecs.verify.verify_bound`, as evaluate gives it (the
        non-finite positions, stored exactly beside the stream, are not compared)."""
        if self.mode not in ("abs", "pw_rel"):  # fixed_rate: not an error bound
            return
        x, y = (original, decoded) if nonfinite is None else (original[~nonfinite], decoded[~nonfinite])
        if x.size == 0:
            return
        check = V.verify_bound(x, y, abs_bound=self.bound if self.mode == "abs" else None,
                               pw_rel_bound=self.bound if self.mode == "pw_rel" else None)
        if check.status == "bound_violated" or check.status == "error":
            raise CodecError(
                f"{self.codec_id}: bound_violated: {check.message}; the chunk was not written. This codec does "
                "not hold this bound on this data: use another codec (perfscout eval compares them) or "
                "verify=False to store it without the guarantee.")


def _check_fits(codec_id: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """CodecError when the declared values would not fit in this machine's free memory
    (a forged header claims any size: refused before anything is allocated for it)."""
    from perfscout.io import available_bytes

    nbytes = math.prod(shape) * np.dtype(dtype).itemsize
    have = available_bytes()
    if nbytes > have:
        raise CodecError(f"{codec_id}: the chunk declares {dtype.name} shape {shape}, {nbytes / 2**30:.3g} GiB; "
                         f"{have / 2**30:.3g} GiB is available here: refusing to decode it")


def _resolve(codec_id: str, mode: str, bound: float, value_range: float | None,
             rel_bound: float | None) -> tuple[str, float, float | None]:
    """(mode, bound, rel_bound) to configure the backend with; ``rel`` becomes ``abs``."""
    if mode in _SEARCHED:
        raise CodecError(f"{codec_id}: mode {mode!r} is searched on a whole field, not a chunk; resolve it to "
                         "the absolute bound it settled on (perfscout export / perfscout eval) and use mode='abs'")
    if not math.isfinite(bound) or bound <= 0:
        raise CodecError(f"{codec_id}: bound must be a positive finite number, got {bound!r}")
    if value_range is not None and (not math.isfinite(float(value_range)) or float(value_range) <= 0):
        raise CodecError(f"{codec_id}: value_range must be a positive finite number, got {value_range!r}")
    if mode == "rel":
        if value_range is None:
            raise CodecError(
                f"{codec_id}: mode 'rel' is relative to the whole field's value range, which one chunk cannot "
                "see: give value_range=R (max - min of the data; perfscout export resolves it) or use mode='abs'")
        if rel_bound is not None and float(rel_bound) != bound:
            raise CodecError(f"{codec_id}: rel_bound={rel_bound!r} contradicts bound={bound!r} in mode 'rel'")
        return "abs", bound * float(value_range), bound
    if value_range is not None and rel_bound is None:
        raise CodecError(f"{codec_id}: value_range is used to resolve mode 'rel' (with rel_bound in mode "
                         "'abs'); it means nothing alone")
    if rel_bound is not None:
        if mode != "abs" or value_range is None:
            raise CodecError(f"{codec_id}: rel_bound needs mode='abs' and value_range (it states how "
                             "the absolute bound was derived)")
        derived = float(rel_bound) * float(value_range)
        if not math.isclose(derived, bound, rel_tol=1e-12):
            raise CodecError(f"{codec_id}: bound {bound!r} is not rel_bound * value_range = {derived!r}")
        return mode, bound, float(rel_bound)
    return mode, bound, None


def _float_array(codec_id: str, buf: Any) -> np.ndarray:
    if isinstance(buf, (bytes, bytearray)):
        buf = np.frombuffer(buf, dtype=np.uint8)
    array = np.asarray(buf)
    if array.dtype.kind != "f" or array.dtype.itemsize not in (4, 8):
        raise CodecError(
            f"{codec_id} encodes float32/float64 arrays, got dtype {array.dtype} (shape {array.shape}); raw "
            "bytes carry no dtype or shape: pass np.frombuffer(buf, dtype).reshape(shape)")
    if array.ndim == 0 or array.size == 0:
        raise CodecError(f"{codec_id} needs a non-empty array with at least one axis, got shape {array.shape}")
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))


class SZ3(PerfscoutCodec):
    """SZ3 through pysz: modes abs (and rel, resolved); option ``algorithm``."""

    codec_id = "perfscout.sz3"
    backend = "sz3"


class SZ2(PerfscoutCodec):
    """SZ 2.1 (hdf5plugin filter): modes abs, pw_rel (and rel, resolved)."""

    codec_id = "perfscout.sz2"
    backend = "sz2"


class SZ3H5(PerfscoutCodec):
    """The SZ3 HDF5 filter of hdf5plugin: mode abs (and rel, resolved)."""

    codec_id = "perfscout.sz3-h5"
    backend = "sz3-h5"


class ZFP(PerfscoutCodec):
    """ZFP through zfpy: modes abs (fixed accuracy) and fixed_rate (bits per value)."""

    codec_id = "perfscout.zfp"
    backend = "zfp"


class SZP(PerfscoutCodec):
    """perfscout's szp (GPU kernels with CuPy, else the byte-identical NumPy reference)."""

    codec_id = "perfscout.szp"
    backend = "szp-gpu"


CODECS: tuple[type[PerfscoutCodec], ...] = (SZ3, SZ2, SZ3H5, ZFP, SZP)
BY_BACKEND: dict[str, type[PerfscoutCodec]] = {c.backend: c for c in CODECS}


def numcodecs_codec(backend: str, mode: str, bound: float, **config: Any) -> PerfscoutCodec:
    """The numcodecs codec for a perfscout backend id (``"sz3"``, ``"szp-gpu"``, ...)."""
    if backend not in BY_BACKEND:
        raise CodecError(f"no numcodecs codec for {backend!r}; there are: {', '.join(BY_BACKEND)}")
    return BY_BACKEND[backend](mode, bound, **config)


def register() -> None:
    """Register the codecs with numcodecs in this process (the entry point does it lazily)."""
    from numcodecs.registry import register_codec

    for cls in CODECS:
        register_codec(cls)


register()  # numcodecs.get_codec finds them once this module is imported, entry point or not
