"""The parser's vocabulary (``vocabulary.yaml``) as compiled phrase tables, and the codec and dataset
catalogues a parse reads once."""

from __future__ import annotations

import contextvars
import copy
import re
from functools import lru_cache
from typing import Any

from perfscout.io import load_package_yaml

# ---------------------------------------------------------------------------- vocabulary


@lru_cache(maxsize=1)
def vocabulary() -> dict[str, Any]:
    return load_package_yaml("perfscout.graph", "vocabulary.yaml")


CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def phrase_pattern(phrase: str) -> str:
    """A phrase as a regex: Latin words on word boundaries, Chinese as a substring."""
    parts = [re.escape(p) for p in phrase.lower().split()]
    body = r"\s*".join(parts) if CJK.search(phrase) else r"\s+".join(parts)
    if CJK.search(phrase[:1]) and CJK.search(phrase[-1:]):
        return body
    left = "" if CJK.search(phrase[:1]) else r"(?<![\w.-])"
    right = "" if CJK.search(phrase[-1:]) else r"(?![\w-])"
    return left + body + right


@lru_cache(maxsize=None)
def phrase_table(section: str) -> list[tuple[str, re.Pattern[str]]]:
    """(meaning, compiled phrase) for one vocabulary section, longest phrase first."""
    entries = vocabulary().get(section) or {}
    rows = [(str(meaning), str(p)) for meaning, phrases in entries.items() for p in phrases or []]
    rows.sort(key=lambda r: len(r[1]), reverse=True)
    return [(m, re.compile(phrase_pattern(p))) for m, p in rows]


@lru_cache(maxsize=1)
def question_patterns() -> list[tuple[str, re.Pattern[str]]]:
    """(question, compiled pattern) of the vocabulary's ``question_patterns``."""
    entries = vocabulary().get("question_patterns") or {}
    return [(str(q), re.compile(str(p))) for q, ps in entries.items() for p in ps or []]


@lru_cache(maxsize=1)
def filler() -> frozenset[str]:
    f = vocabulary()["filler"]
    return frozenset(str(w).lower() for w in f["en"]) | frozenset(str(w) for w in f["zh"])


#: the catalogues, asked once per parse (probing the codecs runs the linker's search; the
#: dataset registry is a YAML file): one request sees one state of the installation
CATALOGUES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("perfscout_catalogues", default=None)


def _memo(key: str, make: Any) -> Any:
    memo = CATALOGUES.get()
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return copy.deepcopy(memo[key])


def codec_catalogue() -> dict[str, dict[str, Any]]:
    """Every registered codec by id: device, modes, whether usable here and why not."""
    def make() -> dict[str, dict[str, Any]]:
        try:
            from perfscout.codecs.registry import list_codecs

            return {i.id: i.model_dump() for i in list_codecs()}
        except Exception:  # a broken optional backend must not take the planner down
            return {}

    return _memo("codecs", make)


def dataset_catalogue() -> list[dict[str, Any]]:
    """Registry datasets (name, kind, shape, description); empty if the registry fails."""
    def make() -> list[dict[str, Any]]:
        try:
            from perfscout.datasets import list_datasets

            return [{"name": d.name, "kind": d.kind, "shape": list(d.shape), "description": d.description,
                     "available": d.available, "reason": getattr(d, "reason", "") or ""} for d in list_datasets()]
        except Exception:
            return []

    return _memo("datasets", make)


