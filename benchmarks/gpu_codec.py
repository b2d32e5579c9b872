"""szp-gpu throughput on one GPU, against the device-to-device copy measured in the same run.

    python3 benchmarks/gpu_codec.py bench --data DIR --out FILE.json [--gib 1.0] [--repeats 20]
    python3 benchmarks/gpu_codec.py bench --quick --out FILE.json   # smooth3d, REL 1e-3 only
    python3 benchmarks/gpu_codec.py autoshape --data DIR --out FILE.json   # block_ndim="auto"'s cost
    python3 benchmarks/gpu_codec.py ncu             # one compress + decompress, for ncu -k szp_

Fields (float32, >= --gib GiB each): a smooth multi-mode 3-D field with small noise, a
Gaussian random field (white noise filtered to a k^-3 power spectrum by FFT), and the real
fields of ../shared/data tiled periodically to size. Each at REL 1e-2, 1e-3, 1e-4, with the
codec's default ``block_ndim="auto"`` (the shape chosen from a sample on the device; the row
records the choice, what it cost, and each fixed shape's CR on the same field).

``autoshape`` measures the choice alone on the same fields: median synchronized wall time
of :func:`perfscout.codecs.szp.autoshape.choose_block_ndim` on the device array (the resolved
absolute bound given, as the compressor gives it after its range pass), the shape it picked
against every shape's full stream, and whether the NumPy reference picks the same on the
host copy.

Times are medians of CUDA-event intervals after one warm-up. "e2e" is the device-resident
call, one call between two events (compress: range pass for rel, fused kernel, size and
outlier read-back, header and pads; decompress: width scan and decode kernels, outlier
scatter, validation read-back), so it includes the host's Python time between launches.
"kernel" is the compress kernel alone (with the zeroing of its scratch), and for
decompress the width scan plus the decode kernel; each sample averages 10 back-to-back
launches between two events, so the host's launch work overlaps the GPU's. The copy is
timed the same way. GB/s count uncompressed bytes (1e9 bytes per GB); the copy counts
bytes read plus bytes written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import cupy as cp  # noqa: E402

from perfscout.codecs.szp import autoshape as A  # noqa: E402
from perfscout.codecs.szp import format as F  # noqa: E402
from perfscout.codecs.szp import gpu as G  # noqa: E402
from perfscout.codecs.szp.codec import SZPGpuCodec  # noqa: E402

REAL = {  # file -> (shape, tiles)
    "vorticity.512_512": ((512, 512), (32, 32)),
    "vorticity.128_128_41": ((41, 128, 128), (4, 10, 10)),
    "999x999.float": ((999, 999), (17, 17)),
}
BOUNDS = (1e-2, 1e-3, 1e-4)


def batched_events(fn, repeats: int, batch: int = 10, warmup: bool = True) -> list[float]:
    """Seconds per call from ``repeats`` batches of ``batch`` back-to-back calls between
    one pair of events: the host's launch work for a call overlaps the GPU's work on the
    one before, so a sample is GPU time (the kernels and the gaps of a busy queue), not
    the host's Python time that a single call's events also catch."""
    if warmup:
        fn()
    out = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b) / 1e3 / batch)
    return out


def events(fn, repeats: int) -> list[float]:
    """One call between each pair of events (end-to-end times, host work included)."""
    return batched_events(fn, repeats, batch=1, warmup=False)


def device_info() -> dict:
    info: dict = {"cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
                  "cuda_driver": cp.cuda.runtime.driverGetVersion(), "device": G.device_name()}
    try:
        import pynvml as N

        N.nvmlInit()
        h = N.nvmlDeviceGetHandleByIndex(cp.cuda.Device().id)
        info.update(
            nvml_name=N.nvmlDeviceGetName(h), driver=N.nvmlSystemGetDriverVersion(),
            memory_total_bytes=N.nvmlDeviceGetMemoryInfo(h).total,
            sm_clock_mhz=N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM),
            mem_clock_mhz=N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_MEM),
            sm_clock_max_mhz=N.nvmlDeviceGetMaxClockInfo(h, N.NVML_CLOCK_SM),
            mem_clock_max_mhz=N.nvmlDeviceGetMaxClockInfo(h, N.NVML_CLOCK_MEM),
            power_limit_w=N.nvmlDeviceGetPowerManagementLimit(h) / 1000,
            sm_count=cp.cuda.Device().attributes["MultiProcessorCount"],
        )
    except Exception as exc:  # NVML missing: say so, keep the rest
        info["nvml_error"] = str(exc)
    return info


def ftz_probe() -> dict:
    """Does float32 code built by CuPy flush subnormals? (1e-45 * 1 and 1e-45 - 0)"""
    src = r'''extern "C" __global__ void probe(const float* a, float* o) {
        o[0] = __fmul_rn(a[0], a[1]); o[1] = __fsub_rn(a[0], a[2]); o[2] = a[0] * a[1]; }'''
    out = {}
    for opts in [(), ("--ftz=false",), ("--std=c++17", "--fmad=false", "--ftz=false")]:
        a = cp.array([1e-45, 1.0, 0.0], cp.float32)
        o = cp.full(3, -1.0, cp.float32)
        cp.RawKernel(src, "probe", options=opts)((1,), (1,), (a, o))
        out[" ".join(opts) or "(no options)"] = o.get().tolist()
    return out


def copy_bandwidth(nbytes: int, repeats: int) -> dict:
    src = cp.random.random(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    stream = cp.cuda.get_current_stream()

    def run() -> None:
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, src.nbytes,
                                    cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr)

    t = statistics.median(batched_events(run, repeats))
    del src, dst
    return {"bytes": nbytes, "median_s": t, "GBps_read_plus_write": 2 * nbytes / t / 1e9}


def n_for(gib: float, shape_tail: tuple[int, ...]) -> int:
    return math.ceil(gib * 2**30 / 4 / math.prod(shape_tail))


def smooth_field(gib: float) -> cp.ndarray:
    ny, nx = 1024, 1024
    nz = n_for(gib, (ny, nx))
    z = cp.linspace(0, 1, nz, dtype=cp.float32)[:, None, None]
    y = cp.linspace(0, 1, ny, dtype=cp.float32)[None, :, None]
    x = cp.linspace(0, 1, nx, dtype=cp.float32)[None, None, :]
    f = cp.zeros((nz, ny, nx), cp.float32)
    for k, (a, b, c) in enumerate([(1, 2, 3), (3, 1, 2), (5, 4, 1), (2, 7, 6)]):
        f += cp.sin(2 * math.pi * a * z + k) * cp.cos(2 * math.pi * b * y) * cp.sin(2 * math.pi * c * x + 0.3 * k) / (k + 1)
    f += 1e-3 * cp.random.standard_normal(f.shape, dtype=cp.float32)
    return f


def gaussian_random_field(gib: float) -> cp.ndarray:
    ny, nx = 1024, 1024
    nz = n_for(gib, (ny, nx))
    white = cp.random.standard_normal((nz, ny, nx), dtype=cp.float32)
    spec = cp.fft.rfftn(white)
    del white
    kz = cp.fft.fftfreq(nz).astype(cp.float32)[:, None, None]
    ky = cp.fft.fftfreq(ny).astype(cp.float32)[None, :, None]
    kx = cp.fft.rfftfreq(nx).astype(cp.float32)[None, None, :]
    k2 = kz * kz + ky * ky + kx * kx
    k2[0, 0, 0] = 1.0
    spec *= k2 ** (-1.5 / 2 * 1.0)  # amplitude k^-1.5: power k^-3
    f = cp.fft.irfftn(spec, s=(nz, ny, nx)).astype(cp.float32)
    del spec
    return f / f.std()


def real_field(data: Path, name: str, gib: float) -> cp.ndarray | None:
    path = data / name
    if not path.is_file():
        return None
    shape, tiles = REAL[name]
    base = np.fromfile(path, dtype="<f4").reshape(shape)
    tiled = cp.tile(cp.asarray(base), tiles)
    assert tiled.nbytes >= gib * 2**30 * 0.99, (name, tiled.nbytes)
    return tiled


def measure(name: str, x: cp.ndarray, rel: float, bnd: int | str, repeats: int, copy_gbps: float) -> dict:
    """One row. ``bnd`` "auto": e2e compress is the codec's device call (the choice, then the
    compressor), and the kernel rows use the shape it chose."""
    nbytes = x.nbytes
    codec = SZPGpuCodec("rel", rel, block_ndim=bnd)
    ds = codec.compress_on_device(x)  # warm-up (and, for auto, the choice)
    choice = codec.last_choice
    comp = events(lambda: codec.compress_on_device(x), repeats)
    bnd = ds.header.block_ndim
    frange = G.device_range(x)
    qz = F.resolve_quantizer(x.dtype, "rel", rel, frange)
    geo = G.geometry(tuple(x.shape), bnd)
    scratch = G.new_scratch(geo)
    cap = G._outlier_cap(x.size)
    kern = batched_events(lambda: G._launch_compress(x, geo, qz, cap, scratch), repeats)
    rng_t = events(lambda: G.device_range(x), repeats)
    # where the end-to-end compress time goes besides the kernel and the range pass
    pieces = events(lambda: G._compress_pieces(x, geo, qz), repeats)
    p = G._compress_pieces(x, geo, qz)
    osort = events(lambda: G._sorted_outliers(p), repeats)
    del p
    ds = codec.compress_on_device(x)
    y = G.decompress_device(ds)
    dec = events(lambda: G.decompress_device(ds), repeats)
    h = ds.header
    lay = F.layout(h)
    out = cp.empty(h.shape, dtype=h.dtype)
    # the decode kernels as decompress_device launches them (a format 3 stream's corner
    # section included; a bare _launch_decompress without it would decode corner blocks wrong)
    dkern = batched_events(lambda: G.launch_decompress_stream(out, ds, scratch), repeats)
    err = float(cp.max(cp.abs(x.astype(cp.float64) - y.astype(cp.float64))))
    med = {k: statistics.median(v) for k, v in
           (("compress_e2e_s", comp), ("compress_kernel_s", kern), ("range_pass_s", rng_t),
            ("compress_pieces_s", pieces), ("outlier_sort_s", osort),
            ("decompress_e2e_s", dec), ("decompress_kernel_s", dkern))}
    gbps = {k.replace("_s", "_GBps"): nbytes / v / 1e9 for k, v in med.items()}
    row = {
        "field": name, "shape": list(x.shape), "block_ndim": bnd, "rel": rel,
        "abs_bound": h.abs_bound, "nbytes": nbytes, "compressed_bytes": lay.total,
        "ratio": nbytes / lay.total, "n_outliers": h.n_outliers, "max_abs_err": err,
        "bound_ok": err <= h.abs_bound, **med, **gbps,
        "compress_kernel_vs_copy": gbps["compress_kernel_GBps"] / copy_gbps,
        "decompress_kernel_vs_copy": gbps["decompress_kernel_GBps"] / copy_gbps,
        "compress_e2e_vs_copy": gbps["compress_e2e_GBps"] / copy_gbps,
        "decompress_e2e_vs_copy": gbps["decompress_e2e_GBps"] / copy_gbps,
        "samples": {"compress_e2e_s": comp, "compress_kernel_s": kern,
                    "decompress_e2e_s": dec, "decompress_kernel_s": dkern},
    }
    if choice is not None:  # what auto chose, what it cost, and every fixed shape's CR
        row["block_ndim_option"] = "auto"
        choice_s = events(lambda: A.choose_block_ndim(x, h.abs_bound), repeats)
        sizes = {b: F.layout(G.compress_device(x, "rel", rel, b).header).total for b in A.candidates(x.ndim)}
        row.update(choice_s=statistics.median(choice_s), choice_us=1e6 * statistics.median(choice_s),
                   sample_elems=choice.sample_elems, sample_fraction=choice.sample_elems / x.size,
                   sample_bytes={str(k): v for k, v in choice.sample_bytes.items()},
                   estimated_bytes={str(k): v for k, v in choice.estimated_bytes.items()},
                   ratio_by_block_ndim={str(b): nbytes / n for b, n in sizes.items()},
                   auto_vs_best=lay.total / min(sizes.values()))
        row["samples"]["choice_s"] = choice_s
    del y, out
    return row


def bench(args: argparse.Namespace) -> None:
    t0 = time.time()
    info = device_info()
    info["ftz_probe_1e-45"] = ftz_probe()
    print("ftz probe:", info["ftz_probe_1e-45"], flush=True)
    copy = copy_bandwidth(int(2 * 2**30), 20)
    print(f"device: {info.get('nvml_name', info['device'])}  driver {info.get('driver')}  "
          f"copy {copy['GBps_read_plus_write']:.0f} GB/s (read+write, 2 GiB, median of 20)", flush=True)
    fields = [("smooth3d", smooth_field), ("grf3d", gaussian_random_field)]
    rows = []
    for fname, make in fields:
        x = make(args.gib)
        for rel in BOUNDS:
            rows.append(measure(fname, x, rel, "auto", args.repeats, copy["GBps_read_plus_write"]))
            print(_line(rows[-1]), flush=True)
        del x
        cp.get_default_memory_pool().free_all_blocks()
    for name in REAL:
        x = real_field(Path(args.data), name, args.gib)
        if x is None:
            print(f"(skipped {name}: not found in {args.data})", flush=True)
            continue
        for rel in BOUNDS:
            rows.append(measure(f"{name} tiled{REAL[name][1]}", x, rel, "auto", args.repeats,
                                copy["GBps_read_plus_write"]))
            print(_line(rows[-1]), flush=True)
        del x
        cp.get_default_memory_pool().free_all_blocks()
    doc = {"device": info, "copy": copy, "rows": rows, "repeats": args.repeats,
           "wall_s": time.time() - t0, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0))}
    try:
        doc["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,"
                                            "clocks.mem,clocks.max.sm,power.limit,temperature.gpu",
                                            "--format=csv"], capture_output=True, text=True,
                                           timeout=30).stdout
    except Exception as exc:
        doc["nvidia_smi"] = f"unavailable: {exc}"
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print()
    print(table(doc))


def quick(args: argparse.Namespace) -> None:
    """Copy bandwidth, then one smooth field (>= --gib GiB) at REL 1e-3 with 3-D and 1-D
    blocks, and the same field cut to rows of 1021 (unaligned) with 2-D blocks: a short
    A/B check of a kernel change inside one device call."""
    t0 = time.time()
    info = device_info()
    copy = copy_bandwidth(int(2 * 2**30), 20)
    cgb = copy["GBps_read_plus_write"]
    print(f"device: {info.get('nvml_name', info['device'])}  copy {cgb:.0f} GB/s", flush=True)
    x = smooth_field(args.gib)
    rows = []
    for bnd in (3, 1):
        row = measure("smooth3d", x, 1e-3, bnd, args.repeats, cgb)
        mod = G._module("float32", bnd)
        for kn in ("szp_compress", "szp_decompress", "szp_width_scan"):
            fn = mod.get_function(kn)
            row[f"{kn}_regs"], row[f"{kn}_local_bytes"] = fn.num_regs, fn.local_size_bytes
        rows.append(row)
        print(f"regs {row['szp_compress_regs']}/{row['szp_decompress_regs']} local "
              f"{row['szp_compress_local_bytes']}/{row['szp_decompress_local_bytes']}  " + _line(row),
              flush=True)
    # rows of 1021 elements: not 16-byte aligned, so the kernels take their unaligned paths
    xo = cp.ascontiguousarray(x[..., :1021])
    del x
    rows.append(measure("smooth3d[..., :1021]", xo, 1e-3, 2, args.repeats, cgb))
    print(_line(rows[-1]), flush=True)
    doc = {"device": info, "copy": copy, "rows": rows, "repeats": args.repeats, "quick": True,
           "nvrtc_defines": os.environ.get("SZP_NVRTC_DEFINES", ""),
           "wall_s": time.time() - t0, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0))}
    Path(args.out).write_text(json.dumps(doc, indent=1))
    print()
    print(table(doc))


def _line(r: dict) -> str:
    auto = (f"auto->{r['block_ndim']} ({r['choice_us']:.0f} us, {r['auto_vs_best']:.3f} of best) "
            if "choice_us" in r else "")
    return (f"{r['field']:<34} b{r['block_ndim']} {auto}rel {r['rel']:.0e}  CR {r['ratio']:7.2f}  "
            f"comp {r['compress_kernel_GBps']:6.0f} ({r['compress_e2e_GBps']:6.0f} e2e)  "
            f"decomp {r['decompress_kernel_GBps']:6.0f} ({r['decompress_e2e_GBps']:6.0f} e2e) GB/s  "
            f"maxerr/eb {r['max_abs_err'] / r['abs_bound']:.3f} out {r['n_outliers']}  "
            f"ms: comp e2e {1e3 * r['compress_e2e_s']:.3f} = range {1e3 * r['range_pass_s']:.3f} + "
            f"kernel&readback {1e3 * r['compress_pieces_s']:.3f} (kernel {1e3 * r['compress_kernel_s']:.3f}) "
            f"+ sort {1e3 * r['outlier_sort_s']:.3f} + rest")


def table(doc: dict) -> str:
    cgb = doc["copy"]["GBps_read_plus_write"]
    lines = [f"copy (D2D, read+write): {cgb:.0f} GB/s",
             "| field | blocks | REL | CR | compress kernel GB/s (x copy) | compress e2e GB/s | "
             "decompress kernel GB/s (x copy) | decompress e2e GB/s | max err / eb |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        lines.append(
            f"| {r['field']} | {r['block_ndim']}-D{' (auto)' if 'choice_us' in r else ''} | {r['rel']:.0e} | "
            f"{r['ratio']:.2f} | "
            f"{r['compress_kernel_GBps']:.0f} ({r['compress_kernel_vs_copy']:.2f}) | "
            f"{r['compress_e2e_GBps']:.0f} | {r['decompress_kernel_GBps']:.0f} "
            f"({r['decompress_kernel_vs_copy']:.2f}) | {r['decompress_e2e_GBps']:.0f} | "
            f"{r['max_abs_err'] / r['abs_bound']:.3f} |")
    return "\n".join(lines)


def autoshape(args: argparse.Namespace) -> None:
    """The cost of block_ndim="auto"'s choice on >= --gib GiB device fields, and how good it is."""
    t0 = time.time()
    info = device_info()
    fields = [("smooth3d", lambda: smooth_field(args.gib)), ("grf3d", lambda: gaussian_random_field(args.gib))]
    fields += [(f"{n} tiled{REAL[n][1]}", lambda n=n: real_field(Path(args.data), n, args.gib)) for n in REAL]
    rows = []
    for fname, make in fields:
        x = make()
        if x is None:
            print(f"(skipped {fname}: not found in {args.data})", flush=True)
            continue
        host = x.get()
        for rel in BOUNDS:
            eb = A.resolved_abs_bound(x, "rel", rel)
            A.choose_block_ndim(x, eb)  # warm-up: kernel builds for every shape
            runs = [A.choose_block_ndim(x, eb) for _ in range(args.repeats)]
            ev = events(lambda: A.choose_block_ndim(x, eb), args.repeats)
            c = runs[0]
            sizes = {b: F.layout(G.compress_device(x, "rel", rel, b).header).total for b in A.candidates(x.ndim)}
            ref = A.choose_block_ndim(host, eb, version=getattr(G, "WRITE_VERSION", None))
            row = {"field": fname, "shape": list(x.shape), "rel": rel, "abs_bound": eb, "block_ndim": c.block_ndim,
                   "choice_wall_us_median": 1e6 * statistics.median(r.seconds for r in runs),
                   "choice_event_us_median": 1e6 * statistics.median(ev),
                   "choice_wall_us": [1e6 * r.seconds for r in runs],
                   "sample_elems": c.sample_elems, "sample_fraction": c.sample_elems / x.size,
                   "sample_bytes": {str(k): v for k, v in c.sample_bytes.items()},
                   "estimated_bytes": {str(k): v for k, v in c.estimated_bytes.items()},
                   "stream_bytes": {str(k): v for k, v in sizes.items()},
                   "ratio_by_block_ndim": {str(b): x.nbytes / n for b, n in sizes.items()},
                   "auto_vs_best": sizes[c.block_ndim] / min(sizes.values()),
                   "reference_block_ndim": ref.block_ndim,
                   "reference_agrees": (ref.block_ndim, ref.sample_bytes) == (c.block_ndim, c.sample_bytes),
                   "reference_host_s": ref.seconds}
            rows.append(row)
            print(f"{fname:<34} rel {rel:.0e} auto->{c.block_ndim} in {row['choice_wall_us_median']:.0f} us "
                  f"(events {row['choice_event_us_median']:.0f}), sample {100 * row['sample_fraction']:.2f} %, "
                  f"CR by shape {', '.join(f'{k}-D {v:.2f}' for k, v in row['ratio_by_block_ndim'].items())}, "
                  f"auto/best {row['auto_vs_best']:.4f}, reference agrees {row['reference_agrees']}", flush=True)
        x = host = None  # free the field before the next one
        cp.get_default_memory_pool().free_all_blocks()
    doc = {"device": info, "rows": rows, "repeats": args.repeats, "wall_s": time.time() - t0,
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
           "sampling": {"fraction": A.SAMPLE_FRACTION, "min_elems": A.MIN_SAMPLE_ELEMS,
                        "max_elems": A.MAX_SAMPLE_ELEMS, "whole_elems": A.WHOLE_ELEMS}}
    Path(args.out).write_text(json.dumps(doc, indent=1))


def ncu_target(args: argparse.Namespace) -> None:
    """One compress and one decompress of a 1 GiB smooth field (abs bound: no range pass)."""
    x = smooth_field(args.gib)
    qz = F.resolve_quantizer(x.dtype, "abs", 1e-3 * float(x.max() - x.min()), None)
    ds = G.compress_device(x, "abs", qz.abs_bound, 3)
    G.decompress_device(ds)
    cp.cuda.Device().synchronize()
    print("ncu target done", ds.header.payload_words, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["bench", "autoshape", "ncu"])
    ap.add_argument("--data", default=".device/data")
    ap.add_argument("--out", default="szp_gpu_bench.json")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--quick", action="store_true",
                    help="bench only the smooth field at REL 1e-3 (3-D and 1-D blocks) and the copy")
    args = ap.parse_args()
    if args.what == "ncu":
        ncu_target(args)
    elif args.what == "autoshape":
        autoshape(args)
    else:
        quick(args) if args.quick else bench(args)


if __name__ == "__main__":
    main()
