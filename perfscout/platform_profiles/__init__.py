"""Known hardware specs and saved platform snapshots (YAML files in this folder).

- ``specs.yaml``: hand-checked peak figures of known GPUs and CPUs, each with its source.
- ``<name>.yaml``: snapshots saved with ``perfscout snapshot --save NAME``.

Where ``--save`` writes: ``<home>/platform_profiles/`` (:func:`perfscout.home.perfscout_home`:
``$PERFSCOUT_HOME``, else the per-user data directory), never into the installed package.
Loading looks in that folder first, then here (snapshots shipped with perfscout, such as
the H200 the project measured on).
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field, ValidationError

from perfscout.errors import InputError
from perfscout.home import perfscout_home
from perfscout.io import YAMLLimitError, load_package_yaml, load_yaml_file, write_atomic
from perfscout.state.platform import PlatformProfile

PACKAGE_DIR = Path(__file__).resolve().parent
SPECS_FILE = PACKAGE_DIR / "specs.yaml"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class SpecFigure(BaseModel):
    value: Any
    source: str


class DeviceSpec(BaseModel):
    key: str
    name: str
    kind: str  # "gpu" | "cpu"
    vendor: str
    arch: str = ""
    match: list[str] = Field(default_factory=list)
    figures: dict[str, SpecFigure] = Field(default_factory=dict)

    def get(self, figure: str) -> Any:
        """The figure's value, or None when the table does not have it (never guessed)."""
        f = self.figures.get(figure)
        return f.value if f is not None else None


@lru_cache(maxsize=1)
def load_specs() -> dict[str, DeviceSpec]:
    """The spec table, keyed by entry name. Raises InputError on a malformed table."""
    try:
        # a file of the package: libyaml's safe loader, ~3 ms instead of ~40 ms, paid by every
        # `perfscout diagnose` (the table is read once per process, then cached).
        doc = load_package_yaml(__name__, SPECS_FILE.name)
        return {k: DeviceSpec(key=k, **v) for k, v in doc["devices"].items()}
    except (InputError, KeyError, TypeError, ValidationError) as exc:
        raise InputError(f"spec table {SPECS_FILE} is unreadable: {exc}") from exc


def find_spec(device_name: str) -> DeviceSpec | None:
    """The spec entry whose ``match`` substrings occur in ``device_name`` (longest match wins)."""
    name = device_name.lower()
    best: tuple[int, DeviceSpec] | None = None
    for spec in load_specs().values():
        for m in spec.match:
            if m.lower() in name and (best is None or len(m) > best[0]):
                best = (len(m), spec)
    return best[1] if best else None


def snapshot_dir() -> Path:
    """Where ``--save`` writes: ``<home>/platform_profiles`` (see the module docstring)."""
    return perfscout_home() / "platform_profiles"


def _check_name(name: str) -> str:
    if not _NAME.match(name) or name == "specs":
        raise InputError(f"snapshot name {name!r} must be 1-64 letters, digits, '.', '_' or '-' "
                         "(and not 'specs')")
    return name


def save_snapshot(profile: PlatformProfile, name: str, directory: Path | None = None) -> Path:
    """Write ``profile`` as ``<name>.yaml``; returns the path."""
    target = (directory or snapshot_dir()) / f"{_check_name(name)}.yaml"
    # atomic: a crash never leaves half a snapshot
    write_atomic(target, yaml.safe_dump(profile.model_dump(mode="json"), sort_keys=False), mkdir=True)
    return target


def load_snapshot(name_or_path: str | Path) -> PlatformProfile:
    """Load a saved snapshot by name (searched as described above) or by path."""
    p = Path(name_or_path)
    if not p.suffix:
        dirs = [snapshot_dir(), PACKAGE_DIR]
        found = [d / f"{_check_name(str(name_or_path))}.yaml" for d in dirs]
        p = next((f for f in found if f.is_file()), found[0])
    if not p.exists():
        raise InputError(f"no saved snapshot at {p}: no such file")
    try:
        # a regular file of document size, YAML within limits: a snapshot may come from anyone
        data = load_yaml_file(p, "saved snapshot")
        return PlatformProfile.model_validate(data)
    except (YAMLLimitError, ValidationError) as exc:
        raise InputError(f"snapshot {p} is not a valid platform profile: {exc}") from exc


def list_snapshots() -> list[str]:
    names: set[str] = set()
    for d in (snapshot_dir(), PACKAGE_DIR):
        if d.is_dir():
            names.update(f.stem for f in d.glob("*.yaml") if f.stem != "specs")
    return sorted(names)
