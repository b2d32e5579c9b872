"""szp-gpu against cuSZp, fairly, in one process on one GPU (issue #29).

    python3 benchmarks/gpu_fair.py bench --data DIR --out FILE.json [--gib 1] [--repeats 7]
            [--timer libcuszp_timer.so] [--fields a,b] [--bounds 1e-2,1e-3]
    python3 benchmarks/gpu_fair.py table --out FILE.json     # the Markdown summary of a run
    python3 benchmarks/gpu_fair.py ncu --data DIR            # the launches benchmarks/gpu_fair_device.sh profiles

What is fair here, per field and REL bound:
- every codec gets the same device-resident float32 bytes and the same absolute bound
  (REL x the field's range, resolved once; cuSZp takes it as a C float, as its API does);
- every time is a median of ``--repeats`` samples after a warm-up, CUDA events on one stream;
- the device-to-device copy of the same bytes is measured in the same run (bytes read plus
  written; "x copy" = uncompressed bytes per second over it, as in gpu_peers.py);
- cuSZp in every mode its build has (fixed, plain, outlier) x every processing dimension
  it can run on the field (1-D always; 2-D/3-D when the array has the axes and rows are a
  multiple of 4). Its decompress is timed into an output zeroed ONCE outside the timing
  (cuSZp leaves all-zero blocks unwritten, so the zeros are needed for correctness, not
  per call: cuSZp's own tests decode repeatedly into one buffer), and, labelled
  ``decompress_memset_e2e``, with the 1 GiB ``cp.zeros`` inside every call (the backend's
  behaviour before this issue). Its kernel-only times come from ``--timer``
  (benchmarks/cuszp_kernel_timer.cu): the same kernels, look-back arrays zeroed outside the
  events; the timer's stream and decode are checked byte for byte against the API's;
- szp-gpu with its block shape chosen automatically (the choice inside the compress time)
  and with each shape given; kernel-only times as gpu_peers.py takes them (10 back-to-back
  launches between two events);
- every decode is checked element by element against the bound on the device
  (perfscout.tools.gpu_eval.verify_on_device: ``n_beyond`` elements beyond the bound,
  ``n_violations`` of them beyond float32's rounding slack too).

Fields (>= --gib GiB each): ``smooth3d`` (benchmarks/gpu_codec.py's); the four real fields
of DIR tiled periodically; two far from zero with a large range: ``temperature_K`` (280 +/-
30 K, smooth, 0.03 K noise) and ``geopotential`` (5e4 +/- 3e4 m^2/s^2, smooth, 3 m^2/s^2 noise);
and ``vorticity.512_512+50R`` (the real field tiled and shifted by 50x its range).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

REAL = {  # file -> (shape, tiles); each tiled to about 1 GiB
    "vorticity.512_512": ((512, 512), (32, 32)),
    "vorticity.128_128_41": ((41, 128, 128), (4, 10, 10)),
    "999x999.float": ((999, 999), (17, 17)),
    "const32x32x59.float": ((59, 32, 32), (4, 33, 33)),
}
BOUNDS = (1e-2, 1e-3, 1e-4, 1e-5)
ENCODINGS = ("fixed", "plain", "outlier")
MODE_CODE = {"fixed": 0, "plain": 1, "outlier": 2}
FIELDS = ("smooth3d", *(f"{n}" for n in REAL), "temperature_K", "geopotential", "vorticity.512_512+50R")


# -- fields -------------------------------------------------------------------------------
def _far_field(gib: float, base: float, amp: float, noise: float, seed: int) -> Any:
    """A smooth 3-D field base + amp * f (f in [-1, 1]: a large-scale meridional shape and
    two smaller waves) + amp * noise * N(0, 1), float32, on the device."""
    import cupy as cp
    from gpu_codec import n_for

    ny, nx = 1024, 1024
    nz = n_for(gib, (ny, nx))
    cp.random.seed(seed)
    z = cp.linspace(0, 1, nz, dtype=cp.float32)[:, None, None]
    y = cp.linspace(0, 1, ny, dtype=cp.float32)[None, :, None]
    x = cp.linspace(0, 1, nx, dtype=cp.float32)[None, None, :]
    f = 0.6 * cp.cos(math.pi * y) * (1 - 0.3 * z) + 0.3 * cp.sin(2 * math.pi * (2 * x + z)) * cp.cos(6 * math.pi * y)
    f = f + 0.1 * cp.sin(2 * math.pi * (5 * x + 4 * y + 2 * z))
    f = f.astype(cp.float32)
    f /= cp.abs(f).max()
    out = (base + amp * f).astype(cp.float32)
    out += (amp * noise) * cp.random.standard_normal(out.shape, dtype=cp.float32)
    return out


def make_field(name: str, data: Path, gib: float) -> Any:
    import cupy as cp
    from gpu_codec import smooth_field

    if name == "smooth3d":
        cp.random.seed(0)
        return smooth_field(gib)
    if name == "temperature_K":
        return _far_field(gib, 280.0, 30.0, 1e-3, 1)
    if name == "geopotential":
        return _far_field(gib, 5e4, 3e4, 1e-4, 2)
    real = name.removesuffix("+50R")
    shape, tiles = REAL[real]
    base = np.fromfile(data / real, "<f4").reshape(shape)
    x = cp.tile(cp.asarray(base), tiles)
    if name.endswith("+50R"):
        x += np.float32(50.0 * float(base.max() - base.min()))
    return cp.ascontiguousarray(x)


# -- timing -------------------------------------------------------------------------------
def _events(fn, repeats: int, batch: int = 1, before=None) -> list[float]:
    """Seconds per call: ``repeats`` samples of ``batch`` calls between two CUDA events on
    the work stream (``before`` runs ahead of each sample, outside the events)."""
    import cupy as cp

    from perfscout.codecs.gpu_peers import device as D

    s = D.work_stream()
    out = []
    for _ in range(repeats):
        if before is not None:
            before()
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(s)
        for _ in range(batch):
            fn()
        b.record(s)
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b) / 1e3 / batch)
    return out


def _timed_calls(fn, repeats: int) -> tuple[list[float], Any]:
    """One call between each pair of events; the samples and the last call's result (the
    result before is dropped ahead of each call, so a pool can reuse its memory)."""
    import cupy as cp

    from perfscout.codecs.gpu_peers import device as D

    s, out, result = D.work_stream(), [], None
    for _ in range(repeats):
        result = None
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(s)
        result = fn()
        b.record(s)
        b.synchronize()
        out.append(cp.cuda.get_elapsed_time(a, b) / 1e3)
    return out, result


def _med(samples: list[float]) -> float:
    return statistics.median(samples)


def copy_roof(x: Any, repeats: int) -> dict:
    import cupy as cp

    from perfscout.codecs.gpu_peers import device as D

    dst = cp.empty_like(x)
    s = D.work_stream()

    def copy() -> None:
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, x.data.ptr, x.nbytes, cp.cuda.runtime.memcpyDeviceToDevice, s.ptr)

    copy()
    samples = _events(copy, repeats, batch=10)
    t = _med(samples)
    return {"copy_s": t, "copy_GBps": 2 * x.nbytes / t / 1e9, "copy_samples_s": samples}


def _check(x: Any, y: Any, eb: float) -> dict:
    from perfscout.tools.gpu_eval import verify_on_device

    c = verify_on_device(x, y, eb)
    import cupy as cp

    err = float(cp.max(cp.abs(y.astype(cp.float64) - x.astype(cp.float64))))
    return {"status": c.status, "n_beyond": int(c.n_beyond), "n_violations": int(c.n_violations),
            "max_abs_err": err, "max_err_over_bound": err / eb if eb else None}


# -- cuSZp --------------------------------------------------------------------------------
class KernelTimer:
    """benchmarks/cuszp_kernel_timer.cu, loaded with ctypes."""

    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path)
        f = self.lib.cuszp_time_kernel
        f.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                      ctypes.c_size_t, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_float, ctypes.c_int,
                      ctypes.c_void_p, ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_uint)]
        f.restype = ctypes.c_int

    def time(self, compress: bool, mode: str, dim: int, x: Any, cmp: Any, out: Any, dims: tuple[int, int, int],
             eb32: float, repeats: int) -> tuple[list[float], int]:
        from perfscout.codecs.gpu_peers import device as D

        ms = (ctypes.c_float * repeats)()
        last = ctypes.c_uint(0)
        rc = self.lib.cuszp_time_kernel(int(compress), MODE_CODE[mode], dim, ctypes.c_void_p(x.data.ptr),
                                        ctypes.c_void_p(cmp.data.ptr), ctypes.c_void_p(out.data.ptr), x.size,
                                        *dims, eb32, repeats, ctypes.c_void_p(D.work_stream().ptr), ms,
                                        ctypes.byref(last))
        if rc:
            raise RuntimeError(f"cuszp_time_kernel returned CUDA error {rc}")
        return [v / 1e3 for v in ms], int(last.value)


def cuszp_dims_for(x: Any) -> list[int]:
    from perfscout.codecs.gpu_peers import cuszp as C

    return [d for d in (1, 2, 3) if d == 1 or (x.ndim >= d and not C.vector_problem(tuple(x.shape), d))]


def bench_cuszp(x: Any, eb: float, encoding: str, dim: int, repeats: int, timer: KernelTimer | None) -> dict:
    import cupy as cp

    from perfscout.codecs.gpu_peers import cuszp as C

    codec = C.CuSZpCodec("abs", eb, encoding=encoding, dim=dim)
    shape, dtype = tuple(x.shape), x.dtype
    codec.check_input(shape, dtype)
    meta = codec.stream_meta(x)
    row: dict = {"codec": "cuszp", "encoding": encoding, "dim": dim, "eb_f32": codec.eb32}
    blob = codec.device_compress(x)  # warm-up (library load, pool growth)
    codec.device_decompress(blob, shape, dtype, meta)
    blob = None
    comp, blob = _timed_calls(lambda: codec.device_compress(x), repeats)
    blob = codec.settle(blob, shape, dtype)
    row.update(stream_nbytes=blob.nbytes, library_nbytes=blob.reported_nbytes, ratio=x.nbytes / blob.nbytes)
    target = codec.decode_target(shape, dtype)  # zeroed once, outside every timed decode
    zero = _events(lambda: target.fill(0), repeats)
    dec = _events(lambda: codec.device_decompress(blob, shape, dtype, meta, out=target), repeats)
    dec_memset = _events(lambda: codec.device_decompress(blob, shape, dtype, meta), repeats)
    row.update(_check(x, target, eb))
    row.update(compress_e2e_s=_med(comp), decompress_e2e_s=_med(dec), decompress_memset_e2e_s=_med(dec_memset),
               zero_output_s=_med(zero),
               samples_s={"compress_e2e": comp, "decompress_e2e": dec, "decompress_memset_e2e": dec_memset})
    if timer is not None:
        dims = C.cuszp_dims(shape, dim)
        cmp = cp.zeros_like(blob.buffer)
        out = cp.zeros(shape, dtype)
        try:
            kc, last = timer.time(True, encoding, dim, x, cmp, out, dims, codec.eb32, repeats)
            kd, _ = timer.time(False, encoding, dim, x, blob.buffer, out, dims, codec.eb32, repeats)
        except (RuntimeError, OSError) as exc:
            row["kernel_error"] = str(exc)
        else:
            same_stream = bool(cp.array_equal(cmp[: blob.nbytes], blob.buffer[: blob.nbytes]))
            same_decode = bool(cp.array_equal(out.view(cp.uint32), target.view(cp.uint32)))
            row.update(compress_kernel_s=_med(kc), decompress_kernel_s=_med(kd), kernel_last_offset=last,
                       kernel_stream_identical=same_stream, kernel_decode_identical=same_decode)
            row["samples_s"].update(compress_kernel=kc, decompress_kernel=kd)
        cmp = out = None
    target = blob = None
    return row


# -- szp-gpu ------------------------------------------------------------------------------
def bench_szp(x: Any, eb: float, block_ndim: int | str, repeats: int, mode: str = "abs", rel: float = 0.0) -> dict:
    """szp-gpu with ``block_ndim`` ("auto": chosen inside the timed compress, or given). In
    ``rel`` mode szp-gpu resolves REL ``rel`` to the same absolute bound with its own range
    pass (inside its compress time) and, knowing max |x|, leaves its quantiser the room for
    float32 rounding (FORMAT.md "Room for rounding"); in ``abs`` mode it has no range pass
    and no room: on fields far from zero at tight bounds its rounding then costs outliers."""
    import cupy as cp
    from gpu_codec import batched_events

    from perfscout.codecs.registry import get_codec
    from perfscout.codecs.szp import format as F
    from perfscout.codecs.szp import gpu as G

    row: dict = {"codec": "szp-gpu", "block_ndim": block_ndim, "szp_mode": mode}
    bound = rel if mode == "rel" else eb
    if block_ndim == "auto":
        codec = get_codec("szp-gpu", mode, bound)

        def compress():
            return codec.compress_on_device(x)
    else:
        def compress():
            return G.compress_device(x, mode, bound, int(block_ndim))
    ds = compress()  # warm-up (kernel compilation, pool growth)
    G.decompress_device(ds)
    ds = None
    comp, ds = _timed_calls(compress, repeats)
    bnd = int(ds.header.block_ndim)
    row.update(chosen_block_ndim=bnd, szp_abs_bound=float(ds.header.abs_bound), szp_step=float(ds.header.step), stream_nbytes=int(ds.body.size) + 4, ratio=x.nbytes / (int(ds.body.size) + 4),
               n_outliers=int(ds.header.n_outliers), payload_words=int(ds.header.payload_words))
    dec = _events(lambda: G.decompress_device(ds), repeats)
    y = G.decompress_device(ds)
    row.update(_check(x, y, eb))
    del y
    frange = G.device_range(x) if mode == "rel" else None
    qz = F.resolve_quantizer(x.dtype, mode, bound, frange, version=int(ds.header.version))
    if float(qz.step) != float(ds.header.step):
        raise RuntimeError(f"kernel timing's quantiser (step {qz.step}) is not the stream's ({ds.header.step})")
    geo = G.geometry(tuple(x.shape), bnd)
    scratch = G.new_scratch(geo)
    kc = batched_events(lambda: G._launch_compress(x, geo, qz, G._outlier_cap(x.size), scratch), repeats)
    out = cp.empty(ds.header.shape, dtype=ds.header.dtype)
    kd = batched_events(lambda: G.launch_decompress_stream(out, ds, scratch), repeats)
    out = scratch = None  # their memory back to the pool
    row.update(compress_e2e_s=_med(comp), decompress_e2e_s=_med(dec), compress_kernel_s=_med(kc),
               decompress_kernel_s=_med(kd),
               samples_s={"compress_e2e": comp, "decompress_e2e": dec, "compress_kernel": kc, "decompress_kernel": kd})
    return row


# -- the run ------------------------------------------------------------------------------
def _gbps(row: dict, nbytes: int, copy_gbps: float) -> None:
    for k in [k for k in row if k.endswith("_s") and isinstance(row[k], float)]:
        base = k[:-2]
        if base in ("zero_output",):
            continue
        row[base + "_GBps"] = nbytes / row[k] / 1e9
        row[base + "_x_copy"] = row[base + "_GBps"] / copy_gbps


def _write(path: str, doc: dict) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(path)


def bench(args: argparse.Namespace) -> None:
    import cupy as cp
    from gpu_codec import device_info

    from perfscout.codecs.gpu_peers import cuszp as C
    from perfscout.codecs.gpu_peers import device as D

    t0 = time.time()
    timer = None
    if args.timer:
        try:
            timer = KernelTimer(args.timer)
        except OSError as exc:
            print(f"(no cuSZp kernel timer: {exc})", flush=True)
    doc: dict = {"device": device_info(), "repeats": args.repeats, "gib": args.gib, "cuszp": C.CuSZpCodec.version(),
                 "cuszp_kernel_timer": bool(timer), "szp_nvrtc_defines": os.environ.get("SZP_NVRTC_DEFINES", ""),
                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "fields": {}, "rows": []}
    print(json.dumps(doc["device"]), doc["cuszp"], flush=True)
    fields = args.fields.split(",") if args.fields else list(FIELDS)
    bounds = [float(b) for b in args.bounds.split(",")] if args.bounds else list(BOUNDS)
    with D.work_stream():
        for name in fields:
            x = make_field(name, Path(args.data), args.gib)
            lo, hi = float(x.min()), float(x.max())
            roof = copy_roof(x, args.repeats)
            doc["fields"][name] = {"shape": list(x.shape), "nbytes": int(x.nbytes), "min": lo, "max": hi, **roof}
            print(f"== {name} {tuple(x.shape)} [{lo:.6g}, {hi:.6g}] copy {roof['copy_GBps']:.0f} GB/s", flush=True)
            for rel in bounds:
                eb = rel * (hi - lo)
                configs: list[tuple[str, Any]] = []
                if "szp" in args.codecs:
                    configs += [("szp", ("auto", "rel"))] + [("szp", (b, "rel")) for b in (1, 2, 3) if b <= max(x.ndim, 1)]
                    configs += [("szp", ("auto", "abs"))]
                if "cuszp" in args.codecs:
                    configs += [("cuszp", (e, d)) for d in cuszp_dims_for(x) for e in ENCODINGS]
                for kind, cfg in configs:
                    try:
                        if kind == "szp":
                            row = bench_szp(x, eb, cfg[0], args.repeats, mode=cfg[1], rel=rel)
                        else:
                            row = bench_cuszp(x, eb, cfg[0], cfg[1], args.repeats, timer)
                    except Exception as exc:  # noqa: BLE001 - a failing config is a finding, the run goes on
                        row = {"codec": "szp-gpu" if kind == "szp" else "cuszp", "config": str(cfg),
                               "error": f"{type(exc).__name__}: {exc}"}
                    row.update(field=name, rel=rel, abs_bound=eb)
                    _gbps(row, int(x.nbytes), roof["copy_GBps"])
                    doc["rows"].append(row)
                    print(line(row), flush=True)
                    cp.get_default_memory_pool().free_all_blocks()
            _write(args.out, doc)
            del x
            cp.get_default_memory_pool().free_all_blocks()
    doc["wall_s"] = time.time() - t0
    _write(args.out, doc)
    print()
    print(summary(doc))


def label(r: dict) -> str:
    if r["codec"] == "szp-gpu":
        b = r.get("block_ndim")
        return f"szp-gpu {r.get('szp_mode', 'abs')} {b}" + (f"->{r['chosen_block_ndim']}-D" if b == "auto" and "chosen_block_ndim" in r else
                                 ("-D" if b != "auto" and b is not None else ""))
    if "encoding" in r:
        return f"cuSZp {r['encoding']} {r['dim']}-D"
    return f"{r['codec']} {r.get('config', '')}"


def line(r: dict) -> str:
    def f(k: str) -> float:
        v = r.get(k)
        return v if isinstance(v, (int, float)) else math.nan

    if "error" in r:
        return f"{r['field']:<24} {r['rel']:.0e} {label(r):<22} ERROR {r['error'][:200]}"
    extra = (f" d+memset {f('decompress_memset_e2e_GBps'):6.0f}" if "decompress_memset_e2e_s" in r else "")
    return (f"{r['field']:<24} {r['rel']:.0e} {label(r):<22} CR {f('ratio'):8.3f}  c e2e {f('compress_e2e_GBps'):6.0f}"
            f" k {f('compress_kernel_GBps'):6.0f} ({f('compress_kernel_x_copy'):.2f})  d e2e {f('decompress_e2e_GBps'):6.0f}"
            f" k {f('decompress_kernel_GBps'):6.0f} ({f('decompress_kernel_x_copy'):.2f}){extra}  {r.get('status')}"
            f" beyond {r.get('n_beyond')} past-rounding {r.get('n_violations')}")


# -- the summary (pure: tested on the CPU) ------------------------------------------------------
def pair_summary(rows: list[dict]) -> dict:
    """For one field and bound: szp-gpu's auto row, its best given shape, cuSZp's best CR and
    fastest fair e2e/kernel figures (each with its mode), and the ratios the issue asks for."""
    ok = [r for r in rows if "error" not in r and r.get("ratio")]
    szp = [r for r in ok if r["codec"] == "szp-gpu"]
    cz = [r for r in ok if r["codec"] == "cuszp"]
    def pick(rows_: list[dict], **want) -> dict | None:
        return next((r for r in rows_ if all(r.get(k, "abs" if k == "szp_mode" else None) == v
                                             for k, v in want.items())), None)

    mode = "rel" if pick(szp, block_ndim="auto", szp_mode="rel") else "abs"  # rel: what a REL request runs
    auto = pick(szp, block_ndim="auto", szp_mode=mode)
    given = pick(szp, block_ndim=auto.get("chosen_block_ndim"), szp_mode=mode) if auto else None
    out: dict = {"szp_auto": auto, "szp_given": given, "szp_auto_abs": pick(szp, block_ndim="auto", szp_mode="abs")}
    if not cz or auto is None:
        return out

    def best(key: str, rows_: list[dict]) -> dict | None:
        cand = [r for r in rows_ if isinstance(r.get(key), (int, float))]
        return max(cand, key=lambda r: r[key]) if cand else None

    out["cuszp_best_cr"] = best("ratio", cz)
    out["cuszp_best_cr_within_bound"] = best("ratio", [r for r in cz if not r.get("n_beyond")])
    for key in ("compress_e2e_GBps", "decompress_e2e_GBps", "decompress_memset_e2e_GBps",
                "compress_kernel_GBps", "decompress_kernel_GBps"):
        out[f"cuszp_fastest_{key}"] = best(key, cz)
    b = out["cuszp_best_cr"]
    out["cr_over_cuszp_best"] = auto["ratio"] / b["ratio"]
    szp_c = (given or auto).get("compress_e2e_GBps")
    for k_ours, k_theirs, name in (("compress_e2e_GBps", "compress_e2e_GBps", "compress_auto_e2e"),
                                   ("decompress_e2e_GBps", "decompress_e2e_GBps", "decompress_e2e"),
                                   ("compress_kernel_GBps", "compress_kernel_GBps", "compress_kernel"),
                                   ("decompress_kernel_GBps", "decompress_kernel_GBps", "decompress_kernel")):
        theirs = out.get(f"cuszp_fastest_{k_theirs}")
        if theirs and isinstance(auto.get(k_ours), (int, float)):
            out[f"{name}_over_cuszp_fastest"] = auto[k_ours] / theirs[k_theirs]
    theirs = out.get("cuszp_fastest_compress_e2e_GBps")
    if theirs and isinstance(szp_c, (int, float)):
        out["compress_given_e2e_over_cuszp_fastest"] = szp_c / theirs["compress_e2e_GBps"]
    return out


def _mode(r: dict | None) -> str:
    return f"{r['encoding']} {r['dim']}-D" if r else "-"


def summary(doc: dict) -> str:
    """The Markdown table: one line per field and bound."""
    lines = ["| field | REL | szp shape | CR szp (cuSZp best, mode) | CR × | cuSZp best CR within its bound | "
             "compress e2e auto / given GB/s | "
             "× cuSZp fastest (mode) | decompress e2e GB/s | × cuSZp fastest fair (mode) · with memset | "
             "kernels c / d GB/s (× copy) | cuSZp fastest kernels c / d (× copy) | beyond bound szp / cuSZp rows |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    pairs: dict = {}
    for r in doc["rows"]:
        pairs.setdefault((r["field"], r["rel"]), []).append(r)
    for (field, rel), rows in pairs.items():
        s = pair_summary(rows)
        a, g = s.get("szp_auto"), s.get("szp_given")
        if not a or "cuszp_best_cr" not in s:
            lines.append(f"| {field} | {rel:.0e} | incomplete: {[label(r) + ' ' + r.get('error', '') for r in rows]} |")
            continue
        copy = doc["fields"][field]["copy_GBps"]
        b = s["cuszp_best_cr"]
        fc, fd = s["cuszp_fastest_compress_e2e_GBps"], s["cuszp_fastest_decompress_e2e_GBps"]
        fdm = s["cuszp_fastest_decompress_memset_e2e_GBps"]
        kc, kd = s.get("cuszp_fastest_compress_kernel_GBps"), s.get("cuszp_fastest_decompress_kernel_GBps")
        cz = [r for r in rows if r["codec"] == "cuszp" and "error" not in r]
        over = sum(1 for r in cz if r.get("n_beyond"))

        def k(r: dict | None, key: str) -> str:
            return f"{r[key]:.0f} ({r[key] / copy:.2f})" if r and isinstance(r.get(key), (int, float)) else "-"

        gc = g["compress_e2e_GBps"] if g else math.nan
        w = s.get("cuszp_best_cr_within_bound")
        within = f"{w['ratio']:.2f} ({_mode(w)})" if w else "none held it"
        lines.append(
            f"| {field} | {rel:.0e} | {a['chosen_block_ndim']}-D | {a['ratio']:.2f} ({b['ratio']:.2f}, {_mode(b)}) | "
            f"{s['cr_over_cuszp_best']:.3f} | {within} | {a['compress_e2e_GBps']:.0f} / {gc:.0f} | "
            f"{s['compress_auto_e2e_over_cuszp_fastest']:.2f} / {s.get('compress_given_e2e_over_cuszp_fastest', math.nan):.2f}"
            f" ({fc['compress_e2e_GBps']:.0f}, {_mode(fc)}) | {a['decompress_e2e_GBps']:.0f} | "
            f"{s['decompress_e2e_over_cuszp_fastest']:.2f} ({fd['decompress_e2e_GBps']:.0f}, {_mode(fd)}) · "
            f"{a['decompress_e2e_GBps'] / fdm['decompress_memset_e2e_GBps']:.2f} | "
            f"{k(a, 'compress_kernel_GBps')} / {k(a, 'decompress_kernel_GBps')} | "
            f"{k(kc, 'compress_kernel_GBps')} / {k(kd, 'decompress_kernel_GBps')} | "
            f"{a.get('n_beyond')} / {over} of {len(cz)} |")
    return "\n".join(lines)


# -- the ncu target -------------------------------------------------------------------------
def ncu_target(args: argparse.Namespace) -> None:
    """One szp-gpu compress + decompress (shape chosen) and one compress + decompress of each
    cuSZp mode with its fastest processing, on one field at one REL bound: what
    gpu_fair_device.sh profiles with ncu."""
    import cupy as cp

    from perfscout.codecs.gpu_peers import cuszp as C
    from perfscout.codecs.gpu_peers import device as D
    from perfscout.codecs.registry import get_codec
    from perfscout.codecs.szp import gpu as G

    x = make_field(args.fields or "smooth3d", Path(args.data), args.gib)
    eb = float(args.bounds or 1e-3) * float(x.max() - x.min())
    with D.work_stream():
        ds = get_codec("szp-gpu", "abs", eb).compress_on_device(x)
        G.decompress_device(ds)
        for enc in ENCODINGS:
            c = C.CuSZpCodec("abs", eb, encoding=enc, dim=max(cuszp_dims_for(x)))
            blob = c.settle(c.device_compress(x), tuple(x.shape), x.dtype)
            c.device_decompress(blob, tuple(x.shape), x.dtype, c.stream_meta(x), out=c.decode_target(x.shape, x.dtype))
        cp.cuda.Device().synchronize()
    print("ncu target done", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["bench", "table", "ncu"])
    ap.add_argument("--data", default=".device/data")
    ap.add_argument("--out", default="gpu_fair.json")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--timer", default="", help="libcuszp_timer.so (benchmarks/cuszp_kernel_timer.cu)")
    ap.add_argument("--fields", default="", help=f"comma-separated, of {', '.join(FIELDS)}")
    ap.add_argument("--codecs", default="szp,cuszp", help="szp, cuszp or both (an A/B of szp-gpu builds needs szp only)")
    ap.add_argument("--bounds", default="", help="comma-separated REL bounds (default 1e-2,1e-3,1e-4,1e-5)")
    args = ap.parse_args()
    if args.what == "table":
        print(summary(json.loads(Path(args.out).read_text())))
    elif args.what == "ncu":
        ncu_target(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
