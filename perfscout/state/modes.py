"""Error modes: the one list every layer checks a mode against.

``Mode`` is the vocabulary; the tuples below are views of it for the places that need
one (a codec's mode check, what a request may ask for, what the evaluation layer
derives from a native ``abs`` mode). ``RequestMode`` is the same list as a ``Literal``
for pydantic schemas (an LLM's structured reply, the ``Intent``), where a JSON schema
must list the strings themselves; the import-time check below keeps it equal to
``Mode``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args


class Mode(StrEnum):
    """An error mode. ``rel`` is value-range (R = max - min) relative, as in SZ and qcat;
    ``pw_rel`` point-wise relative; ``psnr`` a target PSNR in dB and ``ratio`` a target
    compression ratio (both searched over ``abs``); ``fixed_rate`` is ZFP's bits per value
    (not an error bound: results carry bound_ok=None); ``lossless`` a lossless codec's only
    mode (the bound is not used; the check is bit-for-bit equality)."""

    ABS = "abs"
    REL = "rel"
    PW_REL = "pw_rel"
    PSNR = "psnr"
    RATIO = "ratio"
    FIXED_RATE = "fixed_rate"
    LOSSLESS = "lossless"


#: Every mode perfscout understands, in listing order.
ALL_MODES: tuple[str, ...] = tuple(m.value for m in Mode)

#: Modes a request (words, a spec, an LLM reply) may ask for: ``lossless`` is what a
#: lossless codec does, not a bound anyone asks for.
REQUEST_MODES: tuple[str, ...] = tuple(m for m in ALL_MODES if m != Mode.LOSSLESS)

#: The modes a request may name, for pydantic schemas (kept equal to REQUEST_MODES).
RequestMode = Literal["abs", "rel", "pw_rel", "psnr", "ratio", "fixed_rate"]

#: Modes the evaluation layer derives from a codec's native ``abs`` (see tools/bounds.py).
DERIVED_FROM_ABS: tuple[str, ...] = (Mode.REL.value, Mode.PSNR.value, Mode.RATIO.value)

#: The modes that are error bounds on values (the others: targets, a rate, lossless).
POINTWISE_BOUND_MODES: tuple[str, ...] = (Mode.ABS.value, Mode.REL.value, Mode.PW_REL.value)

if get_args(RequestMode) != REQUEST_MODES:  # pragma: no cover - a guard against drift
    raise AssertionError(f"RequestMode {get_args(RequestMode)} differs from Mode {REQUEST_MODES}")
