"""The registry of named datasets (``registry.yaml``): what exists, where, and loading it.

Three kinds of entry:

- ``shared``: real fields read in place from the shared data directory
  (``$PERFSCOUT_SHARED_DATA``, else ``../shared/data`` beside the repository or the
  current directory); never copied;
- ``remote``: SDRBench fields, available once the user has downloaded and extracted
  the archive under ``$PERFSCOUT_SDRBENCH_DIR`` (perfscout finds the file by name);
- ``synthetic``: the deterministic generators of :mod:`perfscout.datasets.synthetic`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import BaseModel

from perfscout.datasets.field import Field, parse_dtype, parse_shape, dtype_tag
from perfscout.datasets.loaders import load_raw
from perfscout.datasets.synthetic import SYNTHETIC_KINDS, describe_kind, parse_synthetic, synthetic
from perfscout.errors import InputError
from perfscout.io import YAMLLimitError, load_yaml_file

REGISTRY_PATH = Path(__file__).with_name("registry.yaml")
ENV_SHARED_DATA = "PERFSCOUT_SHARED_DATA"
ENV_SDRBENCH_DIR = "PERFSCOUT_SDRBENCH_DIR"
#: The repository root when running from a checkout (perfscout/datasets/registry.py).
REPO_ROOT = Path(__file__).resolve().parents[2]
#: How deep to look for a remote file under $PERFSCOUT_SDRBENCH_DIR: archives extract
#: into one or two folder levels, and a bounded walk stays fast on a big data disk.
REMOTE_SEARCH_DEPTH = 4

DatasetKind = Literal["shared", "remote", "synthetic"]


class DatasetInfo(BaseModel):
    """One registry entry as ``datasets list`` shows it."""

    name: str
    kind: DatasetKind
    shape: list[int]
    dtype: str  # "f32" | "f64"
    nbytes: int
    available: bool
    reason: str = ""  # why not available, or where it was found
    description: str = ""
    path: str = ""  # the file, when found
    url: str = ""  # where to download a remote dataset


def load_registry(path: str | Path | None = None) -> dict[str, list[dict[str, Any]]]:
    """The registry's entries by kind, checked (name, shape and dtype are required)."""
    p = Path(path) if path is not None else REGISTRY_PATH
    try:  # a regular file of document size, YAML within limits (the path may be the user's)
        doc = load_yaml_file(p, "dataset registry") or {}
    except YAMLLimitError as exc:
        raise InputError(f"cannot read dataset registry {p}: {exc}") from exc
    if not isinstance(doc, dict):
        raise InputError(f"dataset registry {p}: expected a mapping of kinds to lists")
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for kind in ("shared", "remote", "synthetic"):
        entries = doc.get(kind) or []
        for e in entries:
            if not isinstance(e, dict) or "name" not in e or "shape" not in e or "dtype" not in e:
                raise InputError(f"dataset registry {p}: {kind} entry {e!r} needs name, shape, dtype")
            if kind != "synthetic" and "file" not in e:
                raise InputError(f"dataset registry {p}: {kind} entry {e['name']!r} needs a file")
            if kind == "shared" and not isinstance(e["file"], str):
                raise InputError(f"dataset registry {p}: shared entry {e['name']!r} needs one file name")
            if kind == "synthetic" and e["name"] not in SYNTHETIC_KINDS:
                raise InputError(f"dataset registry {p}: unknown synthetic kind {e['name']!r}")
            if e["name"] in seen:
                raise InputError(f"dataset registry {p}: duplicate name {e['name']!r}")
            seen.add(e["name"])
            e["shape"] = list(parse_shape(e["shape"]))
            e["dtype"] = dtype_tag(e["dtype"])
        out[kind] = list(entries)
    return out


def shared_data_candidates() -> list[Path]:
    """Where the shared fields are looked for, in order."""
    env = os.environ.get(ENV_SHARED_DATA)
    if env:
        return [Path(env).expanduser()]
    cands = [REPO_ROOT.parent / "shared" / "data", Path.cwd().resolve().parent / "shared" / "data"]
    unique: list[Path] = []
    for c in cands:
        if c not in unique:
            unique.append(c)
    return unique


def shared_data_dir() -> Path | None:
    """The first existing shared data directory, or None."""
    for c in shared_data_candidates():
        if c.is_dir():
            return c
    return None


def _expected_nbytes(entry: dict[str, Any]) -> int:
    return math.prod(entry["shape"]) * parse_dtype(entry["dtype"]).itemsize


def _size_problem(path: Path, entry: dict[str, Any]) -> str:
    actual = path.stat().st_size
    expected = _expected_nbytes(entry)
    if actual != expected:
        return f"{path} has {actual} bytes, expected {expected}"
    return ""


def _locate_shared(entry: dict[str, Any]) -> tuple[Path | None, str]:
    cands = shared_data_candidates()
    for d in cands:
        f = d / entry["file"]
        if f.is_file():
            problem = _size_problem(f, entry)
            return (None, problem) if problem else (f, f"found at {f}")
    where = ", ".join(str(c) for c in cands)
    return None, f"{entry['file']} not found in {where} (set {ENV_SHARED_DATA})"


def _walk_for(root: Path, filename: str, depth: int) -> Path | None:
    direct = root / filename
    if direct.is_file():
        return direct
    if depth == 0:
        return None
    try:
        subdirs = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return None
    for sub in subdirs:
        hit = _walk_for(sub, filename, depth - 1)
        if hit is not None:
            return hit
    return None


def _file_names(entry: dict[str, Any]) -> list[str]:
    """A remote entry's file: one name, or alternatives (archive versions differ)."""
    f = entry["file"]
    return [str(n) for n in f] if isinstance(f, list) else [str(f)]


def _locate_remote(entry: dict[str, Any]) -> tuple[Path | None, str]:
    how = (
        f"download {entry.get('url', '(no URL recorded)')}, extract it under a folder and "
        f"set {ENV_SDRBENCH_DIR} to that folder"
    )
    root = os.environ.get(ENV_SDRBENCH_DIR)
    if not root:
        return None, f"remote, not downloaded: {how}"
    base = Path(root).expanduser()
    if not base.is_dir():
        return None, f"{ENV_SDRBENCH_DIR}={base} is not a directory; {how}"
    names = _file_names(entry)
    found = None
    for fname in names:
        found = _walk_for(base, fname, REMOTE_SEARCH_DEPTH)
        if found is not None:
            break
    if found is None:
        return None, f"{' or '.join(names)} not found under {base}; {how}"
    problem = _size_problem(found, entry)
    return (None, problem) if problem else (found, f"found at {found}")


def list_datasets(registry: str | Path | None = None) -> list[DatasetInfo]:
    """Every registry entry with whether it can be loaded here, and why not."""
    reg = load_registry(registry)
    infos: list[DatasetInfo] = []
    for kind, locate in (("shared", _locate_shared), ("remote", _locate_remote)):
        for e in reg[kind]:
            path, reason = locate(e)
            infos.append(
                DatasetInfo(
                    name=e["name"],
                    kind=kind,  # type: ignore[arg-type]
                    shape=e["shape"],
                    dtype=e["dtype"],
                    nbytes=_expected_nbytes(e),
                    available=path is not None,
                    reason=reason,
                    description=str(e.get("description", "")),
                    path=str(path) if path else "",
                    url=str(e.get("url", "")),
                )
            )
    for e in reg["synthetic"]:
        infos.append(
            DatasetInfo(
                name=e["name"],
                kind="synthetic",
                shape=e["shape"],
                dtype=e["dtype"],
                nbytes=_expected_nbytes(e),
                available=True,
                reason="generated on demand (any 1-3-D shape; deterministic by seed)",
                description=describe_kind(e["name"]),
            )
        )
    return infos


def dataset_names(registry: str | Path | None = None) -> list[str]:
    reg = load_registry(registry)
    return [e["name"] for kind in ("shared", "remote", "synthetic") for e in reg[kind]]


def get_dataset(
    name: str,
    *,
    shape: str | Iterable[int] | None = None,
    dtype: Any = None,
    seed: int = 0,
    path: str | Path | None = None,
    allow_nonfinite: bool = False,
    registry: str | Path | None = None,
) -> Field:
    """Load a registry dataset by name, or build a synthetic one.

    ``name`` is a registry name ("vorticity.512_512", "nyx-temperature", "grf") or a
    synthetic spec ("grf:64,64:f64"). For synthetic kinds, ``shape``/``dtype``/``seed``
    override the registry's defaults. ``path`` points a shared/remote entry at a file
    directly (its shape and dtype still come from the registry).
    """
    reg = load_registry(registry)
    by_name = {e["name"]: (kind, e) for kind in ("shared", "remote", "synthetic") for e in reg[kind]}
    if name not in by_name:
        if ":" in name:
            return parse_synthetic(name)
        raise InputError(
            f"unknown dataset {name!r}; known: {', '.join(by_name)} "
            "(or a synthetic spec KIND:SHAPE[:DTYPE], e.g. grf:64,64,64)"
        )
    kind, e = by_name[name]
    if kind == "synthetic":
        return synthetic(name, shape if shape is not None else e["shape"], dtype or e["dtype"], seed)
    if path is not None:
        located: Path | None = Path(path)
    else:
        located, reason = (_locate_shared if kind == "shared" else _locate_remote)(e)
        if located is None:
            raise InputError(f"dataset {name!r} is not available: {reason}")
    field = load_raw(
        located,
        e["shape"],
        e["dtype"],
        e.get("endian", "<"),
        allow_nonfinite=allow_nonfinite,
        name=name,
        description=str(e.get("description", "")),
    )
    field.meta.update({"kind": kind, "url": str(e.get("url", ""))})
    if "value_range" in e:
        field.meta["expected_value_range"] = [float(v) for v in e["value_range"]]
    return field


__all__ = [
    "DatasetInfo",
    "ENV_SDRBENCH_DIR",
    "ENV_SHARED_DATA",
    "REGISTRY_PATH",
    "dataset_names",
    "get_dataset",
    "list_datasets",
    "load_registry",
    "shared_data_candidates",
    "shared_data_dir",
]
