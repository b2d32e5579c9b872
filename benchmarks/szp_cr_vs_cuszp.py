"""Compression ratio of szp against cuSZp's 1-D outlier mode on the same fields (CPU, NumPy).

    python3 benchmarks/szp_cr_vs_cuszp.py --data ../shared/data --out benchmarks/results/szp_cr_vs_cuszp.json

cuSZp cannot run on the device machine (not installed, nothing can be fetched), so its
stream size comes from ``cuszp_model.py``, a size model of its outlier-mode format. szp sizes
are exact: the NumPy reference encoder writes the streams (the GPU writes the same bytes).

Fields: the real fields of ``--data`` at their own size, and the two synthetic fields of
``gpu_codec.py`` at reduced size: smooth3d as the first 16 planes of the 256-plane field
(the same grid spacing and noise), and the Gaussian random field on a 64x256x256 box with the
same k^-3 spectrum. Bounds: REL 1e-2, 1e-3, 1e-4, each resolved to the absolute bound both
codecs get.

szp is measured in format v3 (corners byte-granular in their own section, the design this
script's former "corner projection" column anticipated) and, for comparison, in format v2
(a corner's magnitude in a whole payload word): ``szp_{n}d_cr`` and ``szp_{n}d_v2_cr``.
benchmarks/szp_bytes_by_section.py splits the same streams into their sections.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuszp_model  # noqa: E402

from perfscout.codecs.szp import format as F  # noqa: E402

REAL = {"vorticity.512_512": (512, 512), "vorticity.128_128_41": (41, 128, 128),
        "999x999.float": (999, 999)}
BOUNDS = (1e-2, 1e-3, 1e-4)


def smooth_slab(planes: int = 16, seed: int = 0) -> np.ndarray:
    """The first ``planes`` planes of gpu_codec.py's 256 x 1024 x 1024 smooth field."""
    nz, ny, nx = 256, 1024, 1024
    z = np.linspace(0, 1, nz, dtype=np.float32)[:planes, None, None]
    y = np.linspace(0, 1, ny, dtype=np.float32)[None, :, None]
    x = np.linspace(0, 1, nx, dtype=np.float32)[None, None, :]
    f = np.zeros((planes, ny, nx), np.float32)
    for k, (a, b, c) in enumerate([(1, 2, 3), (3, 1, 2), (5, 4, 1), (2, 7, 6)]):
        f += (np.sin(2 * math.pi * a * z + k) * np.cos(2 * math.pi * b * y)
              * np.sin(2 * math.pi * c * x + 0.3 * k) / (k + 1)).astype(np.float32)
    f += 1e-3 * np.random.default_rng(seed).standard_normal(f.shape, dtype=np.float32)
    return f


def gaussian_random_field(shape: tuple[int, int, int] = (64, 256, 256), seed: int = 0) -> np.ndarray:
    """White noise filtered to a k^-3 power spectrum, as gpu_codec.py draws it."""
    white = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    spec = np.fft.rfftn(white)
    kz = np.fft.fftfreq(shape[0])[:, None, None]
    ky = np.fft.fftfreq(shape[1])[None, :, None]
    kx = np.fft.rfftfreq(shape[2])[None, None, :]
    k2 = kz * kz + ky * ky + kx * kx
    k2[0, 0, 0] = 1.0
    f = np.fft.irfftn(spec * k2 ** -0.75, s=shape).astype(np.float32)
    return f / f.std()


def block_residuals(x: np.ndarray, qz: F.Quantizer, bnd: int) -> np.ndarray:
    """|Lorenzo residual| of every block, (nblocks, 32), as the reference encoder forms them."""
    view = F.view_shape(x.shape, bnd)
    grid = F.block_grid(view, bnd)
    bshape = F.BLOCK_SHAPES[bnd]
    pads = [(0, g * b - s) for g, b, s in zip(grid, bshape, view)]
    q, _bad = F.quantize(np.pad(x.reshape(view), pads, mode="edge"), qz)
    blocks = F._to_blocks(q, grid, bshape).astype(np.int64)
    return np.abs(F._lorenzo(blocks)).reshape(-1, F.BLOCK_ELEMS)


def rows_for(name: str, x: np.ndarray, native_bnd: int) -> list[dict]:
    rows = []
    for rel in BOUNDS:
        qz = F.resolve_quantizer(x.dtype, "rel", rel, F.finite_range(x))
        cuszp = cuszp_model.stream_bytes(x, qz.abs_bound)
        row = {"field": name, "shape": list(x.shape), "nbytes": x.nbytes, "rel": rel,
               "abs_bound": qz.abs_bound, "cuszp_outlier_model_bytes": cuszp,
               "cuszp_outlier_model_cr": x.nbytes / cuszp}
        for bnd in sorted({1, native_bnd}):
            stream = F.encode(x, "rel", rel, bnd)
            assert F.parse_header(stream).abs_bound == qz.abs_bound
            v2 = F.encode(x, "rel", rel, bnd, version=2)
            row[f"szp_{bnd}d_bytes"] = len(stream)
            row[f"szp_{bnd}d_cr"] = x.nbytes / len(stream)
            row[f"szp_{bnd}d_v2_cr"] = x.nbytes / len(v2)
        rows.append(row)
        cols = "  ".join(f"szp {b}-D {row[f'szp_{b}d_cr']:6.2f} (v2 {row[f'szp_{b}d_v2_cr']:6.2f})"
                         for b in sorted({1, native_bnd}))
        print(f"{name:24} {rel:.0e}  cuSZp-outlier (model) {row['cuszp_outlier_model_cr']:6.2f}  {cols}",
              flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--out", default="szp_cr_vs_cuszp.json")
    args = ap.parse_args()
    t0 = time.time()
    rows = []
    for name, shape in REAL.items():
        path = Path(args.data) / name
        if not path.is_file():
            print(f"(skipped {name}: not found in {args.data})")
            continue
        x = np.fromfile(path, dtype="<f4").reshape(shape)
        rows += rows_for(name, x, min(x.ndim, 3))
    rows += rows_for("smooth3d[:16] (of 256x1024x1024)", smooth_slab(), 3)
    rows += rows_for("grf3d 64x256x256", gaussian_random_field(), 3)
    Path(args.out).write_text(json.dumps({"rows": rows, "wall_s": time.time() - t0}, indent=1))


if __name__ == "__main__":
    main()
