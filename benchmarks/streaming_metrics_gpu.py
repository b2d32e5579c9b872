"""The streaming metric pass on CuPy arrays: verified on the GPU, only scalars come back.

For float32 fields of 64 MiB and 1 GiB resident on the device (a smooth field made on
the host by ``synthetic`` and copied once, and a reconstruction with a uniform error of
1e-3 of its range), times ``stream_quality_metrics`` on the device arrays (the pass
syncs for its scalars, so wall time is the pass), the same pass on the host copies
(NumPy) for comparison, and the device-to-host copy the GPU path avoids; checks that
every figure agrees with the NumPy result (relative 1e-9; counts exactly) and records
the device memory pool's peak above the two inputs. Prints and writes JSON.

    python3 benchmarks/streaming_metrics_gpu.py [--sizes 64,1024] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfscout.analysis.streaming import stream_quality_metrics  # noqa: E402

SHAPES = {64: (256, 256, 256), 256: (256, 512, 512), 1024: (1024, 512, 512)}


def _field(shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    axes = np.meshgrid(*[np.linspace(0, 2 * np.pi, n, dtype=np.float32) for n in shape], indexing="ij",
                       sparse=True)
    x = np.zeros(shape, dtype=np.float32)
    for k, a in enumerate(axes):
        x += np.cos((k + 1) * a + 0.3 * k).astype(np.float32)
    y = x + rng.uniform(-1e-3, 1e-3, size=shape).astype(np.float32) * float(x.max() - x.min())
    return x, y.astype(np.float32)


def _agree(gpu: dict, cpu: dict) -> list[str]:
    bad = []
    for key, value in cpu.items():
        got = gpu[key]
        if key == "err_hist":
            if got["counts"] != value["counts"] or got["edges"] != value["edges"]:
                bad.append("err_hist counts/edges")
            for q, v in value["quantiles"].items():
                if not math.isclose(got["quantiles"][q], v, rel_tol=1e-9, abs_tol=1e-12):
                    bad.append(f"quantile {q}")
        elif isinstance(value, float):
            if not (math.isclose(got, value, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(got) and math.isnan(value))):
                bad.append(f"{key}: {got} vs {value}")
        elif got != value:
            bad.append(f"{key}: {got} vs {value}")
    return bad


def main() -> None:
    import cupy

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,1024")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    pool = cupy.get_default_memory_pool()
    dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    doc = {"device": dev, "cupy": cupy.__version__, "numpy": np.__version__, "sizes": {}}
    for mib in (int(s) for s in args.sizes.split(",")):
        x, y = _field(SHAPES[mib])
        xd, yd = cupy.asarray(x), cupy.asarray(y)
        cupy.cuda.Device().synchronize()
        held = pool.used_bytes()
        stream_quality_metrics(xd, yd, 1000)  # warm-up: kernels compiled and cached
        pool_peak = 0
        walls = []
        for _ in range(args.repeats):
            pool.free_all_blocks()
            t0 = time.perf_counter()
            gpu = stream_quality_metrics(xd, yd, 1000)
            walls.append(time.perf_counter() - t0)
            pool_peak = max(pool_peak, pool.total_bytes())
        t0 = time.perf_counter()
        cpu = stream_quality_metrics(x, y, 1000)
        host_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        yd.get()
        d2h_s = time.perf_counter() - t0
        bad = _agree(gpu, cpu)
        entry = {"shape": list(x.shape), "nbytes": int(x.nbytes), "gpu_pass_s": min(walls),
                 "gpu_walls": walls, "host_pass_s": host_s, "d2h_one_array_s": d2h_s,
                 "pool_peak_over_input": (pool_peak - held) / x.nbytes if pool_peak > held else 0.0,
                 "agrees_with_numpy": not bad, "disagreements": bad, "ssim": gpu["ssim"], "psnr": gpu["psnr"]}
        doc["sizes"][str(mib)] = entry
        print(f"[{mib} MiB f32 on {dev}] GPU pass {min(walls):.3f} s (host NumPy {host_s:.2f} s; copying one "
              f"array back would take {d2h_s:.3f} s); pool above the inputs {entry['pool_peak_over_input']:.2f}x; "
              f"agrees with NumPy: {not bad} {bad[:3]}")
        del xd, yd
        pool.free_all_blocks()
    if args.out:
        args.out.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
