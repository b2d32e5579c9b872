"""The codec registry: which backends exist, which are usable here, and why not.

Three sources, in the order a codec id is looked up:

1. **built-ins** (``_BUILTIN``): perfscout's own backends, by import path, so that
   listing them never imports a library that is missing or broken;
2. **run-time registrations** (:func:`register_codec`): a sweep spec's ``plugins:``
   modules and tests register here;
3. **installed plug-ins**: every entry point of the ``perfscout.codecs`` group, in the
   way xarray finds its backends (``importlib.metadata.entry_points``). The entry
   point's name is the codec id, its value ``"module:Class"`` names a :class:`Codec`
   subclass. They are read once and cached (:func:`plugin_listing`);
   :func:`refresh` forgets the cache (after installing a distribution, in tests).

A plug-in that cannot be used is never fatal: it is left out of the codecs and listed
in :attr:`PluginListing.failed` with the reason (its import failed, it is not a Codec
subclass, its class names another id, or its id is already taken: built-ins always win
over plug-ins, and two distributions claiming one id are both refused, since which one
an install order picks would change results silently).

A backend whose module fails to import, or whose ``availability()`` says no, is still
listed by :func:`list_codecs`, with the reason.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel

from perfscout.codecs.base import Codec
from perfscout.errors import CodecError, CodecUnavailable
from perfscout.state.entry_points import (  # noqa: F401 - PluginFailure/PluginListing: part of this API
    ID_PATTERN, ID_RULE, CachedScan, PluginEntry, PluginFailure, PluginListing, scan,
)
from perfscout.state.modes import ALL_MODES, DERIVED_FROM_ABS

#: The entry-point group installed plug-ins declare their codecs in.
ENTRY_POINT_GROUP = "perfscout.codecs"

#: perfscout's own backends: codec_id -> "module:Class". Order is the listing order.
_BUILTIN: dict[str, str] = {
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

Source = Literal["builtin", "plugin", "registered"]


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
    #: where the backend comes from: perfscout itself, an installed plug-in (entry point),
    #: or a run-time registration (a spec's ``plugins:``, a test)
    source: Source = "builtin"
    #: the plug-in's distribution and version ("my-codecs 1.2"); empty for the others
    distribution: str = ""


#: An installed plug-in codec that loaded (kept under its first name for callers).
PluginCodec = PluginEntry


# -- mutable state, behind one lock (sweeps list codecs from threads) --------------------
_LOCK = threading.RLock()
_registered: dict[str, str] = {}  # run-time registrations, id -> "module:Class"


def _check_import_path(import_path: str) -> None:
    module, _, attr = import_path.partition(":")
    if not module or not attr:
        raise CodecError(f"import path must look like 'package.module:Class', got {import_path!r}")


def register_codec(codec_id: str, import_path: str) -> None:
    """Make a backend known by ``"package.module:Class"`` for this process.

    For code that cannot ship an entry point: a sweep spec's ``plugins:`` modules (which
    call this when imported) and tests. A registration takes precedence over an installed
    plug-in of the same id; a built-in id cannot be replaced.
    """
    _check_import_path(import_path)
    if not isinstance(codec_id, str) or not ID_PATTERN.match(codec_id):
        raise CodecError(f"a codec id is {ID_RULE}; got {codec_id!r}")
    if codec_id in _BUILTIN and _BUILTIN[codec_id] != import_path:
        raise CodecError(f"codec id {codec_id!r} is one of perfscout's own codecs "
                         f"({_BUILTIN[codec_id]}); register the plug-in under another id")
    with _LOCK:
        if codec_id not in _BUILTIN:
            _registered[codec_id] = import_path


def unregister_codec(codec_id: str) -> None:
    """Forget a run-time registration (no error when there is none; built-ins stay)."""
    with _LOCK:
        _registered.pop(codec_id, None)


def registered_codecs() -> dict[str, str]:
    """The run-time registrations (a copy): id -> ``"module:Class"``.

    A child process that does not inherit this process' memory (a forkserver, a Dask
    worker) replays them with :func:`register_codec`; installed plug-ins it finds itself.
    """
    with _LOCK:
        return dict(_registered)


def refresh(*, registered: Mapping[str, str] | None = None, entry_points: bool = True) -> None:
    """Forget the cached scan of installed plug-ins; the next lookup scans again.

    ``registered``: when given, the run-time registrations become exactly these (a test
    restores the ones it found; ``{}`` forgets them all). ``entry_points=False`` ignores
    installed plug-ins until the next ``refresh()`` (perfscout's own codecs only).
    """
    with _LOCK:
        if registered is not None:
            for import_path in registered.values():
                _check_import_path(import_path)
            _registered.clear()
            _registered.update({k: v for k, v in registered.items() if k not in _BUILTIN})
        _PLUGINS.clear(entry_points=entry_points)


def _check_codec(codec_id: str, obj: Any) -> tuple[str, str] | None:
    """None when ``obj`` is the Codec subclass entry point ``codec_id`` must name."""
    if not (isinstance(obj, type) and issubclass(obj, Codec)):
        return "not_a_codec", f"{obj!r:.80} is a {type(obj).__name__}, not a subclass of perfscout.codecs.base.Codec"
    own_id = getattr(obj, "codec_id", None)
    if own_id != codec_id:
        return "id_mismatch", (f"entry point {codec_id!r} names {obj.__module__}:{obj.__qualname__}, whose "
                               f"codec_id is {own_id!r}; the entry point's name must be the class's codec_id")
    return None


def _scan() -> tuple[dict[str, type[Codec]], PluginListing]:
    """Load every entry point of the group once; sort what loads from what does not."""
    return scan(ENTRY_POINT_GROUP, builtins=_BUILTIN, check=_check_codec, what="codec")


# loaded plug-in classes, scanned on first use; a plug-in that asks the registry while it
# is imported sees no plug-ins yet
_PLUGINS: CachedScan[dict[str, type[Codec]]] = CachedScan(ENTRY_POINT_GROUP, _scan, dict, lock=_LOCK)


def _plugin_classes() -> dict[str, type[Codec]]:
    return _PLUGINS.get()


def plugin_listing() -> PluginListing:
    """The installed plug-ins that loaded and those that failed, with the reason (cached)."""
    return _PLUGINS.listing()


def codec_ids() -> list[str]:
    """Every usable codec id: built-ins, then installed plug-ins, then registrations."""
    plugins = _plugin_classes()
    with _LOCK:
        registered = list(_registered)
    ids = list(_BUILTIN) + [k for k in plugins if k not in _registered] + registered
    return list(dict.fromkeys(ids))


def source_of(codec_id: str) -> Source:
    """Where ``codec_id`` comes from; CodecError for an unknown id."""
    if codec_id in _BUILTIN:
        return "builtin"
    with _LOCK:
        if codec_id in _registered:
            return "registered"
    if codec_id in _plugin_classes():
        return "plugin"
    raise _unknown(codec_id)


def _unknown(codec_id: str) -> CodecError:
    for failure in plugin_listing().failed:
        if failure.id == codec_id:  # installed, but refused: say why rather than "unknown"
            return CodecUnavailable(f"codec {codec_id!r} is unavailable: plug-in from "
                                    f"{failure.distribution}: {failure.reason}")
    return CodecError(f"unknown codec {codec_id!r}; known codecs: {', '.join(codec_ids())}")


def _load_path(codec_id: str, import_path: str) -> type[Codec]:
    module_name, _, class_name = import_path.partition(":")
    try:
        module = importlib.import_module(module_name)
        cls = getattr(module, class_name)
    except ModuleNotFoundError as exc:
        raise CodecUnavailable(f"codec {codec_id!r} is unavailable: module {exc.name!r} not found") from exc
    except (Exception, SystemExit) as exc:  # a backend that breaks on import is unavailable, not fatal
        raise CodecUnavailable(
            f"codec {codec_id!r} is unavailable: importing {import_path} failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if not (isinstance(cls, type) and issubclass(cls, Codec)):
        raise CodecUnavailable(f"codec {codec_id!r} is unavailable: {import_path} is not a Codec")
    return cls


def _load(codec_id: str) -> type[Codec]:
    if codec_id in _BUILTIN:  # no scan of installed distributions for perfscout's own codecs
        return _load_path(codec_id, _BUILTIN[codec_id])
    with _LOCK:
        path = _registered.get(codec_id)
    if path is not None:
        return _load_path(codec_id, path)
    cls = _plugin_classes().get(codec_id)
    if cls is None:
        raise _unknown(codec_id)
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


def _distribution_of(codec_id: str, source: Source) -> str:
    if source != "plugin":
        return ""
    return next((p.distribution for p in plugin_listing().loaded if p.id == codec_id), "")


def info(codec_id: str) -> CodecInfo:
    source = source_of(codec_id)
    origin = {"source": source, "distribution": _distribution_of(codec_id, source)}
    try:
        cls = _load(codec_id)
    except CodecUnavailable as exc:
        return CodecInfo(id=codec_id, available=False, reason=str(exc), **origin)
    ok, reason = _probe(cls)
    try:
        version = cls.version() if ok else ""
    except Exception as exc:
        version, ok, reason = "", False, f"version() raised {type(exc).__name__}: {exc}"
    return CodecInfo(
        id=codec_id, family=cls.family, device=cls.device, native_modes=tuple(cls.native_modes),
        modes=evaluable_modes(cls), version=version, available=ok, reason=reason,
        devices=_devices(cls, ok, reason), **origin,
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
    """Every known backend, installed or not (see ``available`` and ``reason``).

    Installed plug-ins that could not be used are not codecs; :func:`plugin_listing`
    says why each one failed.
    """
    return [info(codec_id) for codec_id in codec_ids()]


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
