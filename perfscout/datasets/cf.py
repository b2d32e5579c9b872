"""CF decoding of stored values: packing, fill values, valid ranges, and what to do with masks.

One implementation for every format (netCDF, HDF5, Zarr), applied to the values exactly as
stored, so the rules are visible and tested in one place:

- **Packing** (CF 8.1): ``unpacked = packed * scale_factor + add_offset``. The unpacked
  type is the attributes' type (float32 attributes give float32, float64 give float64;
  JSON numbers, as in Zarr attributes, count as float64). The arithmetic is done in
  float64 and rounded once to that type. ``_Unsigned = "true"`` (netCDF-3's unsigned
  convention) reads the signed integers as unsigned first.
- **Masks**, compared with the *stored* values: ``_FillValue``, every ``missing_value``
  and the format's implied fill (netCDF's default fill when ``_FillValue`` is absent);
  a fill value the stored type cannot hold (NaN or 1.5 on an int16 variable) can equal
  no element and is ignored with a note: it never matches valid zeros. ``valid_min``,
  ``valid_max``, ``valid_range`` mask what lies outside; they are in stored units unless
  the variable is packed and they have the unpacked (float) type, then they apply to the
  unpacked values (NUG / CF 8.1). NaN found in float data counts as masked too.
- **Masked points** cannot go to a compressor as they are. ``masked="refuse"`` (the
  default) raises :class:`MaskedValuesError`, which counts them by cause and names both
  ways out; ``masked="nan"`` makes them NaN, for an evaluation with
  ``nonfinite="passthrough"`` that compresses only the unmasked values (the mask is stored
  losslessly beside the stream); ``masked=<number>`` fills them with that value, and
  then they are compressed and checked like data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from perfscout.datasets.field import parse_dtype
from perfscout.errors import InputError

#: "refuse", "nan", or a number to fill masked points with.
MaskPolicy = Union[str, float]
MASK_POLICIES = ("refuse", "nan")
#: float32 holds every integer up to 2**24 exactly; float64 up to 2**53.
_EXACT_INT = {4: 2**24, 8: 2**53}


class MaskedValuesError(InputError):
    """The variable has masked (fill / missing / out-of-range) points and the policy is refuse."""

    def __init__(self, message: str, count: int, total: int, by_cause: dict[str, int]) -> None:
        super().__init__(message)
        self.count = count
        self.total = total
        self.by_cause = by_cause


@dataclass
class CFPlan:
    """What CF says about a variable, from its stored dtype and attributes (no data read)."""

    stored_dtype: np.dtype
    scale_factor: float | None = None
    add_offset: float | None = None
    unsigned: bool = False
    cf_dtype: np.dtype | None = None  # float32/float64 per CF; None: CF gives no float type
    cf_dtype_reason: str = ""
    fills: list[tuple[Any, str]] = field(default_factory=list)  # (value in the stored type, cause)
    valid_min: tuple[float, bool] | None = None  # (limit, in unpacked units?)
    valid_max: tuple[float, bool] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def packed(self) -> bool:
        return self.scale_factor is not None or self.add_offset is not None

    @property
    def mask_attrs(self) -> list[str]:
        """The causes of masking this variable declares (for listings)."""
        causes = [cause for _, cause in self.fills]
        if self.valid_min is not None or self.valid_max is not None:
            causes.append("valid range")
        return causes


# -- attribute parsing ------------------------------------------------------------------------
def _attr_values(attrs: dict[str, Any], key: str, what: str) -> tuple[list[Any], np.dtype] | None:
    """The attribute's numbers and their dtype, or None when absent; strings are refused."""
    if key not in attrs:
        return None
    raw = attrs[key]
    arr = np.asarray(raw)
    if arr.dtype.kind not in "iufb":
        raise InputError(f"{what}: attribute {key}={raw!r} is not a number")
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    return [v for v in arr.reshape(-1).tolist()], arr.dtype


def _one_number(attrs: dict[str, Any], key: str, what: str) -> tuple[float, np.dtype] | None:
    got = _attr_values(attrs, key, what)
    if got is None:
        return None
    values, dtype = got
    if len(values) != 1:
        raise InputError(f"{what}: attribute {key} must be one number, got {len(values)}: {values}")
    if not np.isfinite(values[0]):
        raise InputError(f"{what}: attribute {key}={values[0]} is not a finite number")
    return float(values[0]), dtype


def _in_stored_type(value: Any, stored: np.dtype) -> Any | None:
    """``value`` as a scalar of the stored type, or None when that type cannot hold it."""
    v = float(value) if not isinstance(value, (int, np.integer)) else int(value)
    if stored.kind in "iu":
        if isinstance(v, float) and (not np.isfinite(v) or v != int(v)):
            return None
        info = np.iinfo(stored)
        if not info.min <= int(v) <= info.max:
            return None
        return stored.type(int(v))
    if stored.kind == "f":
        if np.isnan(v):
            return stored.type(np.nan)
        with np.errstate(over="ignore"):
            cast = stored.type(v)
        if np.isinf(cast) and np.isfinite(v):
            return None
        return cast
    return None


def _unsigned_of(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"{dtype.byteorder if dtype.byteorder in '<>' else '='}u{dtype.itemsize}")


def plan_cf(stored: np.dtype, attrs: dict[str, Any], *, implied_fill: tuple[Any, str] | None = None,
            what: str = "variable") -> CFPlan:
    """Read the CF attributes of a variable of stored type ``stored`` into a :class:`CFPlan`."""
    plan = CFPlan(stored_dtype=stored)
    unsigned_attr = _text(attrs.get("_Unsigned")).strip().lower()
    plan.unsigned = stored.kind == "i" and unsigned_attr == "true"
    # Compare fills in the type the values are read as: _Unsigned values are unsigned.
    stored_cmp = np.dtype(stored.newbyteorder("="))
    scale = _one_number(attrs, "scale_factor", what)
    offset = _one_number(attrs, "add_offset", what)
    plan.scale_factor = scale[0] if scale else None
    plan.add_offset = offset[0] if offset else None

    attr_types = [t for t in (scale[1] if scale else None, offset[1] if offset else None) if t is not None]
    float_types = [t for t in attr_types if t.kind == "f"]
    if float_types:  # (one float and one integer attribute is not CF; the float one decides)
        widest = max(float_types, key=lambda t: t.itemsize)
        plan.cf_dtype = np.dtype(np.float64) if widest.itemsize >= 8 else np.dtype(np.float32)
        names = " and ".join(k for k, v in (("scale_factor", scale), ("add_offset", offset)) if v)
        plan.cf_dtype_reason = f"the type of {names}"
        if len({(t.kind, t.itemsize) for t in attr_types}) > 1:
            plan.notes.append(f"scale_factor and add_offset have different types ({attr_types[0]}, "
                              f"{attr_types[1]}); CF wants one: the wider, {plan.cf_dtype}, is used")
    elif attr_types:  # integer attributes: CF unpacks to the stored (integer) type
        plan.cf_dtype_reason = f"integer scale_factor/add_offset: CF unpacks to {stored}"
    elif stored.kind == "f":
        plan.cf_dtype = np.dtype(np.float32) if stored.itemsize <= 4 else np.dtype(np.float64)
        plan.cf_dtype_reason = "the stored type" if stored.itemsize in (4, 8) else f"{stored} widened to float32"
    else:
        plan.cf_dtype_reason = f"{stored} values with no scale_factor/add_offset"

    for key in ("_FillValue", "missing_value"):
        try:
            got = _attr_values(attrs, key, what)
        except InputError:  # a string such as "N/A": no number equals it, so it masks nothing
            plan.notes.append(f"{key}={attrs[key]!r} ignored: it is not a number, so no element can equal it")
            continue
        if got is None:
            continue
        for value in got[0]:
            typed = _typed_fill(value, stored_cmp, plan.unsigned)
            if typed is None:
                plan.notes.append(f"{key}={value!r} ignored: a variable of type {stored.newbyteorder('=')} cannot "
                                  "hold that value, so no element can equal it")
            else:
                plan.fills.append((typed, f"{key}={_show(value)}"))
    if implied_fill is not None and "_FillValue" not in attrs:
        typed = _typed_fill(implied_fill[0], stored_cmp, plan.unsigned)
        if typed is not None:
            plan.fills.append((typed, f"{implied_fill[1]} {_show(implied_fill[0])}"))

    _plan_valid_range(plan, attrs, what)
    return plan


def _text(value: Any) -> str:
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _typed_fill(value: Any, stored: np.dtype, unsigned: bool) -> Any | None:
    """The fill as compared with the values: for _Unsigned data, the unsigned number
    (written either as the signed bit pattern, -1, or as the unsigned value, 255)."""
    typed = _in_stored_type(value, stored)
    if not unsigned:
        return typed
    if typed is not None:
        return np.asarray(typed).view(_unsigned_of(stored).newbyteorder("=")).item()
    return _in_stored_type(value, _unsigned_of(stored).newbyteorder("="))


def _plan_valid_range(plan: CFPlan, attrs: dict[str, Any], what: str) -> None:
    def units_of(dtype: np.dtype) -> bool:
        # NUG / CF 8.1: on a packed integer variable, limits of the unpacked (float) type
        # are in unpacked units; otherwise they are in the stored units.
        return plan.packed and plan.stored_dtype.kind in "iu" and dtype.kind == "f"

    rng = _attr_values(attrs, "valid_range", what)
    if rng is not None:
        values, dtype = rng
        if len(values) != 2 or not all(np.isfinite(values)):
            raise InputError(f"{what}: valid_range must be two finite numbers, got {values}")
        if values[0] > values[1]:
            raise InputError(f"{what}: valid_range {values} has its minimum above its maximum")
        plan.valid_min = (float(values[0]), units_of(dtype))
        plan.valid_max = (float(values[1]), units_of(dtype))
        if "valid_min" in attrs or "valid_max" in attrs:
            plan.notes.append("valid_range is given, so valid_min/valid_max are ignored (NUG)")
        return
    for key in ("valid_min", "valid_max"):
        got = _one_number(attrs, key, what)
        if got is not None:
            setattr(plan, key, (got[0], units_of(got[1])))
    if plan.valid_min and plan.valid_max and plan.valid_min[1] == plan.valid_max[1] and plan.valid_min[0] > plan.valid_max[0]:
        raise InputError(f"{what}: valid_min {plan.valid_min[0]} is above valid_max {plan.valid_max[0]}")


# -- decoding -----------------------------------------------------------------------------------
def check_mask_policy(masked: Any) -> MaskPolicy:
    if isinstance(masked, bool):
        raise InputError(f"masked must be 'refuse', 'nan' or a number, got {masked!r}")
    if isinstance(masked, str):
        key = masked.strip().lower()
        if key in MASK_POLICIES:
            return key
        try:
            masked = float(key)
        except ValueError:
            raise InputError(f"masked must be 'refuse', 'nan' or a number to fill with, got {masked!r}") from None
    try:
        value = float(masked)
    except (TypeError, ValueError):
        raise InputError(f"masked must be 'refuse', 'nan' or a number to fill with, got {masked!r}") from None
    if not np.isfinite(value):
        raise InputError(f"a fill value for masked points must be finite, got {masked!r}")
    return value


def output_dtype(plan: CFPlan, requested: Any, what: str) -> tuple[np.dtype, str]:
    """(the field's dtype, a note when it differs from CF's unpacked type or none exists)."""
    want = parse_dtype(requested) if requested is not None else None
    cf = plan.cf_dtype
    if cf is None and want is None:
        if plan.stored_dtype.kind == "b":
            raise InputError(f"{what} holds booleans; perfscout compresses float32 or float64 fields")
        raise InputError(
            f"{what} holds {plan.stored_dtype.newbyteorder('=')} values and CF gives no float type "
            f"({plan.cf_dtype_reason}); ask for dtype f32 or f64 (CLI: --dtype) to evaluate them as floats"
        )
    stored = plan.stored_dtype.newbyteorder("=")
    if cf is None:  # (checked first: numpy reads ``dtype == None`` as a comparison with float64)
        assert want is not None
        return want, f"{stored} values evaluated as {want} as asked ({plan.cf_dtype_reason})"
    if want is None or want == cf:
        if plan.packed:
            return cf, f"unpacked {stored} to {cf} ({plan.cf_dtype_reason}, CF 8.1)"
        return cf, ("" if stored == cf else f"stored {stored} read as {cf}")
    return want, f"CF unpacks to {cf} ({plan.cf_dtype_reason}); converted to {want} as asked"


@dataclass
class Decoded:
    """The decoded field and an account of what decoding did."""

    values: np.ndarray
    notes: list[str]
    masked_points: int
    masked_by: dict[str, int]


def _mask(stored: np.ndarray, unpacked: np.ndarray, plan: CFPlan) -> tuple[np.ndarray, dict[str, int]]:
    mask = np.zeros(stored.shape, dtype=bool)
    by_cause: dict[str, int] = {}

    def add(cause: str, hit: np.ndarray) -> None:
        n = int(np.count_nonzero(hit & ~mask))
        if n:
            by_cause[cause] = by_cause.get(cause, 0) + n
        mask[...] |= hit

    for value, cause in plan.fills:
        hit = np.isnan(stored) if stored.dtype.kind == "f" and np.isnan(value) else stored == value
        add(cause, hit)
    for limit, side in ((plan.valid_min, "below valid_min"), (plan.valid_max, "above valid_max")):
        if limit is None:
            continue
        bound, unpacked_units = limit
        # Unpacked limits are compared with the values in the CF type, as a reader sees them.
        ref = unpacked.astype(plan.cf_dtype or np.float64) if unpacked_units else stored
        with np.errstate(invalid="ignore"):
            hit = ref < bound if side.startswith("below") else ref > bound
        add(f"{side} {_show(bound)}", hit)
    if unpacked.dtype.kind == "f":
        add("NaN in the stored values", np.isnan(unpacked))
    return mask, by_cause


def _convert(values64: np.ndarray, target: np.dtype, what: str, from_int: bool) -> tuple[np.ndarray, str]:
    """float64 (or wider-exact) values to ``target``, refusing overflow, noting rounding."""
    note = ""
    if values64.dtype == target:
        return values64, note
    if target.itemsize == 4:
        finite = np.isfinite(values64)
        big = np.abs(values64, where=finite, out=np.zeros_like(values64)) > np.finfo(np.float32).max
        if big.any():
            raise InputError(f"{what}: {int(big.sum())} value(s) exceed float32's range "
                             f"(largest {float(np.max(np.abs(values64[finite]))):.6g}); use dtype f64")
    out = values64.astype(target, copy=False)
    if from_int:
        limit = _EXACT_INT[target.itemsize]
        inexact = int(np.count_nonzero(np.abs(values64) > limit))
        if inexact:
            note = f"{inexact} integer value(s) beyond 2^{int(np.log2(limit))} are rounded in {target}"
    return out, note


def decode(stored: np.ndarray, plan: CFPlan, *, dtype: Any = None, masked: Any = "refuse",
           what: str = "variable") -> Decoded:
    """Apply ``plan`` to the stored values: unpack, mask, pick the dtype, apply the policy."""
    policy = check_mask_policy(masked)
    target, dtype_note = output_dtype(plan, dtype, what)
    notes = list(plan.notes)
    if dtype_note:
        notes.append(dtype_note)
    raw = np.asarray(stored)
    if raw.dtype.kind != plan.stored_dtype.kind or raw.dtype.itemsize != plan.stored_dtype.itemsize:
        raise InputError(f"{what}: read {raw.dtype} values where the file declares {plan.stored_dtype}")
    raw = raw.astype(raw.dtype.newbyteorder("="), copy=False)  # big-endian -> native, values kept
    if plan.unsigned:
        raw = raw.view(_unsigned_of(raw.dtype).newbyteorder("="))
        notes.append(f"_Unsigned=true: {plan.stored_dtype.newbyteorder('=')} read as {raw.dtype}")
    # Unpacking and integers go through float64 (exact for every stored type up to 32-bit
    # ints); stored floats read as the same or a wider float need no float64 copy of a
    # possibly large field.
    via_float64 = plan.packed or raw.dtype.kind in "iub" or raw.dtype.itemsize > target.itemsize
    wide = raw.astype(np.float64, copy=True) if via_float64 else raw.astype(target, copy=True)
    if raw.dtype.kind in "iu" and raw.dtype.itemsize == 8 and np.abs(wide).max(initial=0) > 2**53:
        notes.append("64-bit integers beyond 2^53 are rounded when unpacked in float64")
    if plan.scale_factor is not None:
        wide = wide * plan.scale_factor
    if plan.add_offset is not None:
        wide = wide + plan.add_offset
    mask, by_cause = _mask(raw, wide, plan)
    n_masked = int(mask.sum())
    if n_masked == mask.size:
        raise MaskedValuesError(
            f"{what}: every one of its {mask.size} points is masked ({_causes(by_cause)}); there is no data",
            n_masked, int(mask.size), by_cause)
    if n_masked and policy == "refuse":
        raise MaskedValuesError(
            f"{what} has {n_masked} masked point(s) of {mask.size} ({_causes(by_cause)}); compressors take no "
            "missing values. Evaluate only the unmasked values with masked='nan' and nonfinite='passthrough' "
            "(CLI: --nonfinite passthrough; the mask is kept losslessly beside the stream), or fill them with a "
            "value you state, masked=VALUE (CLI: --fill-masked VALUE)",
            n_masked, int(mask.size), by_cause)
    if n_masked:
        if policy == "nan":
            wide[mask] = np.nan
            notes.append(f"{n_masked} of {mask.size} points are masked ({_causes(by_cause)}) and set to NaN: "
                         "with nonfinite='passthrough' only the unmasked values are compressed and checked")
        else:
            wide[mask] = float(policy)
            notes.append(f"{n_masked} of {mask.size} masked points ({_causes(by_cause)}) filled with "
                         f"{_show(float(policy))} as asked: they are compressed and checked like data")
    with np.errstate(invalid="ignore"):
        values, round_note = _convert(wide, target, what, from_int=raw.dtype.kind in "iu" and not plan.packed)
    if round_note:
        notes.append(round_note)
    return Decoded(values=values, notes=notes, masked_points=n_masked, masked_by=by_cause)


def _causes(by_cause: dict[str, int]) -> str:
    return ", ".join(f"{cause}: {n}" for cause, n in by_cause.items())


__all__ = [
    "CFPlan",
    "Decoded",
    "MASK_POLICIES",
    "MaskPolicy",
    "MaskedValuesError",
    "check_mask_policy",
    "decode",
    "output_dtype",
    "plan_cf",
]
