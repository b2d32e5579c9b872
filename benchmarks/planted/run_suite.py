"""Launch the planted kernels with CuPy (run on the GPU machine).

    python3 run_suite.py --mode profile            # each pk_ kernel exactly once (under ncu)
    python3 run_suite.py --mode time --out T.json  # CUDA-event medians + host launch timing

``profile`` mode launches every planted kernel and every fixed variant once, in suite
order, with no warm-up (ncu replays each launch itself). ``time`` mode warms each launch
up, then times it with CUDA events (median of 20), and measures launch overhead for
``pk_tiny_launch`` from the host: wall time over 2000 back-to-back launches against the
GPU time those launches account for. ncu alone cannot see the gaps between launches.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from suite import CASES  # noqa: E402

SMS = 132  # overwritten from the device at start
TINY_LAUNCHES = 2000


def _module() -> cp.RawModule:
    return cp.RawModule(code=(HERE / "kernels.cu").read_text(), options=("-std=c++17",))


def build_launches(mod: cp.RawModule) -> dict[str, callable]:
    """name -> zero-argument callable that launches that kernel once (buffers bound)."""
    rng = cp.random.default_rng(1234)
    f32 = lambda n, lo=-1.0, hi=1.0: rng.random(n, dtype=cp.float32) * cp.float32(hi - lo) + cp.float32(lo)  # noqa: E731
    L: dict[str, callable] = {}

    functions: dict[str, object] = {}

    def k(name):  # cached: the launch-overhead loop must time launches, not look-ups
        if name not in functions:
            functions[name] = mod.get_function(name)
        return functions[name]

    # controls
    n = 1 << 25
    xc, yc = f32(n), cp.empty(n, cp.float32)
    L["pk_ctl_copy_float4"] = lambda: k("pk_ctl_copy_float4")(((n // 4) // 256,), (256,), (xc, yc, np.int64(n // 4)))
    nf = SMS * 2048 * 4
    xf, yf = f32(nf), cp.empty(nf, cp.float32)
    L["pk_ctl_fma_ilp"] = lambda: k("pk_ctl_fma_ilp")((nf // 256,), (256,), (xf, yf, np.int32(nf), np.int32(512)))

    # dram
    nd = 1 << 24
    xd, yd = rng.random(nd) * 2.0 - 1.0, cp.empty(nd, cp.float64)
    xd32, yd32 = xd.astype(cp.float32), cp.empty(nd, cp.float32)
    L["pk_dram_fp64_scale"] = lambda: k("pk_dram_fp64_scale")((nd // 256,), (256,), (xd, yd, np.int64(nd)))
    L["pk_dram_fp64_scale_fixed"] = lambda: k("pk_dram_fp64_scale_fixed")((nd // 256,), (256,), (xd32, yd32, np.int64(nd)))

    # stencils (L2, L1)
    ns = 1 << 23
    xs, ys = f32(ns), cp.empty(ns, cp.float32)
    L["pk_l2_stencil_ldcg"] = lambda: k("pk_l2_stencil_ldcg")((ns // 256,), (256,), (xs, ys, np.int32(ns)))
    L["pk_l2_stencil_ldcg_fixed"] = lambda: k("pk_l2_stencil_ldcg_fixed")((ns // 256,), (256,), (xs, ys, np.int32(ns)))
    L["pk_l1_stencil"] = lambda: k("pk_l1_stencil")((ns // 256,), (256,), (xs, ys, np.int32(ns)))
    L["pk_l1_stencil_fixed"] = lambda: k("pk_l1_stencil_fixed")((ns // 8 // 256,), (256,), (xs, ys, np.int32(ns)))

    # compute
    nm = 1 << 21
    xm, ym = f32(nm), cp.empty(nm, cp.float32)
    for name in ("pk_compute_libm", "pk_compute_libm_fixed"):
        L[name] = (lambda nm_=name: k(nm_)((nm // 256,), (256,), (xm, ym, np.int32(nm), np.int32(32))))

    # latency: one random cycle through 4M nodes (16 MB, L2-resident)
    nn, steps, grid = 1 << 22, 1024, SMS * 8
    warps = grid * 256 // 32
    order = np.random.default_rng(7).permutation(nn).astype(np.int32)
    nxt = np.empty(nn, np.int32)
    nxt[order] = np.roll(order, -1)
    pos = (np.arange(warps)[:, None] * steps + np.arange(4)[None, :] * (steps // 4)) % nn
    starts = cp.asarray(order[pos].reshape(-1))
    nxt_d, out_i = cp.asarray(nxt), cp.empty(grid * 256, cp.int32)
    for name in ("pk_latency_chase", "pk_latency_chase_fixed"):
        L[name] = (lambda nm_=name: k(nm_)((grid,), (256,), (nxt_d, starts, out_i, np.int32(steps))))

    # uncoalesced transpose
    R = C = 4096
    xt, yt = f32(R * C), cp.empty(R * C, cp.float32)
    L["pk_uncoalesced_transpose"] = lambda: k("pk_uncoalesced_transpose")((R // 256, C), (256,), (xt, yt, np.int32(R), np.int32(C)))
    L["pk_uncoalesced_transpose_fixed"] = lambda: k("pk_uncoalesced_transpose_fixed")((C // 32, R // 32), (32, 8), (xt, yt, np.int32(R), np.int32(C)))

    # shared bank conflicts
    nb = 1 << 24
    xb, yb = f32(nb), cp.empty(nb, cp.float32)
    for name in ("pk_smem_conflict", "pk_smem_conflict_fixed"):
        L[name] = (lambda nm_=name: k(nm_)((nb // 1024,), (32, 32), (xb, yb, np.int64(nb))))

    # divergence
    nv = 1 << 21
    xv, yv = f32(nv), cp.empty(nv, cp.float32)
    for name in ("pk_divergent_branch", "pk_divergent_branch_fixed"):
        L[name] = (lambda nm_=name: k(nm_)((nv // 256,), (256,), (xv, yv, np.int32(nv), np.int32(256))))

    # occupancy family: latency-limited streaming sums over 64 MB
    no = 1 << 24
    xo, yo = f32(no), cp.empty(SMS * 8 * 256 * 8, cp.float32)
    g = SMS * 8
    L["pk_occ_registers"] = lambda: k("pk_occ_registers")((g,), (256,), (xo, yo, np.int64(no)))
    L["pk_occ_registers_fixed"] = lambda: k("pk_occ_registers_fixed")((g,), (256,), (xo, yo, np.int64(no)))
    big, small = 100 * 1024, 4 * 1024
    # A launch asking for > 48 KiB of dynamic shared memory must raise the kernel's cap first.
    ksm = cp.RawKernel((HERE / "kernels.cu").read_text(), "pk_occ_smem", options=("-std=c++17",))
    ksm.max_dynamic_shared_size_bytes = big
    ksm_fixed = k("pk_occ_smem_fixed")
    L["pk_occ_smem"] = lambda: ksm((g,), (256,), (xo, yo, np.int64(no)), shared_mem=big)
    L["pk_occ_smem_fixed"] = lambda: ksm_fixed((g,), (256,), (xo, yo, np.int64(no)), shared_mem=small)
    L["pk_occ_block"] = lambda: k("pk_occ_block")((g * 8,), (32,), (xo, yo, np.int64(no)))
    L["pk_occ_block_fixed"] = lambda: k("pk_occ_block_fixed")((g,), (256,), (xo, yo, np.int64(no)))

    # small grid
    ng = 1 << 22
    L["pk_small_grid"] = lambda: k("pk_small_grid")((8,), (256,), (xo, yo, np.int64(ng)))
    L["pk_small_grid_fixed"] = lambda: k("pk_small_grid_fixed")((SMS * 4,), (256,), (xo, yo, np.int64(ng)))

    # tail effect: 2 blocks of 1024 per SM fit, grid = 2*SMS + 26 (~1.1 waves)
    gt = 2 * SMS + 26
    xw, yw = f32(gt * 8 * 1024), cp.empty(gt * 8 * 1024, cp.float32)
    L["pk_tail_wave"] = lambda: k("pk_tail_wave")((gt,), (1024,), (xw, yw, np.int32(16384)))
    L["pk_tail_wave_fixed"] = lambda: k("pk_tail_wave_fixed")((gt * 8,), (1024,), (xw, yw, np.int32(2048)))

    # local memory
    nl = 1 << 21
    xl, yl = f32(nl), cp.empty(nl, cp.float32)
    for name in ("pk_local_array", "pk_local_array_fixed"):
        L[name] = (lambda nm_=name: k(nm_)((nl // 256,), (256,), (xl, yl, np.int32(nl))))

    # atomics
    na = 1 << 21
    xa, acc = f32(na, 0.0, 1e-3), cp.zeros(1, cp.float32)
    for name in ("pk_atomic_hot", "pk_atomic_hot_fixed"):
        L[name] = (lambda nm_=name: k(nm_)((na // 256,), (256,), (xa, acc, np.int32(na))))

    # fp64
    n64 = 1 << 20
    x64, y64 = rng.random(n64) * 2.0 - 1.0, cp.empty(n64, cp.float64)
    x64f, y64f = x64.astype(cp.float32), cp.empty(n64, cp.float32)
    L["pk_fp64_poly"] = lambda: k("pk_fp64_poly")((n64 // 256,), (256,), (x64, y64, np.int32(n64), np.int32(512)))
    L["pk_fp64_poly_fixed"] = lambda: k("pk_fp64_poly_fixed")((n64 // 256,), (256,), (x64f, y64f, np.int32(n64), np.int32(512)))

    # barriers
    gb = SMS * 2 * 4
    nbar = gb * 1024
    xbr, ybr = f32(nbar), cp.empty(nbar, cp.float32)
    for name in ("pk_barrier_sync", "pk_barrier_sync_fixed"):
        L[name] = (lambda nm_=name: k(nm_)((gb,), (1024,), (xbr, ybr, np.int32(nbar), np.int32(256))))

    # launch overhead
    ytiny = f32(256 * TINY_LAUNCHES)
    L["pk_tiny_launch"] = lambda: k("pk_tiny_launch")((1,), (256,), (ytiny, np.int32(256)))
    L["pk_tiny_launch_fixed"] = lambda: k("pk_tiny_launch_fixed")((TINY_LAUNCHES,), (256,), (ytiny, np.int32(256), np.int32(TINY_LAUNCHES)))

    # narrow accesses
    nu = 1 << 26
    xu = (rng.random(nu, dtype=cp.float32) * 255).astype(cp.uint8)
    yu = cp.empty(nu, cp.uint8)
    L["pk_narrow_u8"] = lambda: k("pk_narrow_u8")((nu // 256,), (256,), (xu, yu, np.int64(nu)))
    L["pk_narrow_u8_fixed"] = lambda: k("pk_narrow_u8_fixed")((nu // 16 // 256,), (256,), (xu, yu, np.int64(nu // 16)))
    return L


def _order() -> list[str]:
    names: list[str] = []
    for c in CASES:
        names.append(c.name)
        if c.fixed:
            names.append(c.fixed)
    return names


def _event_median_ms(fn, repeats: int = 20, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return statistics.median(times)


def _launch_overhead(launch_one, launch_batched) -> dict:
    """Host wall time of TINY_LAUNCHES launches vs the GPU time they account for."""
    for _ in range(50):
        launch_one()
    cp.cuda.Device().synchronize()
    a, b = cp.cuda.Event(), cp.cuda.Event()
    t0 = time.perf_counter()
    a.record()
    for _ in range(TINY_LAUNCHES):
        launch_one()
    b.record()
    b.synchronize()
    wall = time.perf_counter() - t0
    single_ms = _event_median_ms(launch_one, repeats=50)
    batched_ms = _event_median_ms(launch_batched, repeats=20)
    t0 = time.perf_counter()
    launch_batched()
    cp.cuda.Device().synchronize()
    batched_wall = time.perf_counter() - t0
    return {
        "launches": TINY_LAUNCHES,
        "host_wall_s": wall,
        "host_per_launch_us": wall / TINY_LAUNCHES * 1e6,
        "events_total_ms": cp.cuda.get_elapsed_time(a, b),
        "single_launch_event_ms": single_ms,
        "batched_event_ms": batched_ms,
        "batched_wall_s": batched_wall,
    }


def main() -> None:
    global SMS
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("profile", "time"), required=True)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    dev = cp.cuda.Device()
    SMS = dev.attributes["MultiProcessorCount"]
    mod = _module()
    launches = build_launches(mod)
    cp.cuda.Device().synchronize()
    names = _order()
    if args.mode == "profile":
        for name in names:
            launches[name]()
            cp.cuda.Device().synchronize()
            print("launched", name, flush=True)
        return
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    result = {
        "device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "sm_count": SMS,
        "compute_capability": f"{props['major']}.{props['minor']}",
        "cupy": cp.__version__,
        "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
        "driver": cp.cuda.runtime.driverGetVersion(),
        "host": platform.node(),
        "method": "CUDA events around one launch, median of 20 after 3 warm-ups",
        "kernels_ms": {},
    }
    for name in names:
        result["kernels_ms"][name] = _event_median_ms(launches[name])
        print(f"{name:34s} {result['kernels_ms'][name]:.4f} ms", flush=True)
    result["launch_overhead"] = {
        "pk_tiny_launch": _launch_overhead(launches["pk_tiny_launch"], launches["pk_tiny_launch_fixed"])
    }
    print(json.dumps(result["launch_overhead"], indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
