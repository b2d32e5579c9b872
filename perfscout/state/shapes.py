"""Array shapes: the one parser of a shape written as text, and its record spelling.

Every place that reads a shape from a person, a spec, an answer or a tool argument
("41,128,128", "512x512", "64 × 64", [8, 8]) uses :func:`parse_shape`, so each accepts
the same spellings and refuses the same mistakes (a zero axis, a fifth axis, "12.5")
with the same message. Finding shapes inside prose ("a 512^2 field", "128 by 128") is
the request parser's grammar (:mod:`perfscout.graph.understand`), which hands what it
found to the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from perfscout.errors import InputError

#: Most axes a field may have (the codecs and the raw-file reader support 1 to 4).
MAX_DIMS = 4

#: What may separate two axes: a comma, "x" or "×" or "*" (as in 512x512), or spaces.
_SEPARATOR = re.compile(r"\s*[,x×*]\s*|\s+")


def parse_shape(shape: str | Iterable[int]) -> tuple[int, ...]:
    """A shape tuple from "Z,Y,X", "64x64", "64 × 64" or a sequence of positive ints
    (1 to :data:`MAX_DIMS` axes); :class:`InputError` saying what is wrong otherwise."""
    if isinstance(shape, str):
        text = shape.strip().lower().strip("()[]").strip()
        parts = _SEPARATOR.split(text) if text else []
        try:
            dims = tuple(int(p) for p in parts)
        except ValueError as exc:
            raise InputError(
                f"bad shape {shape!r}: expected integers separated by commas, e.g. 41,128,128"
            ) from exc
    else:
        try:
            given = list(shape)  # once: a generator would be empty on a second pass
            dims = tuple(int(d) for d in given)
        except (TypeError, ValueError) as exc:
            raise InputError(f"bad shape {shape!r}: expected a sequence of integers") from exc
        if any(isinstance(d, bool) or int(d) != d for d in given):
            raise InputError(f"bad shape {shape!r}: dimensions must be integers")
    if not dims:
        raise InputError("empty shape: give at least one dimension, e.g. 512,512")
    if len(dims) > MAX_DIMS:
        raise InputError(f"shape {dims} has {len(dims)} axes; at most {MAX_DIMS} are supported")
    if any(d < 1 for d in dims):
        raise InputError(f"shape {dims}: every dimension must be >= 1")
    return dims


def is_shape(shape: object) -> bool:
    """Whether :func:`parse_shape` accepts ``shape`` (for a yes/no question, not an error)."""
    try:
        parse_shape(shape)  # type: ignore[arg-type]
    except InputError:
        return False
    return True


def shape_str(shape: Iterable[int]) -> str:
    """"Z,Y,X" (C order, slowest first), the record's spelling of a shape."""
    return ",".join(str(int(d)) for d in shape)
