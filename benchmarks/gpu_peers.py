"""szp-gpu beside the real GPU compressors (cuSZp plain/outlier, nvCOMP lossless) in one process.

    python3 benchmarks/gpu_peers.py bench --data DIR --out FILE.json [--gib 1] [--repeats 5] [--quick]
    python3 benchmarks/gpu_peers.py tile --data DIR --out DIR    # tiled raw files for examples/sweep_gpu.yaml
    python3 benchmarks/gpu_peers.py table --out FILE.json        # the Markdown table of a run

Every row is one :func:`perfscout.tools.gpu_eval.evaluate_on_gpu` call on a device-resident
float32 field (so what the sweep records, the benchmark records): the same absolute bound for
every backend (REL resolved on the device first), e2e compress/decompress medians of CUDA
events, the copy roof of the same bytes measured in the same call, the stream through host
bytes and back, and the bound checked element by element on the GPU (bit-exact for
lossless). For szp-gpu the kernel-only times are added the way benchmarks/gpu_codec.py takes
them (10 back-to-back launches between two events).

Fields (>= --gib GiB each): the smooth 3-D field of benchmarks/gpu_codec.py, and the real
fields of DIR tiled periodically (vorticity 512x512 x 32x32, vorticity 128x128x41 x 4x10x10,
999x999 x 17x17). Bounds: REL 1e-2, 1e-3, 1e-4. A row that breaks its bound is kept, with
the count, the worst element and the excess: it is a finding.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REAL = {  # file -> (shape, tiles), as in benchmarks/gpu_codec.py
    "vorticity.512_512": ((512, 512), (32, 32)),
    "vorticity.128_128_41": ((41, 128, 128), (4, 10, 10)),
    "999x999.float": ((999, 999), (17, 17)),
}
BOUNDS = (1e-2, 1e-3, 1e-4)
#: the sweep's backends (examples/sweep_gpu.yaml), each with its default options (cuSZp: 3-D
#: processing on the 3-D fields, 2-D on the 16384-wide one, 1-D where rows are not a multiple of 4)
LOSSY = (("szp-gpu", {}), ("cuszp-plain", {}), ("cuszp-outlier", {}))
LOSSLESS = ("nvcomp-ans", "nvcomp-bitcomp", "nvcomp-zstd")


def tiled_name(name: str) -> str:
    tiles = REAL[name][1]
    return f"{name}.tiled{'x'.join(map(str, tiles))}.f32"


#: the synthetic field of the sweep: benchmarks/gpu_codec.py's smooth 3-D field (the
#: benchmark's ``smooth3d``) at 1 GiB, seeded, written once by ``tile`` so that the sweep's
#: tasks read it like the real fields instead of each generating 1 GiB on the host
SYNTHETIC_NAME = "smooth3d.synthetic.f32"
SYNTHETIC_SEED = 0


def tile(args: argparse.Namespace) -> None:
    """Write each real field tiled to >= 1 GiB as a raw little-endian float32 file, and the
    synthetic smooth field (``--gib``; needs CuPy) beside them."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, (shape, tiles) in REAL.items():
        src = Path(args.data) / name
        if not src.is_file():
            print(f"(skipped {name}: not in {args.data})", flush=True)
            continue
        base = np.fromfile(src, dtype="<f4").reshape(shape)
        big = np.tile(base, tiles)
        dest = out / tiled_name(name)
        big.tofile(dest)
        print(f"{dest} {','.join(map(str, big.shape))} {big.nbytes / 2**30:.3f} GiB", flush=True)
    try:
        import cupy as cp
        from gpu_codec import smooth_field
    except ImportError as exc:
        print(f"(skipped the synthetic field: {exc})", flush=True)
        return
    cp.random.seed(SYNTHETIC_SEED)
    field = smooth_field(args.gib)
    dest = out / SYNTHETIC_NAME
    field.get().astype("<f4").tofile(dest)
    print(f"{dest} {','.join(map(str, field.shape))} {field.nbytes / 2**30:.3f} GiB", flush=True)


def _szp_kernels(x, eb: float, repeats: int, rel: float | None = None) -> dict:
    """Kernel-only szp-gpu times as gpu_codec.py takes them (compress kernel + corner scan;
    the decode kernels of the whole stream, its corners section included, through
    gpu.launch_decompress_stream), and the driver's own e2e calls with the block shape the
    row's "auto" chose fixed (compress_device / decompress_device between two events: the
    row's compress e2e adds the automatic choice to the first)."""
    import cupy as cp
    from gpu_codec import (  # benchmarks/ is on sys.path when run as a script
        batched_events,
        events,
    )

    from perfscout.codecs.szp import format as F
    from perfscout.codecs.szp import gpu as G
    from perfscout.codecs.szp.autoshape import choose_block_ndim

    bnd = choose_block_ndim(x, eb).block_ndim  # the shape the e2e row's "auto" chose (deterministic)
    qz = F.resolve_quantizer(x.dtype, "abs", eb, None)
    geo = G.geometry(tuple(x.shape), bnd)
    scratch = G.new_scratch(geo)
    kern = batched_events(lambda: G._launch_compress(x, geo, qz, G._outlier_cap(x.size), scratch), repeats)
    ds = G.compress_device(x, "abs", eb, bnd)
    out = cp.empty(ds.header.shape, dtype=ds.header.dtype)
    dkern = batched_events(lambda: G.launch_decompress_stream(out, ds, scratch), repeats)
    out = None  # its GiB back to the pool before the e2e calls allocate theirs
    fixed_c = events(lambda: G.compress_device(x, "abs", eb, bnd), repeats)
    fixed_d = events(lambda: G.decompress_device(ds), repeats)
    extra: dict = {}
    if rel is not None:  # rel mode through the driver: its range pass, then the same compress
        rng_t = statistics.median(events(lambda: G.device_range(x), repeats))
        rel_c = statistics.median(events(lambda: G.compress_device(x, "rel", rel, bnd), repeats))
        extra = {"range_pass_s": rng_t, "range_pass_GBps": x.nbytes / rng_t / 1e9,
                 "compress_fixed_rel_e2e_s": rel_c, "compress_fixed_rel_e2e_GBps": x.nbytes / rel_c / 1e9}
    c, d = statistics.median(kern), statistics.median(dkern)
    fc, fd = statistics.median(fixed_c), statistics.median(fixed_d)
    return {"block_ndim": bnd, "compress_kernel_s": c, "decompress_kernel_s": d,
            "compress_kernel_GBps": x.nbytes / c / 1e9, "decompress_kernel_GBps": x.nbytes / d / 1e9,
            "compress_fixed_e2e_s": fc, "decompress_fixed_e2e_s": fd,
            "compress_fixed_e2e_GBps": x.nbytes / fc / 1e9, "decompress_fixed_e2e_GBps": x.nbytes / fd / 1e9,
            "samples_fixed_e2e_s": {"compress": fixed_c, "decompress": fixed_d}, **extra}


def _row(field: str, x, codec: str, options: dict, mode: str, bound: float, repeats: int) -> dict:
    from perfscout.analysis.report.gpu import parse_detail, strip_detail
    from perfscout.codecs.registry import codec_class
    from perfscout.datasets.field import dtype_tag, shape_str
    from perfscout.state.records import CompressionResult
    from perfscout.tools.gpu_eval import evaluate_on_gpu

    rec = CompressionResult(dataset=field, shape=shape_str(x.shape), dtype=dtype_tag(x.dtype), nbytes=int(x.nbytes),
                            codec=codec, device="cuda", mode=mode, bound=bound, repeats=repeats)
    cls = codec_class(codec)
    rec.codec_version = cls.version()
    ev = evaluate_on_gpu(rec, cls, x, mode, bound, repeats=repeats, options=options)
    r = ev.result
    detail = parse_detail(r.error) or {}
    row = {"field": field, "shape": list(x.shape), "codec": codec, "options": options, "mode": mode,
           "bound": bound, "abs_bound": r.abs_bound, "status": r.status, "bound_ok": r.bound_ok,
           "ratio": r.ratio, "psnr": r.psnr, "max_abs_err": r.max_abs_err,
           "max_err_over_bound": (r.max_abs_err / r.abs_bound) if r.abs_bound and r.max_abs_err is not None else None,
           "compress_e2e_s": r.compress_s, "decompress_e2e_s": r.decompress_s, "d2h_s": r.d2h_s,
           "message": strip_detail(r.error), **detail}
    if codec == "szp-gpu" and r.status in ("ok", "bound_overshoot", "bound_violated"):
        try:  # szp-gpu's kernel entry points are internals: a change there costs this row's kernel times only
            k = _szp_kernels(x, float(r.abs_bound), repeats, bound if mode == "rel" else None)
        except Exception as exc:  # noqa: BLE001
            row["kernel_error"] = f"{type(exc).__name__}: {exc}"
        else:
            row.update(k)
            row["compress_kernel_x_copy"] = k["compress_kernel_GBps"] / row["copy_GBps"]
            row["decompress_kernel_x_copy"] = k["decompress_kernel_GBps"] / row["copy_GBps"]
    return row


def _line(r: dict) -> str:
    def f(k: str) -> float:
        return r.get(k) if isinstance(r.get(k), (int, float)) else math.nan

    opts = ",".join(f"{k}={v}" for k, v in r["options"].items())
    return (f"{r['field']:<36} {r['codec'] + (' ' + opts if opts else ''):<22} {r['mode']:>8} {r['bound']:.0e} "
            f"CR {f('ratio'):8.2f}  comp {f('compress_GBps'):6.0f} ({f('compress_x_copy'):.2f})  "
            f"decomp {f('decompress_GBps'):6.0f} ({f('decompress_x_copy'):.2f}) GB/s  {r['status']}"
            + (f"  beyond {r.get('n_beyond')} (rounding-excused {r.get('n_beyond', 0) - r.get('n_violations', 0)})"
               f" worst {r.get('worst', {}).get('excess_over_bound', math.nan):.3g} of eb" if r.get("n_beyond") else ""))


def table(doc: dict) -> str:
    lines = ["| field | bound | backend | CR | compress GB/s (× copy) | decompress GB/s (× copy) | verdict |",
             "|---|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        opts = ",".join(f"{k}={v}" for k, v in r["options"].items())
        name = r["codec"] + (f" ({opts})" if opts else "")
        kern = (f"; kernel {r['compress_kernel_GBps']:.0f} / {r['decompress_kernel_GBps']:.0f}"
                if "compress_kernel_GBps" in r else "")
        if r["status"] in ("ok", "bound_overshoot", "bound_violated"):
            verdict = {"ok": "held" if r["mode"] != "lossless" else "bit-exact"}.get(r["status"], r["status"])
            if r.get("n_beyond"):
                w = r.get("worst", {})
                verdict += (f": {r['n_beyond']} elements beyond, {r['n_violations']} past rounding; worst "
                            f"+{w.get('excess_over_bound', math.nan):.2e}·eb at ({','.join(map(str, w.get('index', [])))})")
            label = "lossless" if r["mode"] == "lossless" else f"REL {r['bound']:.0e}"
            lines.append(f"| {r['field']} | {label} | "
                         f"{name} | {r['ratio']:.2f} | {r['compress_GBps']:.0f} ({r['compress_x_copy']:.2f}){kern} | "
                         f"{r['decompress_GBps']:.0f} ({r['decompress_x_copy']:.2f}) | {verdict} |")
        else:
            lines.append(f"| {r['field']} | {r['mode']} {r['bound']:g} | {name} | | | | {r['status']}: "
                         f"{r['message'][:120]} |")
    return "\n".join(lines)


def szp_table(doc: dict) -> str:
    """szp-gpu against cuSZp per field and bound: CR (cuSZp's best), kernel and e2e GB/s both
    ways with × copy, e2e over cuSZp's fastest mode in that direction (the target is 2×), and
    the bound verdicts. "fixed" is the driver's own e2e with the chosen shape given."""
    lines = ["| field | REL | szp blocks | CR szp (cuSZp best) | compress kernel GB/s (× copy) | compress e2e "
             "auto / fixed (× copy) | × cuSZp fastest (auto / fixed) | decompress kernel (× copy) | "
             "decompress e2e (× copy) | × cuSZp fastest | rel through the driver: range pass / compress e2e fixed | "
             "verdicts szp / cuSZp |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    ok = ("ok", "bound_overshoot", "bound_violated")
    for r in doc["rows"]:
        if r["codec"] != "szp-gpu" or r["status"] not in ok or "compress_kernel_GBps" not in r:
            continue
        peers = [q for q in doc["rows"] if q["codec"].startswith("cuszp") and q["field"] == r["field"]
                 and q["bound"] == r["bound"] and q["status"] in ok]
        best_cr = max((q["ratio"] for q in peers), default=math.nan)
        fast_c = max((q["compress_GBps"] for q in peers), default=math.nan)
        fast_d = max((q["decompress_GBps"] for q in peers), default=math.nan)
        cp_ = r["copy_GBps"]

        def gx(v: float) -> str:
            return f"{v:.0f} ({v / cp_:.2f})"

        verdicts = " / ".join([r["status"]] + [f"{q['codec'][6:]} {q['status']}" +
                                               (f" ({q['n_beyond']} beyond)" if q.get("n_beyond") else "")
                                               for q in peers])
        fc = r.get("compress_fixed_e2e_GBps", math.nan)
        lines.append(
            f"| {r['field']} | {r['bound']:.0e} | {r['block_ndim']}-D | {r['ratio']:.2f} ({best_cr:.2f}) | "
            f"{gx(r['compress_kernel_GBps'])} | {r['compress_GBps']:.0f} / {gx(fc)} | "
            f"{r['compress_GBps'] / fast_c:.2f} / {fc / fast_c:.2f} | {gx(r['decompress_kernel_GBps'])} | "
            f"{gx(r['decompress_GBps'])} | {r['decompress_GBps'] / fast_d:.2f} | "
            f"{r.get('range_pass_GBps', math.nan):.0f} / {r.get('compress_fixed_rel_e2e_GBps', math.nan):.0f} | "
            f"{verdicts} |")
    return "\n".join(lines)


def compare(before: dict, after: dict) -> str:
    """szp-gpu's e2e GB/s per field and bound in two runs of this benchmark (e.g. before and
    after a driver change), with the kernels' for scale."""
    def rows(doc: dict) -> dict:
        return {(r["field"], r["bound"]): r for r in doc["rows"] if r["codec"] == "szp-gpu" and r["mode"] == "rel"}

    b, a = rows(before), rows(after)
    lines = ["| field | REL | compress e2e before → after (auto) | after, shape fixed | compress kernel after | "
             "decompress e2e before → after | decompress kernel after |", "|---|---|---|---|---|---|---|"]
    for key in a:
        rb, ra = b.get(key, {}), a[key]

        def g(r: dict, k: str) -> str:
            v = r.get(k)
            return f"{v:.0f}" if isinstance(v, (int, float)) else "–"

        lines.append(f"| {key[0]} | {key[1]:.0e} | {g(rb, 'compress_GBps')} → {g(ra, 'compress_GBps')} | "
                     f"{g(ra, 'compress_fixed_e2e_GBps')} | {g(ra, 'compress_kernel_GBps')} | "
                     f"{g(rb, 'decompress_GBps')} → {g(ra, 'decompress_GBps')} | {g(ra, 'decompress_kernel_GBps')} |")
    return "\n".join(lines)


def _write(path: str, doc: dict) -> None:
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(path)


#: a small evaluation each lossy backend must survive in a child process first: the rows run
#: in this one process, so a backend that crashes it (a segfault, a CUDA error that kills the
#: context) is left out with the reason instead of ending the benchmark
SMOKE = """
import sys
import numpy as np
from perfscout.codecs.registry import codec_class
from perfscout.state.records import CompressionResult
from perfscout.tools.gpu_eval import evaluate_on_gpu
x = np.cumsum(np.random.default_rng(0).standard_normal((32, 64, 64)), axis=-1).astype(np.float32)
rec = CompressionResult(dataset="smoke", shape="32,64,64", dtype="f32", nbytes=x.nbytes, codec=sys.argv[1],
                        device="cuda", mode="rel", bound=1e-3, repeats=1)
r = evaluate_on_gpu(rec, codec_class(sys.argv[1]), x, "rel", 1e-3, repeats=1, options={}).result
print(r.status, r.ratio)
"""


def survives(codec: str) -> tuple[bool, str]:
    """(True, '') when ``codec`` evaluates a small field in a child process without dying."""
    import subprocess

    p = subprocess.run([sys.executable, "-c", SMOKE, codec], capture_output=True, text=True, timeout=120,
                       check=False)
    if p.returncode == 0:
        return True, ""
    return False, f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-400:]}"


def bench(args: argparse.Namespace) -> None:
    import cupy as cp
    from gpu_codec import device_info, smooth_field

    from perfscout.codecs.registry import info
    from perfscout.errors import InputError

    t0 = time.time()
    doc: dict = {"device": device_info(), "repeats": args.repeats, "gib": args.gib,
                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "rows": [],
                 "backends": {c: info(c).model_dump() for c in {c for c, _ in LOSSY} | set(LOSSLESS)}}
    for c, i in doc["backends"].items():
        print(f"{c}: available={i['available']} {i['version']} {i['reason']}", flush=True)
    for c in dict.fromkeys(c for c, _ in LOSSY):
        if doc["backends"][c]["available"]:
            ok, why = survives(c)
            if not ok:
                doc["backends"][c].update(available=False, reason=f"crashed a small evaluation ({why})")
                print(f"{c}: left out, it crashed a small evaluation in a child process: {why}", flush=True)
    fields = [("smooth3d", lambda: (cp.random.seed(SYNTHETIC_SEED), smooth_field(args.gib))[1])]  # = tile's
    for name, (shape, tiles) in REAL.items():
        path = Path(args.data) / name
        if path.is_file():
            fields.append((f"{name} tiled {'x'.join(map(str, tiles))}",
                           lambda p=path, s=shape, t=tiles: cp.tile(cp.asarray(np.fromfile(p, "<f4").reshape(s)), t)))
        else:
            print(f"(skipped {name}: not in {args.data})", flush=True)
    if args.quick:
        fields = fields[:2]
    bounds = (1e-3,) if args.quick else BOUNDS
    for fname, make in fields:
        x = make()
        for codec in LOSSLESS if not args.no_lossless else ():
            if doc["backends"][codec]["available"]:
                doc["rows"].append(_row(fname, x, codec, {}, "lossless", 1.0, args.repeats))
                print(_line(doc["rows"][-1]), flush=True)
        lossy = list(LOSSY)
        if args.cuszp_dims:  # cuSZp's other processings too: "its best mode" over every one it has
            lossy += [(c, {"dim": d}) for d in (1, 2, 3) if d <= x.ndim for c in ("cuszp-plain", "cuszp-outlier")]
        for rel in bounds:
            for codec, opts in lossy:
                if doc["backends"][codec]["available"]:
                    try:
                        doc["rows"].append(_row(fname, x, codec, opts, "rel", rel, args.repeats))
                    except InputError as exc:  # a processing cuSZp cannot run on this field
                        print(f"(skipped {codec} {opts} on {fname}: {exc})", flush=True)
                        continue
                    print(_line(doc["rows"][-1]), flush=True)
        _write(args.out, doc)  # after every field: a run cut short keeps what it measured
        del x
        cp.get_default_memory_pool().free_all_blocks()
    doc["wall_s"] = time.time() - t0
    lossy = [r for r in doc["rows"] if r["mode"] != "lossless" and r["codec"].startswith("cuszp")]
    doc["cuszp_configurations_over_bound"] = f"{sum(1 for r in lossy if r.get('n_beyond'))} of {len(lossy)}"
    _write(args.out, doc)
    print()
    print(table(doc))
    print()
    print(szp_table(doc))
    print(f"\ncuSZp configurations with elements beyond the bound: {doc['cuszp_configurations_over_bound']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["bench", "tile", "table", "compare"],
                    help="table: the Markdown tables of --out's JSON; compare: szp-gpu's e2e in --before against --out")
    ap.add_argument("--before", help="compare: the earlier run's JSON")
    ap.add_argument("--data", default=".device/gpu_peers/data")
    ap.add_argument("--out", default="gpu_peers.json")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="two fields at REL 1e-3 only")
    ap.add_argument("--no-lossless", action="store_true", help="leave out the nvCOMP lossless rows")
    ap.add_argument("--cuszp-dims", action="store_true",
                    help="also cuSZp with 1-D, 2-D and 3-D processing given (its default picks one per field)")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    if args.what == "compare":
        print(compare(json.loads(Path(args.before).read_text()), json.loads(Path(args.out).read_text())))
    elif args.what == "table":
        doc = json.loads(Path(args.out).read_text())
        print(table(doc))
        print()
        print(szp_table(doc))
    else:
        tile(args) if args.what == "tile" else bench(args)


if __name__ == "__main__":
    main()
