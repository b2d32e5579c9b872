"""Deterministic synthetic fields (1-D to 3-D, float32/float64) for tests and demos.

Three kinds that stress a compressor differently:

- ``grf``: a Gaussian random field with a Kolmogorov-like power-law spectrum (shell
  spectrum E(k) ~ k^-5/3 in any dimension): structure at every scale, hard to
  predict, the pessimistic case;
- ``smooth``: a sum of a few low-frequency cosine modes plus faint noise: very
  predictable, the optimistic case;
- ``grayscott``: a snapshot of the Gray-Scott reaction-diffusion system: sharp
  fronts between flat regions, like many simulation outputs.

The same (kind, shape, dtype, seed) always gives the same array: values are drawn
from NumPy's PCG64 generator in float64. ``smooth`` is computed in float64, then cast;
``grf`` and ``grayscott`` are computed in the output's dtype (a float32 field in float32,
with float64 sums for its mean and spread), in place and through slabs, so a field
needs about twice its own size to generate, not eight times; their float32 fields
are the float64 ones to float32 precision, not bit for bit.

Installed distributions add kinds through ``perfscout.datasets`` entry points
(:data:`GENERATOR_GROUP`); :func:`generator_listing` says which loaded and why the
others did not. Their output is cast and checked like the built-ins'.
"""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Iterable

import numpy as np

from perfscout.datasets.field import Field, parse_dtype, parse_shape, shape_str, validate_array
from perfscout.errors import InputError
from perfscout.io import available_bytes
from perfscout.state.entry_points import CachedScan, PluginListing, scan

#: Slope alpha of the GRF's shell spectrum E(k) ~ k^-alpha (energy per |k| shell):
#: 5/3 is Kolmogorov's inertial range. Per Fourier mode this is P(k) ~ k^-(alpha+d-1)
#: (k^-11/3 in 3-D), so the field is equally rough in 1-D, 2-D and 3-D.
GRF_SHELL_SLOPE = 5.0 / 3.0

#: Smooth field: number of cosine modes, their highest frequency (cycles per domain
#: along an axis) and the noise level relative to the field's standard deviation.
SMOOTH_MODES = 6
SMOOTH_MAX_CYCLES = 4
SMOOTH_NOISE = 1e-3

#: Gray-Scott, in grid units with dt = 1. Du * dt <= 1/(2 * ndim) keeps explicit Euler
#: stable up to 3-D (0.16 <= 1/6); F and k sit in the "spots and stripes" regime.
GS_DU, GS_DV = 0.16, 0.08
GS_FEED, GS_KILL = 0.035, 0.060
#: Steps: enough for fronts to form around the seeds, few enough that 64^3 stays ~seconds.
GS_STEPS = 200

MAX_SYNTHETIC_DIMS = 3


#: The lean generators (grf, grayscott) work through slabs of about this many elements
#: along the first axis: their temporaries are slabs, not fields.
SLAB_ELEMENTS = 1 << 18


def _rows(shape: tuple[int, ...]) -> int:
    return max(1, SLAB_ELEMENTS // max(1, math.prod(shape[1:])))


def _grid_frequencies(shape: tuple[int, ...], r0: int = 0, r1: int | None = None) -> np.ndarray:
    """|k| on the rfftn grid (cycles per sample) for ``shape``, rows r0:r1 of the first axis."""
    axes = [np.fft.fftfreq(n) for n in shape[:-1]] + [np.fft.rfftfreq(shape[-1])]
    axes[0] = axes[0][r0:r1]
    k2 = np.zeros([len(a) for a in axes])
    for i, a in enumerate(axes):
        view = [1] * len(axes)
        view[i] = len(a)
        k2 = k2 + a.reshape(view) ** 2
    return np.sqrt(k2)


def _normalise(field: np.ndarray) -> None:
    """(field - mean) / std in place, slab by slab, with float64 sums (two passes:
    the spread is summed around the mean, no cancellation)."""
    rows, n = _rows(field.shape), field.size
    total = sum(float(np.add.reduce(field[r : r + rows], axis=None, dtype=np.float64))
                for r in range(0, field.shape[0], rows))
    mean = total / n
    sq = 0.0
    for r in range(0, field.shape[0], rows):
        d = field[r : r + rows].astype(np.float64) - mean
        sq += float(np.einsum("i,i->", d.reshape(-1), d.reshape(-1)))
    std = math.sqrt(sq / n)
    for r in range(0, field.shape[0], rows):
        block = field[r : r + rows]
        if std > 0:
            block -= block.dtype.type(mean)
            block *= block.dtype.type(1.0 / std)


def _grf(shape: tuple[int, ...], rng: np.random.Generator, dtype: Any = np.float64) -> np.ndarray:
    """White noise (float64 draws, stored in ``dtype``), filtered in Fourier space.

    Memory: the noise and its half spectrum (float32: complex64), each about the size of
    the output; the filter is applied in place, slab by slab, and the inverse transform
    runs in the spectrum's place until its last pass writes the field. A float32 field is the float64 one to float32
    precision (the same draws, the transforms in float32).
    """
    import scipy.fft

    real = np.dtype(dtype)
    noise = np.empty(shape, dtype=real)
    rows = _rows(shape)
    for r in range(0, shape[0], rows):  # the same stream as one draw of the whole shape
        noise[r : r + rows] = rng.standard_normal(noise[r : r + rows].shape)
    spectrum = scipy.fft.rfftn(noise, workers=1)
    del noise
    mode_slope = GRF_SHELL_SLOPE + len(shape) - 1
    for r in range(0, shape[0], rows):
        k = _grid_frequencies(shape, r, r + rows)
        amplitude = np.zeros_like(k)
        nz = k > 0
        amplitude[nz] = k[nz] ** (-mode_slope / 2)  # amplitude^2 = power per mode
        spectrum[r : r + rows] *= amplitude.astype(real, copy=False)
    # The inverse axis by axis: the complex passes run in place (scipy's irfftn copies
    # the spectrum first even with overwrite_x: 3x the output instead of 2x, measured);
    # the last, complex-to-real pass writes the field.
    for axis in range(len(shape) - 1):
        spectrum = scipy.fft.ifft(spectrum, axis=axis, overwrite_x=True, workers=1)
    field = scipy.fft.irfft(spectrum, n=shape[-1], axis=-1, overwrite_x=True, workers=1)
    del spectrum
    field = field.astype(real, copy=False)
    _normalise(field)
    return field


#: The smooth field is built and noised in slabs of about this many elements along its
#: first axis: one float64 copy of the field plus slab temporaries, instead of the ~5
#: whole-field temporaries of building it in one expression.
SMOOTH_SLAB_ELEMENTS = 1 << 18


def _smooth(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    # Every random number is drawn in the order of the one-expression build (modes, then
    # the noise, which NumPy's Generator gives identically in pieces or at once), and each
    # element sees the same arithmetic: the field is bit-identical to that build.
    modes = []
    for m in range(SMOOTH_MODES):
        cycles = rng.integers(0, SMOOTH_MAX_CYCLES + 1, size=len(shape))
        if not cycles.any():
            cycles[rng.integers(len(shape))] = 1
        phase = rng.uniform(0, 2 * np.pi)
        amp = rng.uniform(0.5, 1.0) / (m + 1)
        modes.append((cycles, phase, amp))
    field = np.empty(shape)
    rows = max(1, SMOOTH_SLAB_ELEMENTS // max(1, math.prod(shape[1:])))
    axes = [np.arange(n) / n for n in shape]
    for r0 in range(0, shape[0], rows):
        coords = np.meshgrid(axes[0][r0 : r0 + rows], *axes[1:], indexing="ij", sparse=True)
        slab = np.zeros(coords[0].shape[:1] + tuple(shape[1:]))
        for cycles, phase, amp in modes:
            arg = sum(2 * np.pi * int(c) * x for c, x in zip(cycles, coords))
            slab = slab + amp * np.cos(arg + phase)
        field[r0 : r0 + rows] = slab
    scale = SMOOTH_NOISE * field.std()
    for r0 in range(0, shape[0], rows):
        block = field[r0 : r0 + rows]
        block += scale * rng.standard_normal(block.shape)
    return field


def _grayscott(shape: tuple[int, ...], rng: np.random.Generator, steps: int = GS_STEPS,
               dtype: Any = np.float64) -> np.ndarray:
    """Explicit Euler steps of Gray-Scott on a periodic grid, two fields of ``dtype``
    updated in place slab by slab (the neighbours a slab needs from outside are the old
    rows kept beside it). In float64 every element sees exactly the arithmetic of the
    whole-array update (kept in the tests as the oracle)."""
    real = np.dtype(dtype)
    u = np.ones(shape, dtype=real)
    v = np.zeros(shape, dtype=real)
    # Seed a few square patches of V (random centres, ~1/8 of each axis wide).
    for _ in range(int(rng.integers(3, 7))):
        sl = []
        for n in shape:
            half = max(1, n // 16)
            c = int(rng.integers(0, n))
            sl.append(slice(max(0, c - half), min(n, c + half + 1)))
        u[tuple(sl)] = 0.50
        v[tuple(sl)] = 0.25
    rows = _rows(shape)
    for r in range(0, shape[0], rows):  # the same stream as one draw of the whole shape
        block = v[r : r + rows]
        block += 0.01 * rng.random(block.shape)
    for _ in range(steps):
        _grayscott_step(u, v, rows)
    return v


def _laplacian_slab(a: np.ndarray, above: np.ndarray, below: np.ndarray) -> np.ndarray:
    """Periodic 2*ndim+1-point Laplacian of the rows ``a`` (old values), given the old rows
    just above and below them; summed in the order of the whole-array form
    ``-2 ndim a + (roll(a, 1) + roll(a, -1))``, axis after axis."""
    out = -2.0 * a.ndim * a
    up = np.empty_like(a)  # roll(a, 1, axis=0) with the row above
    up[0] = above
    up[1:] = a[:-1]
    down = np.empty_like(a)  # roll(a, -1, axis=0) with the row below
    down[:-1] = a[1:]
    down[-1] = below
    up += down
    del down
    out += up
    for axis in range(1, a.ndim):
        out += np.roll(a, 1, axis=axis) + np.roll(a, -1, axis=axis)
    return out


def _grayscott_step(u: np.ndarray, v: np.ndarray, rows: int) -> None:
    n0 = u.shape[0]
    first_u, first_v = u[0].copy(), v[0].copy()  # old row 0: the last slab's row below
    above_u, above_v = u[n0 - 1].copy(), v[n0 - 1].copy()  # old last row: slab 0's row above
    for r0 in range(0, n0, rows):
        r1 = min(n0, r0 + rows)
        uo, vo = u[r0:r1].copy(), v[r0:r1].copy()
        below_u = u[r1] if r1 < n0 else first_u  # not yet updated: still old
        below_v = v[r1] if r1 < n0 else first_v
        lap_u = _laplacian_slab(uo, above_u, below_u)
        lap_v = _laplacian_slab(vo, above_v, below_v)
        uvv = uo * vo * vo
        u[r0:r1] = uo + GS_DU * lap_u - uvv + GS_FEED * (1.0 - uo)
        v[r0:r1] = vo + GS_DV * lap_v + uvv - (GS_FEED + GS_KILL) * vo
        above_u, above_v = uo[-1], vo[-1]


_GENERATORS: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "grf": (_grf, "Gaussian random field, Kolmogorov-like spectrum E(k) ~ k^-5/3, zero mean, unit variance"),
    "smooth": (_smooth, f"{SMOOTH_MODES} low-frequency cosine modes plus {SMOOTH_NOISE:g}-relative noise"),
    "grayscott": (_grayscott, f"Gray-Scott reaction-diffusion V after {GS_STEPS} steps (F={GS_FEED}, k={GS_KILL})"),
}

#: The built-in kinds (:func:`synthetic_kinds` adds the installed plug-ins').
SYNTHETIC_KINDS: tuple[str, ...] = tuple(_GENERATORS)

#: Entry-point group of installed generators: ``NAME = "module:function"``, where
#: ``function(shape: tuple[int, ...], rng: numpy.random.Generator, dtype: numpy.dtype)``
#: returns an array of that shape, deterministic for the generator it is given.
GENERATOR_GROUP = "perfscout.datasets"

def _check_generator(name: str, obj: Any) -> tuple[str, str] | None:
    if name != name.lower():  # "KIND:SHAPE" specs are read lower-cased
        return "invalid_id", f"generator name {name!r} must be lower case"
    if not callable(obj):
        return "not_callable", (f"{obj!r:.60} is a {type(obj).__name__}, not a generator function "
                                "f(shape, rng, dtype) -> array")
    return None


def _scan_generators() -> tuple[dict[str, Callable[..., Any]], PluginListing]:
    return scan(GENERATOR_GROUP, builtins=_GENERATORS, check=_check_generator, what="synthetic generator")


#: The installed generators, scanned on first use (a plug-in asking during its own import
#: gets none: the scan is not finished).
_PLUGINS: CachedScan[dict[str, Callable[..., Any]]] = CachedScan(GENERATOR_GROUP, _scan_generators, dict)


def _plugins() -> dict[str, Callable[..., Any]]:
    return _PLUGINS.get()


def generator_listing() -> PluginListing:
    """The installed generator plug-ins that loaded and those that failed, with the reason."""
    return _PLUGINS.listing()


def refresh_generators() -> None:
    """Forget the scan of installed generators (after installing one, in tests)."""
    _PLUGINS.clear()


def synthetic_kinds() -> tuple[str, ...]:
    """Every kind :func:`synthetic` makes: the built-ins, then the installed plug-ins'."""
    return SYNTHETIC_KINDS + tuple(k for k in _plugins() if k not in _GENERATORS)


def describe_kind(kind: str) -> str:
    if kind in _GENERATORS:
        return _GENERATORS[kind][1]
    gen = _plugins()[kind]
    doc = (getattr(gen, "__doc__", None) or "").strip().splitlines()
    source = next((p.distribution for p in generator_listing().loaded if p.id == kind), "?")
    return f"{doc[0] if doc else kind} (plug-in from {source})"


def _run_plugin(kind: str, gen: Callable[..., Any], dims: tuple[int, ...], rng: np.random.Generator,
                dt: np.dtype) -> np.ndarray:
    """A plug-in generator's field, refused unless it is a real array of the asked shape."""
    try:
        values = np.asarray(gen(dims, rng, dt))
    except Exception as exc:  # the plug-in's bug is reported as its own, never a traceback
        raise InputError(f"synthetic generator {kind!r} failed: {type(exc).__name__}: {exc}") from exc
    if values.shape != dims or not (np.issubdtype(values.dtype, np.floating) or np.issubdtype(values.dtype, np.integer)):
        raise InputError(f"synthetic generator {kind!r} returned {values.dtype}{values.shape}, "
                         f"not a real array of shape {dims}")
    return values


#: What a generator holds at once per element, besides slab temporaries, in units of
#: the output's item size (grf: the noise and the half spectrum, about one output each,
#: the inverse transform writing into the spectrum's place; grayscott: u and v, the
#: output being v), or in bytes (smooth: its float64 field and numpy's std temporary).
GENERATOR_ITEMS = {"grf": 2.5, "grayscott": 2.0}
GENERATOR_BYTES = {"smooth": 8 * 2}
GENERATOR_BYTES_PER_ELEMENT = 8 * 6  # anything else: a generous float64 estimate


def generator_bytes(kind: str, n: int, itemsize: int) -> int:
    """Bytes ``synthetic(kind)`` needs for ``n`` elements of ``itemsize`` (output included)."""
    if kind in GENERATOR_ITEMS:
        return int(n * itemsize * GENERATOR_ITEMS[kind]) + 64 * SLAB_ELEMENTS * 8
    return n * (GENERATOR_BYTES.get(kind, GENERATOR_BYTES_PER_ELEMENT) + itemsize)


def _refuse_oversized(kind: str, dims: tuple[int, ...], itemsize: int = 8) -> None:
    """InputError before allocating anything when the field cannot be generated here."""
    n = math.prod(dims)
    need = generator_bytes(kind, n, itemsize)
    have = available_bytes()
    if need > have:
        raise InputError(
            f"synthetic {kind}:{shape_str(dims)} has {n:.3g} values and needs about {need / 2**30:.3g} GiB "
            f"to generate; {have / 2**30:.3g} GiB is available here: use a smaller shape"
        )


def synthetic(kind: str, shape: str | Iterable[int], dtype: Any = "f32", seed: int = 0) -> Field:
    """A deterministic synthetic field of ``kind`` ("grf", "smooth", "grayscott")."""
    plugin = None if kind in _GENERATORS else _plugins().get(kind)
    if kind not in _GENERATORS and plugin is None:
        raise InputError(f"unknown synthetic kind {kind!r}; known: {', '.join(synthetic_kinds())}")
    dims = parse_shape(shape)
    if len(dims) > MAX_SYNTHETIC_DIMS:
        raise InputError(f"synthetic fields are 1-D to 3-D; got shape {dims}")
    dt = parse_dtype(dtype)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    _refuse_oversized(kind, dims, dt.itemsize)
    rng = np.random.default_rng(int(seed))
    if plugin is not None:
        description = describe_kind(kind)
        values = _run_plugin(kind, plugin, dims, rng, dt)
    else:
        make, description = _GENERATORS[kind]
        values = make(dims, rng) if kind == "smooth" else make(dims, rng, dtype=dt)
    arr = validate_array(values.astype(dt, copy=False), what=f"synthetic {kind}")  # f64: no copy
    del values
    tag = "f32" if dt.itemsize == 4 else "f64"
    return Field(
        name=f"{kind}:{shape_str(dims)}:{tag}" + (f":seed={seed}" if seed else ""),
        array=arr,
        source=f"synthetic:{kind}:{shape_str(dims)}:{tag}:seed={seed}",
        description=description,
        meta={"kind": kind, "seed": int(seed)},
    )


_SEED_RE = re.compile(r"^seed=(\d+)$")


def split_synthetic(spec: str) -> tuple[str, str, str, int]:
    """(kind, shape text, dtype, seed) of "KIND:SHAPE[:DTYPE][:seed=N]", e.g. "grf:64,64,64:f64"."""
    parts = [p.strip() for p in str(spec).strip().split(":")]
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise InputError(
            f"bad synthetic spec {spec!r}: expected KIND:SHAPE[:DTYPE][:seed=N], "
            f"e.g. grf:64,64,64:f32 (kinds: {', '.join(synthetic_kinds())})"
        )
    kind, shape, rest = parts[0].lower(), parts[1], parts[2:]
    dtype: str = "f32"
    seed = 0
    for part in rest:
        m = _SEED_RE.match(part.lower())
        if m:
            seed = int(m.group(1))
        elif part:
            dtype = part
    if len(rest) > 2:
        raise InputError(f"bad synthetic spec {spec!r}: too many ':' parts")
    return kind, shape, dtype, seed


def parse_synthetic(spec: str) -> Field:
    """Build a field from "KIND:SHAPE[:DTYPE][:seed=N]", e.g. "grf:64,64,64:f64"."""
    kind, shape, dtype, seed = split_synthetic(spec)
    return synthetic(kind, shape, dtype=dtype, seed=seed)
