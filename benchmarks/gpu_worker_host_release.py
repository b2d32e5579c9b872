"""Does a GPU evaluation in a long-lived process let go of the caller's host field?

One fresh process per run: optionally the GPU worker's start-up (``sweep.gpuworker._preload``:
its imports and every lazily loaded module loaded at once), then one in-process CUDA
evaluation of a 64 MiB float32 field as the GPU worker runs a task, then whether the field is
still alive once the evaluation and every reference of the caller's are gone (a weak
reference, after ``gc.collect()``), and what CuPy's pool still holds.

    python3 benchmarks/gpu_worker_host_release.py [--no-preload] [--codec szp-gpu]

Prints one JSON line. Needs CUDA and CuPy (the GPU machine).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import weakref
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-preload", action="store_true", help="skip the GPU worker's start-up (the hazard)")
    ap.add_argument("--codec", default="szp-gpu")
    args = ap.parse_args()
    import numpy as np

    out: dict = {"preload": not args.no_preload, "codec": args.codec}
    if not args.no_preload:
        from perfscout.sweep import gpuworker

        done, missing, context = gpuworker._preload()
        out.update(preloaded=len(done), not_loaded=missing, cuda_context=context)
    import cupy as cp

    from perfscout.tools.evaluate import evaluate_full

    z, y, x = np.ogrid[0:64, 0:512, 0:512]
    field = (np.sin(x / 37.0) * np.cos(y / 23.0) + 0.3 * np.sin((x + y + z) / 11.0)).astype(np.float32)
    alive = weakref.ref(field)
    ev = evaluate_full(field, args.codec, "abs", 1e-3, device="cuda", repeats=1, isolate=False,
                       keep_reconstruction=False)
    out.update(status=ev.result.status, bound_ok=ev.result.bound_ok, device_name=ev.result.device_name)
    del ev, field
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    out["host_field_alive_after"] = alive() is not None
    out["cupy_pool_used_bytes"] = int(cp.get_default_memory_pool().used_bytes())
    lazy = [name for name, m in sys.modules.items() if type(m).__name__ == "_LazyModule"]
    out["lazy_modules_left"] = lazy
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
