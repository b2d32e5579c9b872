"""Plug-ins from installed distributions, found the way xarray finds its backends.

A distribution declares ``[project.entry-points."GROUP"] NAME = "module:object"``; a
scan (:func:`scan`) loads every entry point of a group once and sorts what can be used
from what cannot, with the reason: its import failed, the object is not what the group
expects (the caller's ``check``), its name is not a valid id, a built-in has that name
(built-ins always win), or two distributions claim the name (both refused: which one an
install order picks would change results silently). Nothing a plug-in does on import
(an exception, ``sys.exit()``) reaches the caller.

The groups: ``perfscout.codecs`` (:mod:`perfscout.codecs.registry`),
``perfscout.datasets`` (synthetic field generators, :mod:`perfscout.datasets.synthetic`)
and ``perfscout.rules`` (diagnosis rules, :mod:`perfscout.analysis.diagnosis.rule_registry`).
This module holds what they share; it imports nothing of perfscout.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection
from importlib import metadata
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

#: What a plug-in id may look like: it names result rows, task keys and file names.
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
ID_RULE = "1 to 64 letters, digits and . _ + -, starting with a letter or digit"


class PluginEntry(BaseModel):
    """An entry point that loaded and is used."""

    id: str
    value: str  # the entry point's "module:object"
    distribution: str  # "name version" of the distribution that declares it


class PluginFailure(BaseModel):
    """An entry point of the group that is not used, and why.

    ``kind``: invalid_id, import_error, shadows_builtin, duplicate, or what the group's
    check says (codecs: not_a_codec, id_mismatch; generators: not_callable)."""

    id: str
    value: str
    distribution: str
    kind: str
    reason: str


class PluginListing(BaseModel):
    """What one scan of a group found (callers cache it until they are refreshed)."""

    group: str
    enabled: bool = True  # False: installed plug-ins are ignored in this process
    loaded: list[PluginEntry] = []
    failed: list[PluginFailure] = []


def distribution_label(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "?"
    name = dist.metadata["Name"] if dist.metadata else None
    return f"{name or '?'} {dist.version or ''}".strip()


#: ``check(name, loaded_object)`` -> None when usable, else (failure kind, reason).
Check = Callable[[str, Any], "tuple[str, str] | None"]


def scan(group: str, *, builtins: Collection[str], check: Check,
         what: str = "plug-in") -> tuple[dict[str, Any], PluginListing]:
    """Load every entry point of ``group``; (usable objects by name, the listing)."""
    try:
        eps = list(metadata.entry_points(group=group))
    except Exception as exc:  # a corrupt installed METADATA must not break perfscout itself
        failure = PluginFailure(id="*", value="", distribution="?", kind="import_error",
                                reason=f"reading installed entry points failed: {type(exc).__name__}: {exc}")
        return {}, PluginListing(group=group, failed=[failure])
    # the same entry point seen twice (one distribution on two sys.path entries) counts once
    unique: dict[tuple[str, str, str], metadata.EntryPoint] = {}
    for ep in eps:
        unique.setdefault((ep.name, ep.value, distribution_label(ep)), ep)
    by_name: dict[str, list[metadata.EntryPoint]] = {}
    for ep in unique.values():
        by_name.setdefault(ep.name, []).append(ep)

    objects: dict[str, Any] = {}
    listing = PluginListing(group=group)

    def fail(ep: metadata.EntryPoint, kind: str, reason: str) -> None:
        listing.failed.append(PluginFailure(id=ep.name, value=ep.value, distribution=distribution_label(ep),
                                            kind=kind, reason=reason))

    for name in sorted(by_name):
        candidates = sorted(by_name[name], key=distribution_label)
        if not ID_PATTERN.match(name):
            for ep in candidates:
                fail(ep, "invalid_id", f"entry point name {name!r} is not a {what} id ({ID_RULE})")
            continue
        if name in builtins:
            for ep in candidates:  # not even imported: a built-in is never replaced
                fail(ep, "shadows_builtin", f"{what} id {name!r} is a perfscout built-in; the built-in "
                     "is used, this plug-in is ignored")
            continue
        if len(candidates) > 1:
            names = ", ".join(distribution_label(ep) for ep in candidates)
            for ep in candidates:
                fail(ep, "duplicate", f"{what} id {name!r} is declared by {len(candidates)} distributions "
                     f"({names}); none is used until one is uninstalled")
            continue
        ep = candidates[0]
        try:
            obj = ep.load()
        except (Exception, SystemExit) as exc:  # a plug-in that breaks on import is listed, never fatal
            fail(ep, "import_error", f"importing {ep.value} failed: {type(exc).__name__}: {exc}")
            continue
        try:
            problem = check(name, obj)
        except Exception as exc:  # a check that trips on a strange object refuses it
            problem = ("import_error", f"checking {ep.value} failed: {type(exc).__name__}: {exc}")
        if problem is not None:
            fail(ep, *problem)
            continue
        objects[name] = obj
        listing.loaded.append(PluginEntry(id=name, value=ep.value, distribution=distribution_label(ep)))
    return objects, listing


T = TypeVar("T")


class CachedScan(Generic[T]):
    """One group's scan, made on first use and kept until :meth:`clear` (thread-safe).

    ``scan`` returns (what the registry keeps, the listing). A plug-in that asks its registry
    while it is being imported, during the scan, gets ``empty()``: a second, recursive scan
    would import it again. ``lock``: the registry's own lock when it guards more state."""

    def __init__(self, group: str, scan: Callable[[], tuple[T, PluginListing]], empty: Callable[[], T],
                 lock: threading.RLock | None = None) -> None:
        self.group = group
        self.lock = lock if lock is not None else threading.RLock()
        self._scan, self._empty = scan, empty
        self._value: T | None = None
        self._listing: PluginListing | None = None
        self._scanning = False
        self.enabled = True  # False: installed plug-ins are ignored until the next clear()

    def get(self) -> T:
        with self.lock:
            if self._scanning:
                return self._empty()
            if self._value is None:
                if not self.enabled:
                    self._value, self._listing = self._empty(), PluginListing(group=self.group, enabled=False)
                else:
                    self._scanning = True
                    try:
                        self._value, self._listing = self._scan()
                    finally:
                        self._scanning = False
            return self._value

    def listing(self) -> PluginListing:
        """A copy of the scan's listing (scanning first if needed)."""
        self.get()
        with self.lock:
            if self._listing is None:  # asked from a plug-in's import, during the scan
                return PluginListing(group=self.group, enabled=self.enabled)
            return self._listing.model_copy(deep=True)

    def clear(self, *, entry_points: bool = True) -> None:
        """Forget the scan; the next :meth:`get` scans again (``entry_points=False``: it finds none)."""
        with self.lock:
            self._value, self._listing = None, None
            self.enabled = entry_points
