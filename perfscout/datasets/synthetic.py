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
from NumPy's PCG64 generator and computed in float64, then cast.
"""

from __future__ import annotations

import math
import os
import re
import resource
from typing import Any, Callable, Iterable

import numpy as np

from perfscout.datasets.field import Field, parse_dtype, parse_shape, shape_str, validate_array
from perfscout.errors import InputError

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


def _grid_frequencies(shape: tuple[int, ...]) -> np.ndarray:
    """|k| on the rfftn grid (cycles per sample) for ``shape``."""
    axes = [np.fft.fftfreq(n) for n in shape[:-1]] + [np.fft.rfftfreq(shape[-1])]
    k2 = np.zeros([len(a) for a in axes])
    for i, a in enumerate(axes):
        view = [1] * len(axes)
        view[i] = len(a)
        k2 = k2 + a.reshape(view) ** 2
    return np.sqrt(k2)


def _grf(shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    noise = rng.standard_normal(shape)
    spectrum = np.fft.rfftn(noise)
    k = _grid_frequencies(shape)
    amplitude = np.zeros_like(k)
    nz = k > 0
    mode_slope = GRF_SHELL_SLOPE + len(shape) - 1
    amplitude[nz] = k[nz] ** (-mode_slope / 2)  # amplitude^2 = power per mode
    field = np.fft.irfftn(spectrum * amplitude, s=shape, axes=tuple(range(len(shape))))
    std = field.std()
    return (field - field.mean()) / std if std > 0 else field


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


def _laplacian(a: np.ndarray) -> np.ndarray:
    """Periodic 2*ndim+1-point Laplacian."""
    out = -2.0 * a.ndim * a
    for axis in range(a.ndim):
        out += np.roll(a, 1, axis=axis) + np.roll(a, -1, axis=axis)
    return out


def _grayscott(shape: tuple[int, ...], rng: np.random.Generator, steps: int = GS_STEPS) -> np.ndarray:
    u = np.ones(shape)
    v = np.zeros(shape)
    # Seed a few square patches of V (random centres, ~1/8 of each axis wide).
    for _ in range(int(rng.integers(3, 7))):
        sl = []
        for n in shape:
            half = max(1, n // 16)
            c = int(rng.integers(0, n))
            sl.append(slice(max(0, c - half), min(n, c + half + 1)))
        u[tuple(sl)] = 0.50
        v[tuple(sl)] = 0.25
    v += 0.01 * rng.random(shape)
    for _ in range(steps):
        uvv = u * v * v
        u_next = u + GS_DU * _laplacian(u) - uvv + GS_FEED * (1.0 - u)
        v = v + GS_DV * _laplacian(v) + uvv - (GS_FEED + GS_KILL) * v
        u = u_next
    return v


_GENERATORS: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "grf": (_grf, "Gaussian random field, Kolmogorov-like spectrum E(k) ~ k^-5/3, zero mean, unit variance"),
    "smooth": (_smooth, f"{SMOOTH_MODES} low-frequency cosine modes plus {SMOOTH_NOISE:g}-relative noise"),
    "grayscott": (_grayscott, f"Gray-Scott reaction-diffusion V after {GS_STEPS} steps (F={GS_FEED}, k={GS_KILL})"),
}

SYNTHETIC_KINDS: tuple[str, ...] = tuple(_GENERATORS)


def describe_kind(kind: str) -> str:
    return _GENERATORS[kind][1]


#: float64 temporaries a generator holds at once, per element (grf: noise, its spectrum
#: and the inverse transform; grayscott: u, v and their Laplacians; smooth: the field and
#: numpy's std temporary, the rest in slabs), plus the output in its dtype.
GENERATOR_BYTES_PER_ELEMENT = 8 * 6
GENERATOR_BYTES = {"grf": GENERATOR_BYTES_PER_ELEMENT, "grayscott": GENERATOR_BYTES_PER_ELEMENT, "smooth": 8 * 2}


def _available_bytes() -> int:
    """MemAvailable (or physical memory), lowered to this process's address-space limit."""
    avail = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if not avail:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            avail = 1 << 62
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return min(avail, soft) if soft != resource.RLIM_INFINITY else avail


def _refuse_oversized(kind: str, dims: tuple[int, ...], itemsize: int = 8) -> None:
    """InputError before allocating anything when the field cannot be generated here."""
    n = math.prod(dims)
    need = n * (GENERATOR_BYTES.get(kind, GENERATOR_BYTES_PER_ELEMENT) + itemsize)
    have = _available_bytes()
    if need > have:
        raise InputError(
            f"synthetic {kind}:{shape_str(dims)} has {n:.3g} values and needs about {need / 2**30:.3g} GiB "
            f"to generate; {have / 2**30:.3g} GiB is available here: use a smaller shape"
        )


def synthetic(kind: str, shape: str | Iterable[int], dtype: Any = "f32", seed: int = 0) -> Field:
    """A deterministic synthetic field of ``kind`` ("grf", "smooth", "grayscott")."""
    if kind not in _GENERATORS:
        raise InputError(f"unknown synthetic kind {kind!r}; known: {', '.join(SYNTHETIC_KINDS)}")
    dims = parse_shape(shape)
    if len(dims) > MAX_SYNTHETIC_DIMS:
        raise InputError(f"synthetic fields are 1-D to 3-D; got shape {dims}")
    dt = parse_dtype(dtype)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    _refuse_oversized(kind, dims, dt.itemsize)
    make, description = _GENERATORS[kind]
    values = make(dims, np.random.default_rng(int(seed)))
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


def parse_synthetic(spec: str) -> Field:
    """Build a field from "KIND:SHAPE[:DTYPE][:seed=N]", e.g. "grf:64,64,64:f64"."""
    parts = [p.strip() for p in str(spec).strip().split(":")]
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise InputError(
            f"bad synthetic spec {spec!r}: expected KIND:SHAPE[:DTYPE][:seed=N], "
            f"e.g. grf:64,64,64:f32 (kinds: {', '.join(SYNTHETIC_KINDS)})"
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
    return synthetic(kind, shape, dtype=dtype, seed=seed)
