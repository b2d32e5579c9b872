"""The szp stream format, version 4, and its NumPy reference encoder/decoder.

This module IS the specification (FORMAT.md describes it in prose): the CUDA kernels in
``gpu.py`` must produce byte-identical streams, and every stream either implementation
writes decodes with :func:`decode`. All work is vectorised: per-block work is done by
reshaping the array into blocks, never by per-element Python loops.

Layout (little-endian, every section starts on a 16-byte boundary, pads are zero)::

    header      144 bytes (HEADER_STRUCT + shape dims + corner_bytes + flags; 128 in v1/v2)
    widths      nblocks x u8: bit width w of each block's residual magnitudes (0..MAX_WIDTH,
                bits 0-4), a corner block's corner byte count - 1 (bits 5-6) and the
                corner flag (bit 7); version 4: bit 5 alone marks a chained block, whose
                first residual is predicted from the block before (FORMAT.md)
    payload     per block, in block order, 0 words if w == 0 else (1 + w) u32 words:
                the sign word, then bit planes 0 (LSB) .. w-1 of |residual|; a corner
                block's planes leave its corner (element 0) out
    corners     corner_bytes x u8: each corner block's corner, byte-packed (1..4 bytes) in
                block order: |d0| (its sign in the sign word), or |d0| << 1 | sign for a
                block without words (FORMAT.md, "Plain and corner blocks")
    out_index   n_outliers x u64: flat C-order indices, strictly increasing
    out_value   n_outliers x dtype: the exact input values (bit patterns kept: NaN/Inf too)
    crc32       u32, zlib.crc32 of every byte before it

Bit order inside a 32-bit word: element e of a block (its C-order index in the block
shape, 0..31) is bit ``8 * (e % 4) + e // 4``. When each of a block's 8 lanes holds 4
consecutive x-elements, that is the order one 8 x 8 bit transpose across the 8 lanes
produces (FORMAT.md, "Residuals and words"), so the GPU encoder needs no other shuffling.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from perfscout.errors import CodecError, InputError

MAGIC = b"SZPG"
#: Version 4 adds chained blocks (a block's corner predicted from the block before it);
#: version 3 stores a corner block's corner byte-packed in its own section; version 2 kept
#: it in a whole payload word, version 1 had no corner blocks. This reader decodes all four.
VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
#: Header length of version 3; versions 1 and 2 have the first HEADER_LEN_V2 bytes only.
HEADER_LEN = 144
HEADER_LEN_V2 = 128
#: Header flags (version 3). A reader rejects any other bit.
FLAG_AUTO_BLOCK = 1  # the block shape was chosen automatically (block_ndim="auto")
KNOWN_FLAGS = FLAG_AUTO_BLOCK
MAX_NDIM = 7
BLOCK_ELEMS = 32
#: |q| must stay below this for the integer path; larger values are outliers. With
#: 3-D Lorenzo a residual is at most 8 * (2**26 - 1) < 2**29, so widths are <= 29.
QLIMIT = 2**26
MAX_WIDTH = 29
#: A block's width byte: bits 0-4 the width w, bits 5-6 (version 3) the corner's byte
#: count - 1, bit 7 the corner flag. A corner block keeps its first residual's magnitude
#: (the block corner, which Lorenzo predicts from nothing) out of the bit planes: the
#: planes hold the other 31 residuals (width w) and the corner's sign, and the corner
#: takes 1-4 bytes of the corners section (with its sign when the block has no words). The encoder picks it when that takes fewer bytes (4 per word). In
#: version 2 the planes kept the corner's sign and one more payload word its magnitude.
WIDTH_BITS = 0x1F
NB_SHIFT = 5
NB_BITS = 0x60
CORNER_FLAG = 0x80
#: Version 4: bit 5 of a block that is not a corner block marks it chained: its first
#: residual is predicted from the quantised value of element CHAIN_SRC of the block before
#: it (the neighbour, along x, of the block's corner), so the block needs no corner of its
#: own. Chains restart at every CHAIN_SPAN-th block (a block b with b % CHAIN_SPAN == 0 is
#: never chained): a GPU warp codes CHAIN_SPAN consecutive blocks in one step.
CHAIN_FLAG = 0x20
CHAIN_SPAN = 4
CHAIN_SRC = {1: 31, 2: 7, 3: 3}
#: The check bound sits this many ulps below the enforced bound, so that an error which
#: rounds down to the check bound in the data's own arithmetic is still <= the bound.
CHECK_ULPS = 4
#: The step leaves this many eps * M (M: the largest finite magnitude) of the check bound
#: for the encoder's own rounding (see rounding_step). Three roundings (1/step, x * recip, q * step) can move a reconstruction
#: by up to 1.5 eps * M beyond the ideal step / 2, but rarely do: 0.5 covers nearly
#: every element, and the check still stores the rare one beyond as an outlier. Of
#: 0.5, 0.75, 1, 1.5 and 2, 0.5 left the fewest bytes over 24 field/bound pairs
#: (benchmarks/szp_rounding_step.py), also because a smaller allowance still fits under
#: half of check at tighter bounds.
ROUNDING_ALLOWANCE = 0.5
#: The first format whose writers take rounding_step (the decoder reads any normal step).
ROUNDING_STEP_VERSION = 4
#: Block shape (z, y, x) per block dimensionality; each holds 32 elements.
BLOCK_SHAPES: dict[int, tuple[int, int, int]] = {1: (1, 1, 32), 2: (1, 4, 8), 3: (2, 4, 4)}
DTYPE_CODES = {np.dtype("float32"): 1, np.dtype("float64"): 2}
MODE_CODES = {"abs": 1, "rel": 2}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}
CODE_MODES = {v: k for k, v in MODE_CODES.items()}

# magic, version, header_len, dtype, mode, ndim, block_ndim, bz, by, bx, pad,
# nelem, bound, abs_bound, step, nblocks, payload_words, n_outliers
HEADER_STRUCT = struct.Struct("<4sHHBBBBBBBBQdddQQQ")
assert HEADER_STRUCT.size + 8 * MAX_NDIM == HEADER_LEN_V2 == HEADER_LEN - 16


def pad16(n: int) -> int:
    return (n + 15) & ~15


@dataclass(frozen=True)
class Header:
    dtype: np.dtype
    shape: tuple[int, ...]
    mode: str
    bound: float  # what the user asked for, in ``mode``
    abs_bound: float  # the absolute bound it resolved to (every error is <= this)
    step: float  # quantisation step (exactly representable in ``dtype``)
    block_ndim: int
    nblocks: int
    payload_words: int
    n_outliers: int
    version: int = VERSION
    corner_bytes: int = 0  # version 3: length of the corners section
    flags: int = 0  # version 3: FLAG_* bits

    @property
    def nelem(self) -> int:
        return math.prod(self.shape)

    @property
    def header_len(self) -> int:
        return HEADER_LEN if self.version >= 3 else HEADER_LEN_V2

    @property
    def auto_block(self) -> bool:
        return bool(self.flags & FLAG_AUTO_BLOCK)

    @property
    def block_shape(self) -> tuple[int, int, int]:
        return BLOCK_SHAPES[self.block_ndim]

    def pack(self) -> bytes:
        bz, by, bx = self.block_shape
        if self.version not in READABLE_VERSIONS:
            raise InputError(f"szp writes format versions {READABLE_VERSIONS}, not {self.version}")
        if self.version < 3 and (self.corner_bytes or self.flags):
            raise InputError(f"a version {self.version} header has no corner bytes or flags")
        head = HEADER_STRUCT.pack(
            MAGIC, self.version, self.header_len, DTYPE_CODES[self.dtype], MODE_CODES[self.mode],
            len(self.shape), self.block_ndim, bz, by, bx, 0, self.nelem, self.bound,
            self.abs_bound, self.step, self.nblocks, self.payload_words, self.n_outliers,
        )
        dims = list(self.shape) + [0] * (MAX_NDIM - len(self.shape))
        head += struct.pack(f"<{MAX_NDIM}Q", *dims)
        if self.version >= 3:
            head += struct.pack("<QQ", self.corner_bytes, self.flags)
        return head


@dataclass(frozen=True)
class Layout:
    """Byte offsets of each section in a stream."""

    widths: int
    payload: int
    corners: int  # == out_index before version 3 (no corners section)
    out_index: int
    out_value: int
    crc: int

    @property
    def total(self) -> int:
        return self.crc + 4


def layout(h: Header) -> Layout:
    widths = h.header_len
    payload = widths + pad16(h.nblocks)
    corners = payload + pad16(4 * h.payload_words)
    out_index = corners + pad16(h.corner_bytes)
    out_value = out_index + pad16(8 * h.n_outliers)
    crc = out_value + pad16(h.dtype.itemsize * h.n_outliers)
    return Layout(widths, payload, corners, out_index, out_value, crc)


# -- geometry -------------------------------------------------------------------------


def default_block_ndim(ndim: int) -> int:
    return min(max(ndim, 1), 3)


def view_shape(shape: tuple[int, ...], block_ndim: int) -> tuple[int, int, int]:
    """The (Z, Y, X) view the blocks tile: 1-D blocks see the array flat; 2-D and 3-D
    blocks see the last two axes as (Y, X) and fold every leading axis into Z."""
    n = math.prod(shape)
    if block_ndim == 1:
        return (1, 1, n)
    if len(shape) < block_ndim:
        raise InputError(f"{block_ndim}-D blocks need an array of at least {block_ndim} dims")
    return (math.prod(shape[:-2]), shape[-2], shape[-1])


def block_grid(view: tuple[int, int, int], block_ndim: int) -> tuple[int, int, int]:
    bz, by, bx = BLOCK_SHAPES[block_ndim]
    Z, Y, X = view
    return (-(-Z // bz), -(-Y // by), -(-X // bx))


# -- the error bound ------------------------------------------------------------------


@dataclass(frozen=True)
class Quantizer:
    """What the encoder uses; only ``step`` travels in the stream for the decoder."""

    abs_bound: float  # resolved absolute bound (double)
    check: np.floating  # the bound each reconstruction is checked against, in dtype
    step: np.floating  # quantisation step in dtype (2 * check, or less: rounding_step)
    recip: np.floating  # dtype(1 / step), the multiplier the encoder quantises with


def finite_range(x: np.ndarray, chunk_elems: int | None = None) -> tuple[float, float] | None:
    """(min, max) over finite values, or None if there are none.

    ``chunk_elems``: read the flattened array that many elements at a time, so the mask and
    the finite copy stay bounded on a large field (the result is the same)."""
    if chunk_elems is not None:
        flat = x.reshape(-1)
        step = max(1, int(chunk_elems))
        lo, hi = math.inf, -math.inf
        for s in range(0, flat.size, step):
            r = finite_range(flat[s : s + step])
            if r:
                lo, hi = min(lo, r[0]), max(hi, r[1])
        return None if lo == math.inf else (lo, hi)
    finite = x[np.isfinite(x)]
    if finite.size == 0:
        return None
    return float(finite.min()), float(finite.max())


def rel_abs_bound(bound: float, frange: tuple[float, float] | None) -> float:
    """``bound * (max - min)`` without an infinite intermediate: max - min of float64 data
    can exceed float64 (values near +-1.8e308), the halves' difference cannot. (With an
    infinite R the old ``bound * R`` became inf, which the caller then capped at the
    dtype's largest value: a looser bound than asked.) A product beyond float64 itself
    comes back as inf, and the caller's cap then enforces a *tighter* bound, which is safe."""
    if not frange:
        return 0.0
    lo, hi = frange
    diff = hi - lo
    if math.isfinite(diff):
        return bound * diff
    return 2.0 * (bound * (hi * 0.5 - lo * 0.5))


def resolve_quantizer(
    dtype: np.dtype, mode: str, bound: float, frange: tuple[float, float] | None, *,
    version: int = VERSION,
) -> Quantizer:
    """Resolve the user bound to the quantiser. Both implementations call this on the
    host with the same (exact) finite min/max, so they agree to the bit.

    ``frange`` (finite min, max; None when unknown): the range a ``rel`` bound is taken
    over, and in either mode what :func:`rounding_step` reads. The encoders pass it in
    ``rel`` mode only (``abs`` mode has no range pass); the block-shape choice passes the
    stream's own, so its samples get the stream's step (rounding_step). ``version``: the format the
    stream is written in; writers of formats 2 and 3 keep ``step = 2 * check`` (their
    published streams stay reproducible byte for byte), format 4's take rounding_step."""
    if mode not in MODE_CODES:
        raise CodecError(f"szp supports modes abs and rel, not {mode!r}")
    if not (math.isfinite(bound) and bound > 0):
        raise InputError(f"the {mode} bound must be a positive finite number, got {bound!r}")
    T = dtype.type
    if mode == "abs":
        eb = float(bound)
    else:
        eb = rel_abs_bound(float(bound), frange)
    tmax = float(np.finfo(dtype).max)
    if not math.isfinite(eb) or eb > tmax:
        eb = tmax
    eb_t = T(eb)
    if float(eb_t) > eb:  # rounding to dtype must never loosen the bound
        eb_t = np.nextafter(eb_t, T(0))
    check = eb_t
    for _ in range(CHECK_ULPS):
        if check > 0:
            check = np.nextafter(check, T(0))
    # Keep every operand of the encoder's arithmetic a normal number, so that results
    # do not depend on whether a GPU build flushes subnormals to zero: a check bound
    # below the smallest normal becomes 0 (exact values only), and a huge one is capped
    # so that 1 / step stays normal (a tighter check bound is always safe).
    info = np.finfo(dtype)
    cap = T(2.0 ** (info.maxexp - 3))
    if check < info.smallest_normal:
        check = T(0)
    check = min(check, cap)
    if check > 0:
        step = (rounding_step(check, frange) if version >= ROUNDING_STEP_VERSION else None) or T(2.0 * float(check))
    else:
        # A zero bound (a constant field in rel mode, or a bound below the dtype's
        # smallest normal): only exact reconstructions pass the check. For a constant
        # field the value itself is the step, so everything still quantises exactly.
        c = max(abs(frange[0]), abs(frange[1])) if frange else 0.0
        step = T(c) if info.smallest_normal <= c <= float(cap) else T(1.0)
    with np.errstate(over="ignore"):  # a subnormal step has an infinite reciprocal
        recip = T(1.0 / float(step))
    return Quantizer(abs_bound=eb, check=check, step=step, recip=recip)


def rounding_step(check: np.floating, frange: tuple[float, float] | None) -> np.floating | None:
    """A step below ``2 * check`` that leaves room for the encoder's rounding, or None
    (the step stays 2 * check).

    With the step at 2 * check, an element whose quantisation error is within the
    encoder's rounding (up to about 1.5 eps * |x|) of check fails the check and is stored
    whole as an outlier (8 + itemsize bytes). On a field far from zero (a temperature in
    kelvin, a pressure, a density) that can be most elements once the bound nears
    eps * M, M the largest finite magnitude; near zero it is a few. Leaving
    m = ROUNDING_ALLOWANCE * eps * M of check to the rounding costs about 1.44 m / check
    bits per element instead, and (nearly) no element fails: where m is tiny beside check
    both the cost and the outliers are, and where it is not the outliers cost far more
    (benchmarks/szp_offset_step.py: never measurably worse, up to 2.3x smaller). It
    applies when the range is known and m is at most half of check (a smaller bound
    cannot be met on a step grid at that magnitude: the outliers stay, as before). Only
    ``step`` travels in the stream, and both encoders get it from here, so they still
    write the same bytes.
    """
    if not frange:
        return None
    big = max(abs(float(frange[0])), abs(float(frange[1])))
    T = type(check)
    c = float(check)
    m = ROUNDING_ALLOWANCE * float(np.finfo(T).eps) * big
    if not (m <= 0.5 * c):
        return None
    want = 2.0 * (c - m)
    step = T(want)
    if float(step) > want:  # never a coarser step than the allowance leaves
        step = np.nextafter(step, T(0))
    return step


def quantize(x: np.ndarray, qz: Quantizer) -> tuple[np.ndarray, np.ndarray]:
    """q = rint(x * recip) as int32 and the outlier mask, in x's own arithmetic.

    An element is an outlier when it is subnormal, when |x * recip| rounds to >= QLIMIT
    (or is NaN), or when its reconstruction dtype(q) * step misses x by more than the
    check bound (with a zero check bound: differs from x). Subnormal and out-of-range
    elements get q = 0; an in-range q that fails the check is kept (its neighbours
    still predict well from it).
    """
    T = x.dtype.type
    ut = np.uint32 if x.dtype.itemsize == 4 else np.uint64
    mag_bits = x.view(ut) & ut(np.iinfo(ut).max >> 1)
    subnormal = (mag_bits != 0) & (mag_bits < np.finfo(x.dtype).smallest_normal.view(ut))
    with np.errstate(invalid="ignore", over="ignore"):
        qf = np.rint(x * T(qz.recip))
        ok = (np.abs(qf) < QLIMIT) & ~subnormal
        q = np.where(ok, qf, T(0)).astype(np.int32)
        xr = q.astype(x.dtype) * T(qz.step)
        if qz.check > 0:
            ok &= np.abs(x - xr) <= T(qz.check)
        else:
            ok &= x == xr
    return q, ~ok


# -- bit planes ---------------------------------------------------------------------

#: _TO_BIT[e] = bit position of block element e; _FROM_BIT inverts it.
_TO_BIT = np.array([8 * (e % 4) + e // 4 for e in range(BLOCK_ELEMS)])
_FROM_BIT = np.argsort(_TO_BIT)
#: Blocks handled per batch, which bounds the reference's temporary memory.
_BATCH = 1 << 16


def _lorenzo(qb: np.ndarray) -> np.ndarray:
    """Residuals of the Lorenzo predictor inside each block (zero outside the block):
    the mixed first difference along x, then y, then z. qb: (nblocks, bz, by, bx)."""
    d = qb
    for axis in (3, 2, 1):
        if d.shape[axis] > 1:
            d = np.diff(d, axis=axis, prepend=0)
    return d


def _unlorenzo(d: np.ndarray) -> np.ndarray:
    q = d.astype(np.int64)
    for axis in (1, 2, 3):
        if q.shape[axis] > 1:
            q = np.cumsum(q, axis=axis)
    return q.astype(np.int32)  # wraps like the GPU's 32-bit arithmetic on crafted input


def _bit_width(v: np.ndarray) -> np.ndarray:
    """Number of significant bits of each uint32 (0 for 0)."""
    w = np.zeros(v.shape, dtype=np.uint8)
    for k in range(32):
        w += (v >> np.uint32(k)) > 0
    return w


def block_words(widths: np.ndarray, version: int = VERSION) -> np.ndarray:
    """Payload words of each block from its width byte (int64): w + 1, or 0 when w is 0;
    a version 2 corner block has one more (its corner's magnitude)."""
    w = (widths & WIDTH_BITS).astype(np.int64)
    corner = (widths & CORNER_FLAG) != 0
    if version == 2:
        return np.where(corner, w + 2, np.where(w > 0, w + 1, 0))
    return np.where(w > 0, w + 1, 0)


def corner_nbytes(widths: np.ndarray) -> np.ndarray:
    """Corner-section bytes of each block (version 3): nb for a corner block, else 0."""
    nb = ((widths & NB_BITS) >> NB_SHIFT).astype(np.int64) + 1
    return np.where((widths & CORNER_FLAG) != 0, nb, 0)


def _plane_words(widths: np.ndarray, version: int) -> np.ndarray:
    """Words of each block that are bit planes (the sign word and w magnitude planes)."""
    w = (widths & WIDTH_BITS).astype(np.int64)
    if version == 2:  # a version 2 corner block has its sign word even when w is 0
        return np.where(((widths & CORNER_FLAG) != 0) | (w > 0), w + 1, 0)
    return np.where(w > 0, w + 1, 0)


def _to_blocks(a: np.ndarray, grid: tuple[int, int, int], bshape: tuple[int, int, int]) -> np.ndarray:
    (nz, ny, nx), (bz, by, bx) = grid, bshape
    return (
        a.reshape(nz, bz, ny, by, nx, bx).transpose(0, 2, 4, 1, 3, 5).reshape(-1, bz, by, bx)
    )


def _from_blocks(b: np.ndarray, grid: tuple[int, int, int], bshape: tuple[int, int, int]) -> np.ndarray:
    (nz, ny, nx), (bz, by, bx) = grid, bshape
    return b.reshape(nz, ny, nx, bz, by, bx).transpose(0, 3, 1, 4, 2, 5).reshape(
        nz * bz, ny * by, nx * bx
    )


def _ext(d: np.ndarray) -> np.ndarray:
    """Sign-magnitude form |d| << 1 | (d < 0) as uint32 (|d| < 2**29 in a valid block)."""
    return (np.abs(d).astype(np.uint32) << np.uint32(1)) | (d < 0).astype(np.uint32)


def _encode_blocks(d: np.ndarray, payload: np.ndarray, offs: np.ndarray, widths: np.ndarray,
                   version: int) -> None:
    """Write each block's words into ``payload`` (u32): the sign word and the magnitude bit
    planes, with a corner block's corner left out (version 3: entirely; version 2: its
    magnitude, which then follows the planes in one more word)."""
    mag = np.abs(d).astype(np.uint32)
    neg = d < 0
    corner = (widths & CORNER_FLAG) != 0
    corner_mag = mag[:, 0].copy()
    mag[corner, 0] = 0  # the corner's sign stays in the sign word (a corner-only block has none)
    mag = mag[:, _FROM_BIT]  # column c holds the element of bit c
    neg = neg[:, _FROM_BIT]
    planes_n = _plane_words(widths, version)
    for n in np.unique(planes_n):
        if n == 0:
            continue
        sel = np.flatnonzero(planes_n == n)
        planes = (mag[sel][:, None, :] >> np.arange(n - 1, dtype=np.uint32)[None, :, None]) & 1
        bits = np.concatenate([neg[sel][:, None, :], planes.astype(bool)], axis=1)
        words = np.packbits(bits, axis=-1, bitorder="little").view("<u4")[..., 0]
        payload[offs[sel][:, None] + np.arange(n)] = words
    if version == 2:
        sel = np.flatnonzero(corner)
        payload[offs[sel] + planes_n[sel]] = corner_mag[sel]


def _decode_blocks(payload: np.ndarray, offs: np.ndarray, widths: np.ndarray, version: int,
                   corner_ext: np.ndarray | None = None) -> np.ndarray:
    """Residuals of each block; ``corner_ext`` (version 3) holds each block's corner value
    in sign-magnitude form (read for corner blocks only)."""
    d = np.zeros((len(widths), BLOCK_ELEMS), dtype=np.int64)
    planes_n = _plane_words(widths, version)
    for n in np.unique(planes_n):
        if n == 0:
            continue
        sel = np.flatnonzero(planes_n == n)
        words = payload[offs[sel][:, None] + np.arange(n)].astype("<u4")
        bits = np.unpackbits(words.view(np.uint8).reshape(len(sel), n, 4), axis=-1,
                             bitorder="little")
        mag = (bits[:, 1:, :].astype(np.int64) << np.arange(n - 1, dtype=np.int64)[None, :, None]).sum(1)
        val = np.where(bits[:, 0, :].astype(bool), -mag, mag)
        d[sel] = val[:, _TO_BIT]
    sel = np.flatnonzero((widths & CORNER_FLAG) != 0)
    if sel.size and version == 2:  # its sign from the sign word, its magnitude from the last word
        cm = payload[offs[sel] + planes_n[sel]].astype(np.int64)
        neg0 = ((payload[offs[sel]] >> np.uint32(_TO_BIT[0])) & 1).astype(bool)
        d[sel, 0] = np.where(neg0, -cm, cm)
    elif sel.size:  # version 3: the corner's magnitude replaces what the planes say of it
        v = corner_ext[sel].astype(np.int64)
        words = planes_n[sel] > 0
        # with words: v is |d0| and the sign word holds the sign; without: v is ext0
        neg0 = (v & 1).astype(bool)
        if np.any(words):
            ws = sel[words]
            neg0[words] = ((payload[offs[ws]] >> np.uint32(_TO_BIT[0])) & 1).astype(bool)
        mag0 = np.where(words, v, v >> 1)
        d[sel, 0] = np.where(neg0, -mag0, mag0)
    return d


def _bit_length(v: np.ndarray) -> np.ndarray:
    return _bit_width(v.astype(np.uint32)).astype(np.int64)


def _block_widths(d: np.ndarray, version: int) -> np.ndarray:
    """Width byte of each block: plain (bit width of all residual magnitudes) or corner
    (bit width of the other 31, flag set; version 3: the corner's byte count - 1 in bits
    5-6) when that takes fewer payload bytes."""
    if not len(d):
        return np.zeros(0, np.uint8)
    mag = np.abs(d).astype(np.uint32)
    w_all = _bit_width(np.bitwise_or.reduce(mag, axis=1))
    w_rest = _bit_width(np.bitwise_or.reduce(mag[:, 1:], axis=1))
    plain = np.where(w_all > 0, w_all.astype(np.int64) + 1, 0)
    if version == 2:
        corner = w_rest.astype(np.int64) + 2 < plain
        return np.where(corner, w_rest | CORNER_FLAG, w_all).astype(np.uint8)
    cw = np.where(w_rest > 0, w_rest.astype(np.int64) + 1, 0)
    nb = _corner_nb(d[:, 0], cw > 0)
    corner = 4 * cw + nb < 4 * plain
    cbyte = w_rest.astype(np.int64) | ((nb - 1) << NB_SHIFT) | CORNER_FLAG
    return np.where(corner, cbyte, w_all).astype(np.uint8)


def chained(widths: np.ndarray) -> np.ndarray:
    """Which blocks are chained (version 4): bit 5 set, bits 6-7 clear."""
    return (widths & (CORNER_FLAG | NB_BITS)) == CHAIN_FLAG


def _chain_blocks(d: np.ndarray, qflat: np.ndarray, widths: np.ndarray,
                  block_ndim: int) -> tuple[np.ndarray, np.ndarray]:
    """Version 4: chain a block when that takes fewer payload and corner bytes than the
    plain or corner coding _block_widths chose: its first residual becomes d0 - s, s the
    block before's quantised value at CHAIN_SRC (the element next to this block's corner
    along x), which the decoder has reconstructed by then. Never at b % CHAIN_SPAN == 0.
    Returns the width bytes and the residuals (a copy where a block is chained)."""
    n = len(d)
    if n < 2:
        return widths, d
    s = np.zeros(n, np.int64)
    s[1:] = qflat[:-1, CHAIN_SRC[block_ndim]]
    d0c = d[:, 0].astype(np.int64) - s
    rest = np.bitwise_or.reduce(np.abs(d[:, 1:]).astype(np.uint32), axis=1)
    w_ch = _bit_width(rest | np.abs(d0c).astype(np.uint32)).astype(np.int64)
    nw_ch = np.where(w_ch > 0, w_ch + 1, 0)
    w = (widths & WIDTH_BITS).astype(np.int64)
    cost = 4 * np.where(w > 0, w + 1, 0) + corner_nbytes(widths)  # bytes as coded now
    chain = (np.arange(n) % CHAIN_SPAN != 0) & (4 * nw_ch < cost)
    if not chain.any():
        return widths, d
    widths = np.where(chain, w_ch | CHAIN_FLAG, widths).astype(np.uint8)
    d = d.copy()
    d[chain, 0] = d0c[chain]
    return widths, d


def _unchain(q: np.ndarray, widths: np.ndarray, block_ndim: int) -> None:
    """Version 4, in place on the blocks' quantised values (nblocks, ...) as the planes and
    corners give them: add to each chained block the final value at CHAIN_SRC of the block
    before it (itself chained or not), in 32-bit wrapping arithmetic like the GPU's."""
    c = chained(widths)
    if not c.any():
        return
    n = len(widths)
    qf = q.reshape(n, BLOCK_ELEMS)
    v = qf[:, CHAIN_SRC[block_ndim]].astype(np.int64)
    group = np.cumsum(~c) - 1  # a chain: a block that is not chained and the chained ones after it
    cs = np.cumsum(v)
    starts = np.flatnonzero(~c)
    before = (cs[starts] - v[starts])[group]  # cumulative sum before each chain's first block
    off = cs - before - v  # the block before's final value for a chained block, else 0
    qf[:] = ((qf.astype(np.int64) + off[:, None]) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _corner_value(d0: np.ndarray, has_words: np.ndarray) -> np.ndarray:
    """What the corners section stores of a corner d0 (uint32): |d0| when the block has
    payload words (its sign word then holds the sign), else ext0 = |d0| << 1 | sign."""
    return np.where(has_words, np.abs(d0).astype(np.uint32), _ext(d0))


def _corner_nb(d0: np.ndarray, has_words: np.ndarray) -> np.ndarray:
    """Bytes of each corner value: max(1, ceil(bitlen / 8))."""
    return np.maximum(1, (_bit_length(_corner_value(d0, has_words)) + 7) // 8)


def _pack_corners(d: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """The corners section (version 3): each corner block's corner value (_corner_value)
    in its nb little-endian bytes, in block order."""
    sel = np.flatnonzero((widths & CORNER_FLAG) != 0)
    ext0 = _corner_value(d[sel, 0], (widths[sel] & WIDTH_BITS) > 0)
    nb = corner_nbytes(widths[sel])
    by = (ext0[:, None] >> (8 * np.arange(4, dtype=np.uint32))[None, :]).astype(np.uint8)
    return by[np.arange(4)[None, :] < nb[:, None]]


def _unpack_corners(corners: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Each block's corner value (u32; 0 for plain blocks) from the corners section;
    raises CodecError unless the section is exactly the blocks' corner bytes, each corner
    in its fewest bytes."""
    nb = corner_nbytes(widths)
    total = int(nb.sum())
    if total != len(corners):
        raise CodecError(f"corrupt szp stream: the corner blocks need {total} corner bytes, "
                         f"the header says {len(corners)}")
    ext = np.zeros(len(widths), np.uint32)
    sel = np.flatnonzero(nb)
    if not sel.size:
        return ext
    off = np.cumsum(nb[sel]) - nb[sel]
    c = corners.astype(np.uint32)
    for k in range(4):
        has = nb[sel] > k
        ext[sel[has]] |= c[off[has] + k] << np.uint32(8 * k)
    last = c[off + nb[sel] - 1]
    if np.any((nb[sel] > 1) & (last == 0)):
        raise CodecError("corrupt szp stream: a corner is not stored in its fewest bytes")
    return ext


# -- encode / decode ------------------------------------------------------------------


def encode(x: np.ndarray, mode: str, bound: float, block_ndim: int | None = None, *,
           auto_block: bool = False, version: int = VERSION,
           value_range: tuple[float, float] | None = None) -> bytes:
    """Reference encoder: a complete szp stream for ``x`` (float32 or float64).

    ``auto_block`` records in the header (flag FLAG_AUTO_BLOCK) that ``block_ndim`` was
    chosen automatically; it needs version 3. ``version`` 2 writes the previous format
    (no corners section, no flags), which every reader still takes. ``value_range``: the
    finite (min, max) of the field ``x`` is a part of (the block-shape choice's sample),
    in place of x's own in ``rel`` mode and given to resolve_quantizer in ``abs`` mode,
    so that a sample is quantised with its field's step."""
    if version not in (2, 3, 4):
        raise InputError(f"szp writes format version 2, 3 or 4, not {version!r}")
    if auto_block and version < 3:
        raise InputError("the auto_block flag needs format version 3")
    x = np.asarray(x, order="C")  # keeps 0-d arrays 0-d, unlike ascontiguousarray
    if x.dtype not in DTYPE_CODES:
        raise InputError(f"szp compresses float32 and float64, not {x.dtype}")
    if x.ndim > MAX_NDIM:
        raise InputError(f"szp handles at most {MAX_NDIM} dimensions, got {x.ndim}")
    bnd = default_block_ndim(x.ndim) if block_ndim is None else int(block_ndim)
    if bnd not in BLOCK_SHAPES:
        raise InputError(f"block_ndim must be 1, 2 or 3, got {block_ndim!r}")
    if value_range is None and mode == "rel":
        value_range = finite_range(x)
    qz = resolve_quantizer(x.dtype, mode, bound, value_range, version=version)
    view = view_shape(x.shape, bnd)
    grid = block_grid(view, bnd)
    bshape = BLOCK_SHAPES[bnd]
    nblocks = math.prod(grid)
    xv = x.reshape(view)
    if x.size:
        pads = [(0, g * b - s) for g, b, s in zip(grid, bshape, view)]
        xp = np.pad(xv, pads, mode="edge")
        q, bad = quantize(xp, qz)
        out_idx = np.flatnonzero(bad[: view[0], : view[1], : view[2]]).astype("<u8")
        out_val = x.reshape(-1)[out_idx]
        qb = _to_blocks(q, grid, bshape)
        d = _lorenzo(qb).reshape(nblocks, BLOCK_ELEMS)
    else:
        out_idx = np.zeros(0, "<u8")
        out_val = np.zeros(0, x.dtype)
        qb = np.zeros((0, *bshape), np.int32)
        d = np.zeros((0, BLOCK_ELEMS), np.int32)
    widths = _block_widths(d, version)
    if version >= 4:
        widths, d = _chain_blocks(d, qb.reshape(nblocks, BLOCK_ELEMS), widths, bnd)
    sizes = block_words(widths, version)
    offs = np.cumsum(sizes) - sizes
    payload = np.zeros(int(sizes.sum()), dtype="<u4")
    for start in range(0, nblocks, _BATCH):
        sl = slice(start, start + _BATCH)
        _encode_blocks(d[sl], payload, offs[sl], widths[sl], version)
    corners = _pack_corners(d, widths) if version >= 3 else np.zeros(0, np.uint8)
    header = Header(
        dtype=x.dtype, shape=tuple(x.shape), mode=mode, bound=float(bound),
        abs_bound=qz.abs_bound, step=float(qz.step), block_ndim=bnd, nblocks=nblocks,
        payload_words=len(payload), n_outliers=len(out_idx), version=version,
        corner_bytes=len(corners), flags=FLAG_AUTO_BLOCK if auto_block else 0,
    )
    return assemble(header, widths, payload, out_idx, out_val.astype(x.dtype.newbyteorder("<")),
                    corners)


def assemble(h: Header, widths: np.ndarray, payload: np.ndarray, out_idx: np.ndarray,
             out_val: np.ndarray, corners: np.ndarray | None = None) -> bytes:
    """Lay the sections out at their offsets, zero the pads, append the CRC."""
    lay = layout(h)
    buf = np.zeros(lay.total, dtype=np.uint8)
    buf[: h.header_len] = np.frombuffer(h.pack(), np.uint8)
    buf[lay.widths : lay.widths + h.nblocks] = widths
    buf[lay.payload : lay.payload + 4 * h.payload_words] = payload.view(np.uint8)
    if h.corner_bytes:
        buf[lay.corners : lay.corners + h.corner_bytes] = corners
    buf[lay.out_index : lay.out_index + 8 * h.n_outliers] = out_idx.view(np.uint8)
    nv = h.dtype.itemsize * h.n_outliers
    buf[lay.out_value : lay.out_value + nv] = out_val.view(np.uint8)
    return finish(buf[: lay.crc])


def finish(body: np.ndarray | bytes | memoryview) -> bytes:
    """Append the CRC32 trailer to a stream body."""
    crc = zlib.crc32(body)
    return bytes(body) + struct.pack("<I", crc)


@dataclass(frozen=True)
class Parsed:
    header: Header
    layout: Layout
    widths: np.ndarray
    payload: np.ndarray
    out_index: np.ndarray
    out_value: np.ndarray
    corners: np.ndarray  # the corners section (empty before version 3)
    corner_ext: np.ndarray  # each block's corner value (u32, 0 for plain blocks); version 3


def parse_header(data: bytes | memoryview) -> Header:
    """Read and validate the header alone (no checksum)."""
    if len(data) < HEADER_LEN_V2 + 4:
        raise CodecError(f"szp stream truncated: {len(data)} bytes, shorter than the header")
    f = HEADER_STRUCT.unpack_from(data, 0)
    (magic, version, hlen, dcode, mcode, ndim, bnd, bz, by, bx, _pad, nelem, bound,
     abs_bound, step, nblocks, pwords, nout) = f
    if magic != MAGIC:
        raise CodecError(f"not an szp stream: bad magic {bytes(magic)!r} (expected {MAGIC!r})")
    if version not in READABLE_VERSIONS:
        raise CodecError(f"unsupported szp format version {version} (this reader knows "
                         f"{', '.join(map(str, READABLE_VERSIONS))})")
    want = HEADER_LEN if version >= 3 else HEADER_LEN_V2
    if hlen != want:
        raise CodecError(f"corrupt szp header: header length {hlen} != {want} (version {version})")
    if len(data) < want + 4:
        raise CodecError(f"szp stream truncated: {len(data)} bytes, shorter than the header")
    corner_bytes, flags = struct.unpack_from("<QQ", data, HEADER_LEN_V2) if version >= 3 else (0, 0)
    if flags & ~KNOWN_FLAGS:
        raise CodecError(f"corrupt szp header: unknown flag bits {flags & ~KNOWN_FLAGS:#x}")
    if dcode not in CODE_DTYPES or mcode not in CODE_MODES:
        raise CodecError(f"corrupt szp header: dtype code {dcode} / mode code {mcode} unknown")
    if ndim > MAX_NDIM or bnd not in BLOCK_SHAPES or (bz, by, bx) != BLOCK_SHAPES[bnd]:
        raise CodecError(f"corrupt szp header: ndim {ndim}, block {bnd}-D {(bz, by, bx)}")
    dims = struct.unpack_from(f"<{MAX_NDIM}Q", data, HEADER_STRUCT.size)
    shape = tuple(int(v) for v in dims[:ndim])
    if any(dims[ndim:]) or math.prod(shape) != nelem:
        raise CodecError(f"corrupt szp header: shape {shape} does not hold {nelem} elements")
    if bnd > 1 and ndim < bnd:
        raise CodecError(f"corrupt szp header: {bnd}-D blocks on a {ndim}-D array")
    if nblocks != math.prod(block_grid(view_shape(shape, bnd), bnd)):
        raise CodecError(f"corrupt szp header: {nblocks} blocks do not tile shape {shape}")
    if nout > nelem or not (math.isfinite(step) and step > 0):
        raise CodecError("corrupt szp header: outlier count or step out of range")
    dtype = CODE_DTYPES[dcode]
    T = dtype.type
    if T(step) != step or T(step) < np.finfo(dtype).smallest_normal:
        raise CodecError(f"corrupt szp header: step {step!r} is not a normal {dtype} value")
    if corner_bytes > 4 * nblocks:
        raise CodecError(f"corrupt szp header: {corner_bytes} corner bytes for {nblocks} blocks")
    return Header(dtype, shape, CODE_MODES[mcode], bound, abs_bound, step, bnd,
                  nblocks, pwords, nout, version, corner_bytes, flags)


def parse(data: bytes | memoryview, verify_crc: bool = True) -> Parsed:
    """Validate a whole stream (header, length, checksum, widths, outlier indices)."""
    h = parse_header(data)
    if h.payload_words > (MAX_WIDTH + 1) * h.nblocks:
        raise CodecError("corrupt szp header: payload larger than any block widths allow")
    lay = layout(h)
    if len(data) < lay.total:
        raise CodecError(f"szp stream truncated: {len(data)} bytes, the header says {lay.total}")
    if len(data) > lay.total:
        raise CodecError(f"szp stream has {len(data) - lay.total} trailing bytes after the checksum")
    if verify_crc:
        (stored,) = struct.unpack_from("<I", data, lay.crc)
        actual = zlib.crc32(memoryview(data)[: lay.crc])
        if stored != actual:
            raise CodecError(f"szp checksum mismatch (stored {stored:#010x}, computed {actual:#010x}): "
                             "the stream is corrupt")
    buf = np.frombuffer(data, dtype=np.uint8)
    widths = buf[lay.widths : lay.widths + h.nblocks]
    if h.nblocks:
        allowed = {1: WIDTH_BITS, 2: WIDTH_BITS | CORNER_FLAG}.get(h.version, 0xFF)
        # bits 5-6 (a corner's byte count) only on corner blocks; version 4: bit 5 alone is
        # the chain flag, never on a block at a multiple of CHAIN_SPAN
        plain = widths & CORNER_FLAG == 0
        if h.version >= 4:
            stray_nb = np.any((widths & (NB_BITS & ~CHAIN_FLAG) != 0) & plain) or \
                np.any(chained(widths[::CHAIN_SPAN]))
        else:
            stray_nb = h.version >= 3 and np.any((widths & NB_BITS != 0) & plain)
        if int((widths & WIDTH_BITS).max()) > MAX_WIDTH or np.any(widths & ~np.uint8(allowed)) or stray_nb:
            raise CodecError(f"corrupt szp stream: a block width exceeds {MAX_WIDTH} or has "
                             f"unknown flag bits (format version {h.version})")
    sizes = block_words(widths, h.version)
    if int(sizes.sum()) != h.payload_words:
        raise CodecError("corrupt szp stream: block widths do not add up to the payload size")
    payload = buf[lay.payload : lay.payload + 4 * h.payload_words].view("<u4")
    corners = buf[lay.corners : lay.corners + h.corner_bytes]
    corner_ext = (_unpack_corners(corners, widths) if h.version >= 3
                  else np.zeros(0, np.uint32))
    out_index = buf[lay.out_index : lay.out_index + 8 * h.n_outliers].view("<u8")
    out_value = buf[lay.out_value : lay.out_value + h.dtype.itemsize * h.n_outliers].view(
        h.dtype.newbyteorder("<"))
    if h.n_outliers and (int(out_index[-1]) >= h.nelem or np.any(np.diff(out_index.astype(np.int64)) <= 0)):
        raise CodecError("corrupt szp stream: outlier indices out of range or not increasing")
    return Parsed(h, lay, widths, payload, out_index, out_value, corners, corner_ext)


def decode(data: bytes | memoryview) -> np.ndarray:
    """Reference decoder: the array a stream describes."""
    p = parse(data)
    h = p.header
    view = view_shape(h.shape, h.block_ndim)
    grid = block_grid(view, h.block_ndim)
    bshape = h.block_shape
    sizes = block_words(p.widths, h.version)
    offs = np.cumsum(sizes) - sizes
    T = h.dtype.type
    q = np.empty((h.nblocks, *bshape), dtype=np.int32)
    for start in range(0, h.nblocks, _BATCH):
        sl = slice(start, start + _BATCH)
        cext = p.corner_ext[sl] if h.version >= 3 else None
        d = _decode_blocks(p.payload, offs[sl], p.widths[sl], h.version, cext)
        q[sl] = _unlorenzo(d.reshape(-1, *bshape))
    if h.version >= 4:
        _unchain(q, p.widths, h.block_ndim)
    with np.errstate(over="ignore"):  # such elements are outliers, overwritten below
        xr = q.astype(h.dtype) * T(h.step)
    out = _from_blocks(xr, grid, bshape)[: view[0], : view[1], : view[2]]
    out = np.array(out, order="C").reshape(h.shape)
    if h.n_outliers:
        out.reshape(-1)[p.out_index.astype(np.int64)] = p.out_value
    return out
