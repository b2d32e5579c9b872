"""The codec registry: which backends exist, which are usable here, and why not.

Backends are known by an import path so that listing them never imports a library
that is missing or broken: a backend whose module fails to import, or whose
``availability()`` says no, is still listed, with the reason.
"""

from __future__ import annotations

import importlib
from typing import Any

from pydantic import BaseModel

from perfscout.codecs.base import Codec
from perfscout.errors import CodecError, CodecUnavailable
from perfscout.state.modes import ALL_MODES, DERIVED_FROM_ABS

#: codec_id -> "module:Class". Order is the listing order.
_KNOWN: dict[str, str] = {
    "sz3": "perfscout.codecs.sz3:SZ3Codec",
    "sz2": "perfscout.codecs.h5filters:SZ2Codec",
    "sz3-h5": "perfscout.codecs.h5filters:SZ3H5Codec",
    "zfp": "perfscout.codecs.zfp:ZFPCodec",
    "szp-gpu": "perfscout.codecs.szp.codec:SZPGpuCodec",
    # the real GPU peers (perfscout/codecs/gpu_peers): cuSZp, and nvCOMP's lossless codecs
    "cuszp": "perfscout.codecs.gpu_peers.cuszp:CuSZpCodec",
    "cuszp-plain": "perfscout.codecs.gpu_peers.cuszp:CuSZpPlainCodec",
    "cuszp-outlier": "perfscout.codecs.gpu_peers.cuszp:CuSZpOutlierCodec",
    "nvcomp-lz4": "perfscout.codecs.gpu_peers.nvcomp:NvcompLZ4Codec",
    "nvcomp-zstd": "perfscout.codecs.gpu_peers.nvcomp:NvcompZstdCodec",
    "nvcomp-deflate": "perfscout.codecs.gpu_peers.nvcomp:NvcompDeflateCodec",
    "nvcomp-gdeflate": "perfscout.codecs.gpu_peers.nvcomp:NvcompGDeflateCodec",
    "nvcomp-cascaded": "perfscout.codecs.gpu_peers.nvcomp:NvcompCascadedCodec",
    "nvcomp-bitcomp": "perfscout.codecs.gpu_peers.nvcomp:NvcompBitcompCodec",
    "nvcomp-ans": "perfscout.codecs.gpu_peers.nvcomp:NvcompANSCodec",
}

class CodecInfo(BaseModel):
    """What the registry knows about one backend."""

    id: str
    family: str = ""
    device: str = ""
    native_modes: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()  # every mode perfscout can evaluate with it (native + derived)
    version: str = ""
    available: bool = False
    reason: str = ""  # why it is unavailable; empty when available
    #: device -> "" where it runs here now, else why not (szp-gpu: cpu always, cuda only with
    #: CuPy and a GPU). Probes never import a GPU library that is not installed.
    devices: dict[str, str] = {}


def register_codec(codec_id: str, import_path: str) -> None:
    """Make a backend known by ``"package.module:Class"`` (used by plug-ins and tests)."""
    if ":" not in import_path:
        raise CodecError(f"import path must look like 'package.module:Class', got {import_path!r}")
    _KNOWN[codec_id] = import_path


def codec_ids() -> list[str]:
    return list(_KNOWN)


def _load(codec_id: str) -> type[Codec]:
    if codec_id not in _KNOWN:
        raise CodecError(f"unknown codec {codec_id!r}; known codecs: {', '.join(_KNOWN)}")
    module_name, _, class_name = _KNOWN[codec_id].partition(":")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
    except ModuleNotFoundError as exc:
        raise CodecUnavailable(f"codec {codec_id!r} is unavailable: module {exc.name!r} not found") from exc
    except Exception as exc:  # a backend that breaks on import is unavailable, not fatal
        raise CodecUnavailable(
            f"codec {codec_id!r} is unavailable: importing {_KNOWN[codec_id]} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, Codec)):
        raise CodecUnavailable(f"codec {codec_id!r} is unavailable: {_KNOWN[codec_id]} is not a Codec")
    return cls


def evaluable_modes(cls: type[Codec]) -> tuple[str, ...]:
    """Native modes plus those derived from a native ``abs`` mode, in ALL_MODES order."""
    modes = set(cls.native_modes)
    if "abs" in modes:
        modes.update(DERIVED_FROM_ABS)
    return tuple(m for m in ALL_MODES if m in modes)


def _probe(cls: type[Codec]) -> tuple[bool, str]:
    """``cls.availability()``; a probe that raises makes the backend unavailable."""
    try:
        return cls.availability()
    except Exception as exc:  # availability probes touch drivers; never let them crash a listing
        return False, f"availability check raised {type(exc).__name__}: {exc}"


def codec_class(codec_id: str) -> type[Codec]:
    """The backend class, or CodecError (unknown) / CodecUnavailable (not usable here)."""
    cls = _load(codec_id)
    ok, reason = _probe(cls)
    if not ok:
        raise CodecUnavailable(f"codec {codec_id!r} is unavailable: {reason}")
    return cls


def info(codec_id: str) -> CodecInfo:
    try:
        cls = _load(codec_id)
    except CodecUnavailable as exc:
        return CodecInfo(id=codec_id, available=False, reason=str(exc))
    ok, reason = _probe(cls)
    try:
        version = cls.version() if ok else ""
    except Exception as exc:
        version, ok, reason = "", False, f"version() raised {type(exc).__name__}: {exc}"
    return CodecInfo(
        id=codec_id, family=cls.family, device=cls.device, native_modes=tuple(cls.native_modes),
        modes=evaluable_modes(cls), version=version, available=ok, reason=reason,
        devices=_devices(cls, ok, reason),
    )


def _devices(cls: type[Codec], ok: bool, reason: str) -> dict[str, str]:
    """Where the backend runs here: its own ``device_availability()`` when it has one."""
    probe = getattr(cls, "device_availability", None)
    if not ok or probe is None:
        return {cls.device: "" if ok else reason}
    try:
        return dict(probe())
    except Exception as exc:  # a driver probe must never break a listing
        return {cls.device: f"device probe raised {type(exc).__name__}: {exc}"}


def list_codecs() -> list[CodecInfo]:
    """Every known backend, installed or not (see ``available`` and ``reason``)."""
    return [info(codec_id) for codec_id in _KNOWN]


def get_codec(codec_id: str, mode: str = "abs", bound: float = 1e-3, **options: Any) -> Codec:
    """An instance of a backend in one of its *native* modes.

    ``psnr``/``ratio`` (and ``rel`` for backends without it) are searched or resolved by
    :mod:`perfscout.tools.bounds` over the native ``abs`` mode; ask for those through
    :func:`perfscout.tools.evaluate.evaluate`.
    """
    if mode not in ALL_MODES:
        raise CodecError(f"unknown mode {mode!r}; modes: {', '.join(ALL_MODES)}")
    cls = codec_class(codec_id)
    if mode not in cls.native_modes:
        hint = ""
        if mode in evaluable_modes(cls):
            hint = " natively (perfscout.tools.evaluate derives it from abs)"
        raise CodecError(
            f"codec {codec_id!r} does not support mode {mode!r}{hint}; "
            f"native modes: {', '.join(cls.native_modes)}"
        )
    return cls(mode, bound, **options)


def from_config(config: dict[str, Any]) -> Codec:
    """Rebuild a codec from ``Codec.get_config()`` output (numcodecs-style)."""
    if "id" not in config:
        raise CodecError("codec config has no 'id'")
    return codec_class(str(config["id"])).from_config(config)
