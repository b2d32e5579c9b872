"""The bound contract's verdict and the non-finite pass-through, below every codec user.

One module that every path that decides whether a bound held calls: ``evaluate`` (through
:mod:`perfscout.tools.bounds`, which re-exports it and adds the fused metric pass), the
numcodecs/Zarr adapters (:mod:`perfscout.codecs.numcodecs`) and the GPU path
(:mod:`perfscout.tools.gpu_eval`). It sits in ``codecs/`` so that an adapter needs nothing
above it, and so cannot carry a copy of its own that drifts.

**Exact verdicts.** An element is beyond the bound when ``|x - y| > abs_bound`` (or
``> pw_rel_bound * |x|``) holds for the real numbers the floats stand for, never for a
rounded float64 difference: ``x - y`` rounds (float64 data, or float32 values of far-apart
magnitudes), and a difference that rounds onto the bound itself would hide an error up to
half an ulp beyond it. Rounding is monotonic, so the rounded comparison is right except
where the rounded error *equals* the rounded allowance; only those ties are decided
exactly, from the error-free transformations ``x - y = s + r`` (TwoSum) and ``bound * |x|
= p + q`` (Dekker's TwoProduct), in rationals where the product's low part would
underflow or its split overflow (:func:`exact_excess`, :func:`excess_over_bound`).

Rounding slack, statuses and the chunked scan: see :mod:`perfscout.tools.bounds`.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from perfscout.errors import CodecError, InputError

NONFINITE_POLICIES = ("refuse", "passthrough")

class NonfiniteInputError(InputError):
    """The input holds NaN/Inf and the policy is ``refuse`` (status ``nonfinite_input``)."""

    def __init__(self, message: str, count: int, first_index: tuple[int, ...]) -> None:
        super().__init__(message)
        self.count = count
        self.first_index = first_index

    def __reduce__(self) -> tuple[type, tuple[str, int, tuple[int, ...]]]:
        # Picklable with its extra fields: it crosses from the codec's child process.
        return (type(self), (str(self), self.count, self.first_index))


# -- verification ------------------------------------------------------------------------
@dataclass
class BoundCheck:
    """Verdict of the element-wise check."""

    status: str  # "ok" | "bound_overshoot" | "bound_violated" | "error" (no bound, non-finite error)
    bound_ok: bool | None
    max_abs_err: float
    max_abs_err_index: tuple[int, ...]
    n_beyond: int = 0  # elements beyond the bound (overshoot or violation)
    n_violations: int = 0  # elements beyond the bound by more than rounding slack
    worst_excess: float = 0.0  # largest (error - allowed) over all elements, when > 0
    worst_index: tuple[int, ...] = ()
    message: str = ""


def rounding_slack(
    original: np.ndarray, reconstructed: np.ndarray, bound: float | np.ndarray
) -> np.ndarray:
    """Per-element float-rounding allowance in the data type (see module docstring)."""
    dtype = np.dtype(original.dtype) if np.issubdtype(original.dtype, np.floating) else np.dtype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        magnitude = np.maximum(np.abs(original), np.abs(reconstructed)).astype(dtype)
        ulp = np.spacing(magnitude).astype(np.float64)
    ulp = np.where(np.isfinite(ulp), ulp, 0.0)  # no slack for a NaN/Inf reconstruction
    return 2.0 * ulp + 4.0 * float(np.finfo(dtype).eps) * bound


def check_verify_inputs(original: np.ndarray, reconstructed: np.ndarray, abs_bound: float | None,
                  pw_rel_bound: float | None) -> str:
    """The refusals of :func:`verify_bound` (InputError), and what the bound is called."""
    if original.shape != reconstructed.shape:
        raise InputError(f"reconstruction has shape {reconstructed.shape}, original {original.shape}")
    for name, value in (("abs_bound", abs_bound), ("pw_rel_bound", pw_rel_bound)):
        # An infinite (or NaN) bound would pass every error, inf included: never "ok".
        if value is not None and not (math.isfinite(float(value)) and float(value) >= 0):
            raise InputError(f"cannot verify against {name} = {value!r}: a bound must be finite and >= 0")
    if original.size == 0:
        raise InputError("cannot verify an empty array: there is no element to check")
    if abs_bound is None and pw_rel_bound is None:
        return ""
    if pw_rel_bound is not None:
        # Each element's own bound: the field's largest one would excuse a 100% error on
        # a small element as "rounding" (float32: 4 eps of 10 is ~5e-6).
        return f"point-wise relative bound {pw_rel_bound:g}"
    return f"abs bound {abs_bound:.6g}"


def verify_bound(
    original: np.ndarray,
    reconstructed: np.ndarray,
    *,
    abs_bound: float | None = None,
    pw_rel_bound: float | None = None,
) -> BoundCheck:
    """Check every element against ``abs_bound`` or ``bound * |x|`` (``pw_rel_bound``).

    With neither bound (fixed_rate) only the error is measured and ``bound_ok`` is None;
    a non-finite error there (inf/NaN out of finite input) is status ``error``, never ``ok``.
    """
    what = check_verify_inputs(original, reconstructed, abs_bound, pw_rel_bound)
    return verdict(original, reconstructed, what, scan_bound(original, reconstructed, abs_bound, pw_rel_bound))


def verdict(original: np.ndarray, reconstructed: np.ndarray, what: str, scan: BoundScan) -> BoundCheck:
    index = tuple(int(i) for i in np.unravel_index(scan.max_flat, original.shape))
    if not what:
        if not math.isfinite(scan.max_err):  # no bound to hold, but inf/NaN out of finite input is broken
            return BoundCheck("error", None, scan.max_err, index, message=(
                f"error: the reconstruction is not finite at index {index} (value "
                f"{float(original.flat[scan.max_flat]):.6g} came back as {float(reconstructed.flat[scan.max_flat])!r})"))
        return BoundCheck("ok", None, scan.max_err, index)
    if scan.n_beyond == 0:
        return BoundCheck("ok", True, scan.max_err, index)
    worst_index = tuple(int(i) for i in np.unravel_index(scan.worst_flat, original.shape))
    n_viol, n_beyond, worst = scan.n_violations, scan.n_beyond, scan.worst_excess
    status = "bound_violated" if n_viol else "bound_overshoot"
    detail = (
        f"{n_viol} of them beyond float rounding" if n_viol
        else f"all within float rounding of {np.dtype(original.dtype).name}"
    )
    message = (
        f"{status}: {n_beyond} element(s) exceed the {what}, {detail}; worst excess "
        f"{worst:.3g} at index {worst_index} (error {scan.worst_err:.6g}, value "
        f"{scan.worst_value:.6g}); max error {scan.max_err:.6g} at {index}"
    )
    return BoundCheck(status, False, scan.max_err, index, n_beyond, n_viol, worst, worst_index, message)


#: The check reads both arrays in flat chunks of this many elements: float64
#: temporaries of a few MiB instead of several copies of the whole field.
BOUND_CHECK_CHUNK = 1 << 18


@dataclass
class BoundScan:
    max_err: float = -1.0
    max_flat: int = 0
    n_beyond: int = 0
    n_violations: int = 0
    worst_excess: float = -math.inf
    worst_flat: int = 0
    worst_err: float = 0.0
    worst_value: float = 0.0
    worst_is_nan: bool = False


def scan_bound(original: np.ndarray, reconstructed: np.ndarray, abs_bound: float | None,
                pw_rel_bound: float | None) -> BoundScan:
    """One pass in chunks: the largest error (first occurrence), and for the elements beyond
    the bound (only for them: the rounding slack costs several operations per element)
    their count, how many exceed it by more than the slack, and the worst excess (first
    NaN, else first largest, as numpy.argmax over the whole excess array would pick)."""
    xf = np.ascontiguousarray(original).reshape(-1)
    yf = np.ascontiguousarray(reconstructed).reshape(-1)
    out = BoundScan()
    for i0 in range(0, xf.size, BOUND_CHECK_CHUNK):
        xc, yc = xf[i0 : i0 + BOUND_CHECK_CHUNK], yf[i0 : i0 + BOUND_CHECK_CHUNK]
        x = xc.astype(np.float64, copy=False)
        with np.errstate(over="ignore", invalid="ignore"):
            err = np.abs(x - yc.astype(np.float64, copy=False))
        err[np.isnan(err)] = np.inf  # a NaN out of a codec is an unbounded error
        j = int(np.argmax(err))
        if float(err[j]) > out.max_err:
            out.max_err, out.max_flat = float(err[j]), i0 + j
        if abs_bound is None and pw_rel_bound is None:
            continue
        if pw_rel_bound is None and not may_exceed(float(err[j]), abs_bound):
            continue  # nothing in this chunk is beyond the bound
        beyond_in_chunk(out, i0, xc, yc, x, err, abs_bound, pw_rel_bound)
    return out


def beyond_in_chunk(out: BoundScan, i0: int, xc: np.ndarray, yc: np.ndarray, x: np.ndarray,
                     err: np.ndarray, abs_bound: float | None, pw_rel_bound: float | None) -> None:
    """The elements of one chunk beyond the bound (``x``: the chunk in float64, ``err``:
    its |error|, NaN already inf): their count, how many exceed it by more than their
    rounding slack (computed for them only), and the worst excess, into ``out``."""
    allowed, excess = excess_over_bound(x, yc, err, abs_bound, pw_rel_bound)
    w = int(np.argmax(excess))
    v = float(excess[w])
    if not out.worst_is_nan and (math.isnan(v) or v > out.worst_excess):
        out.worst_excess, out.worst_flat, out.worst_is_nan = v, i0 + w, math.isnan(v)
        out.worst_err, out.worst_value = float(err[w]), float(x[w])
    beyond = excess > 0
    nb = int(np.count_nonzero(beyond))
    if nb == 0:
        return
    out.n_beyond += nb
    cand = np.flatnonzero(beyond)
    # an allowance that overflowed to inf would make the slack inf (every excess "rounding")
    sub_allowed = np.minimum(allowed[cand], np.finfo(np.float64).max) if pw_rel_bound is not None else float(abs_bound)
    slack = rounding_slack(xc[cand], yc[cand], sub_allowed)
    out.n_violations += int(np.count_nonzero(excess[cand] > slack))


def merge_beyond(out: BoundScan, part: BoundScan) -> None:
    """Add a later chunk's :func:`beyond_in_chunk` to ``out``, as one scan over both
    would have (the worst: first NaN, else first largest)."""
    out.n_beyond += part.n_beyond
    out.n_violations += part.n_violations
    v = part.worst_excess
    if not out.worst_is_nan and (part.worst_is_nan or v > out.worst_excess):
        out.worst_excess, out.worst_flat, out.worst_is_nan = v, part.worst_flat, part.worst_is_nan
        out.worst_err, out.worst_value = part.worst_err, part.worst_value


# -- exact comparison ------------------------------------------------------------------------
#: Dekker's split constant (2^27 + 1) and the range where TwoProduct is error-free: no
#: overflow in the split, no underflow of the product's low part.
_SPLIT = 134217729.0
_SPLIT_MAX = 2.0 ** 995
_PRODUCT_MIN = 2.0 ** -968


def may_exceed(err: float, allowed: float) -> bool:
    """Whether a rounded error ``err`` can stand for an exact one beyond ``allowed`` (a
    float): rounding is monotonic, so only ``err >= allowed`` can, and never a zero error
    (a difference of floats that rounds to 0 is 0)."""
    return err >= allowed and err > 0


def _two_diff(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(s, r) with s = fl(x - y) and s + r = x - y exactly (Knuth's TwoSum; exact
    whenever s is finite)."""
    s = x - y
    bb = s - x
    r = (x - (s - bb)) + (-y - bb)
    return s, r


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def _two_product(a: float, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) with p = fl(a * b) and p + q = a * b exactly (Dekker), in the safe range."""
    p = a * b
    ah, al = _split(np.full_like(b, a))
    bh, bl = _split(b)
    q = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, q


def exact_excess(x: np.ndarray, y: np.ndarray, *, abs_bound: float | None = None,
                 pw_rel_bound: float | None = None) -> np.ndarray:
    """``|x - y| - allowed`` for float64 arrays (``allowed``: ``abs_bound``, or
    ``pw_rel_bound * |x|``), with its sign exact: > 0 exactly where the element is beyond
    the bound in real arithmetic (the magnitude is the rounded value of the exact
    difference, at least the smallest subnormal when beyond). Non-finite pairs or
    differences give ``inf``/``nan`` as the plain float64 arithmetic does."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        s, r = _two_diff(x, y)
        neg = s < 0
        s, r = np.where(neg, -s, s), np.where(neg, -r, r)  # |x - y| = s + r, s >= 0
        if pw_rel_bound is None:
            p, q = np.full_like(s, float(abs_bound)), np.zeros_like(s)
        else:
            ax = np.abs(x)
            p, q = _two_product(float(pw_rel_bound), ax)
        beyond = (s > p) | ((s == p) & (r > q))
        excess = (s - p) + (r - q)
    if pw_rel_bound is not None:
        unsafe = np.flatnonzero(np.isfinite(x) & np.isfinite(y) & (
            ~np.isfinite(s) | (np.abs(x) >= _SPLIT_MAX) | (abs(float(pw_rel_bound)) >= _SPLIT_MAX) | ((p < _PRODUCT_MIN) & (p != 0))))
        for i in unsafe.tolist():  # rare: magnitudes near float64's ends, decided in rationals
            d = abs(Fraction(float(x[i])) - Fraction(float(y[i]))) - Fraction(float(pw_rel_bound)) * abs(Fraction(float(x[i])))
            beyond[i], excess[i] = d > 0, float(d)
    out = np.where(beyond & ~(excess > 0), np.nextafter(0.0, 1.0), excess)
    return np.where(beyond, out, np.minimum(out, 0.0))


def excess_over_bound(x: np.ndarray, y: np.ndarray, err: np.ndarray, abs_bound: float | None,
                      pw_rel_bound: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(allowed, excess) of float64 ``x`` and ``y`` (its own dtype) with ``err = |x - y|``
    (NaN already inf): ``excess > 0`` exactly where an element is beyond the bound.

    The rounded ``err - allowed`` has the sign of ``fl|x - y| - fl(allowed)``, and rounding
    is monotonic: a positive one is beyond, a negative one is not, whatever the exact
    values. Only a tie (0, with a non-zero error) can hide either; ties are decided
    exactly (:func:`exact_excess`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        allowed = pw_rel_bound * np.abs(x) if pw_rel_bound is not None else np.float64(abs_bound)
        excess = err - allowed
        # Finite values whose error and allowance both overflowed (|x| near float64's
        # largest, pw_rel > 1): inf - inf is NaN, which would count as within the bound.
        overflowed = np.isnan(excess) & np.isfinite(x) & np.isfinite(y)
    ties = np.flatnonzero((excess == 0) | overflowed)
    if ties.size:
        ties = ties[err[ties] > 0]
        excess[ties] = exact_excess(x[ties], y[ties], abs_bound=abs_bound, pw_rel_bound=pw_rel_bound)
    return allowed, excess


def exceeds(original: np.ndarray, reconstructed: np.ndarray, *, abs_bound: float | None = None,
            pw_rel_bound: float | None = None) -> np.ndarray:
    """Element-wise (flat): whether the element is beyond the bound, decided exactly, as
    :func:`verify_bound` counts it (a NaN error is unbounded)."""
    x = np.asarray(original).astype(np.float64).reshape(-1)
    y = np.asarray(reconstructed).astype(np.float64).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):
        err = np.abs(x - y)
    err[np.isnan(err)] = np.inf
    return excess_over_bound(x, y, err, abs_bound, pw_rel_bound)[1] > 0


# -- non-finite pass-through ---------------------------------------------------------------
@dataclass
class NonfiniteSplit:
    """A finite stand-in for the codec plus what restores the non-finite values exactly."""

    filled: np.ndarray
    mask: np.ndarray  # bool, True where the original is NaN/Inf
    values: np.ndarray  # the original non-finite values, in order (raw bit patterns kept)
    fill_value: float

    @property
    def count(self) -> int:
        return int(self.values.size)

    def sections(self) -> dict[str, bytes]:
        """The side data as stored beside the codec stream (zlib-packed)."""
        return {
            "nonfinite_mask": zlib.compress(np.packbits(self.mask.reshape(-1)).tobytes(), 6),
            "nonfinite_values": zlib.compress(self.values.tobytes(), 6),
        }

    @property
    def side_nbytes(self) -> int:
        return sum(len(b) for b in self.sections().values()) if self.count else 0


def find_nonfinite(array: np.ndarray) -> tuple[int, tuple[int, ...]]:
    """(count, first index) of the non-finite elements."""
    a = np.asarray(array)
    if a.size == 0:
        return 0, ()
    if (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)) and math.isfinite(float(np.min(a))) and math.isfinite(float(np.max(a))):
        return 0, ()  # finite extremes: no NaN (it propagates) and no infinity (it would be one)
    bad = ~np.isfinite(array)
    count = int(np.count_nonzero(bad))
    if not count:
        return 0, ()
    first = int(np.argmax(bad.reshape(-1)))
    return count, tuple(int(i) for i in np.unravel_index(first, array.shape))


def refuse_nonfinite(array: np.ndarray) -> None:
    count, first = find_nonfinite(array)
    if count:
        raise NonfiniteInputError(
            f"input holds {count} non-finite value(s) (NaN/Inf), first at index {first}; "
            "clean the data or pass nonfinite='passthrough' (CLI: --nonfinite passthrough) "
            "to store them losslessly beside the codec stream",
            count, first,
        )


def split_nonfinite(array: np.ndarray) -> NonfiniteSplit:
    mask = ~np.isfinite(array)
    finite = array[~mask]
    fill = float(np.mean(finite, dtype=np.float64)) if finite.size else 0.0
    filled = array.copy()
    filled[mask] = fill
    return NonfiniteSplit(filled=filled, mask=mask, values=array[mask].copy(), fill_value=fill)


def restore_nonfinite(reconstructed: np.ndarray, split: NonfiniteSplit) -> np.ndarray:
    out = np.array(reconstructed, copy=True)
    out[split.mask] = split.values
    return out


def unpack_nonfinite(sections: dict[str, bytes], shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray] | None:
    """(mask, values) from stored sections, or None when there are none."""
    if "nonfinite_mask" not in sections:
        return None
    n = int(np.prod(shape))
    dtype = np.dtype(dtype)
    try:
        # Inflated to the size the shape allows and no further: a forged section of a few
        # bytes that inflates to gigabytes (a zlib bomb) is refused, not allocated.
        bits = np.frombuffer(inflate_exactly(sections["nonfinite_mask"], -(-n // 8), "mask"), dtype=np.uint8)
        mask = np.unpackbits(bits)[:n].astype(bool).reshape(shape)
        count = int(mask.sum())
        values = np.frombuffer(inflate_exactly(sections["nonfinite_values"], count * dtype.itemsize, "values"),
                               dtype=dtype)
    except (zlib.error, ValueError, KeyError) as exc:
        raise CodecError(f"non-finite side data is corrupt: {exc}") from exc
    if count != values.size:
        raise CodecError("non-finite side data is corrupt: mask and values disagree")
    return mask, values


def inflate_exactly(blob: bytes, size: int, what: str) -> bytes:
    """zlib ``blob`` inflated, which must be exactly ``size`` bytes (never more is inflated)."""
    inflater = zlib.decompressobj()
    out = inflater.decompress(blob, size + 1)
    if len(out) != size or not inflater.eof:
        raise ValueError(f"the {what} section inflates to {'more' if len(out) > size else len(out)} bytes, "
                         f"the shape needs {size}")
    return out


