"""Where szp-gpu's end-to-end time goes beyond its kernels (issue #15 item 3).

One process, one GPU, a device-resident float32 field. For compress_device (each block
shape given, and the automatic choice), choose_block_ndim and decompress_device it prints
and writes (JSON):

- the call between two CUDA events (median of --repeats, after a warm-up): what a user's
  stream sees, host steps included whenever the GPU waits for them;
- the host time of the call (perf_counter), and cProfile's top functions by own time;
- a timeline of the compress call from events recorded at its phases: before the call,
  when the first kernel is queued, when the host starts waiting, after the call — so the
  GPU idle before the first launch and after the wait is read off directly.

The field is made on the device (a smooth product of sines plus 1e-3 noise), so the run
needs no data files: ``python3 benchmarks/szp_e2e_profile.py --gib 1 --out prof.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import json
import platform
import pstats
import statistics
import sys
import time
from pathlib import Path


def _field(cp, gib: float):
    n = int(round((gib * 2**30 / 4) ** (1 / 3) / 32)) * 32
    z = cp.linspace(0, 6, n, dtype=cp.float32)
    x = (cp.sin(z)[:, None, None] * cp.cos(1.3 * z)[None, :, None] * cp.sin(2.1 * z)[None, None, :])
    x += cp.random.default_rng(0).standard_normal(x.shape, dtype=cp.float32) * 1e-3
    return cp.ascontiguousarray(x.astype(cp.float32))


def _host(cp, fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    cp.cuda.Device().synchronize()
    return out


def _profile(cp, fn, repeats: int, top: int = 18) -> list[str]:
    pr = cProfile.Profile()
    cp.cuda.Device().synchronize()
    pr.enable()
    for _ in range(repeats):
        fn()
    pr.disable()
    cp.cuda.Device().synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    lines = [ln for ln in s.getvalue().splitlines() if ln.strip()]
    return lines[-top - 1:]


def _timeline(cp, G, fn, repeats: int, launch_name: str = "_launch_compress") -> dict:
    """Event marks inside a compress (or decompress) call: its first kernel queued, the
    host's wait."""
    marks: dict[str, list] = {}
    orig_launch, orig_wait = getattr(G, launch_name), G._Staging.wait

    def launch(*a, **k):
        e = cp.cuda.Event()
        e.record()
        marks.setdefault("first_launch", e)
        return orig_launch(*a, **k)

    def wait(self):
        e = cp.cuda.Event()
        e.record()
        marks.setdefault("wait", e)
        return orig_wait(self)

    setattr(G, launch_name, launch)
    G._Staging.wait = wait
    rows = []
    try:
        fn()
        for _ in range(repeats):
            marks.clear()
            cp.cuda.Device().synchronize()
            a, b = cp.cuda.Event(), cp.cuda.Event()
            t0 = time.perf_counter()
            a.record()
            fn()
            b.record()
            t1 = time.perf_counter()
            b.synchronize()
            r = {"total_s": cp.cuda.get_elapsed_time(a, b) / 1e3, "host_s": t1 - t0}
            if "first_launch" in marks:
                r["before_first_launch_s"] = cp.cuda.get_elapsed_time(a, marks["first_launch"]) / 1e3
            if "wait" in marks:
                r["until_wait_s"] = cp.cuda.get_elapsed_time(a, marks["wait"]) / 1e3
                r["after_wait_s"] = cp.cuda.get_elapsed_time(marks["wait"], b) / 1e3
            rows.append(r)
    finally:
        setattr(G, launch_name, orig_launch)
        G._Staging.wait = orig_wait
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def _choice_phases(cp, A, x, eb, repeats: int) -> dict:
    """The shape choice's phases on the GPU's clock (events) and the host's: the sample's
    gather, the candidates' counts, the rest."""
    marks: dict = {}
    host: dict = {}
    orig_sample, orig_heads = A._device_sample, A._device_headers

    def mark(name: str) -> None:
        e = cp.cuda.Event()
        e.record()
        marks[name] = e
        host[name] = time.perf_counter()

    def sample(*a, **k):
        mark("sample_start")
        out = orig_sample(*a, **k)
        mark("sample_end")
        return out

    def heads(*a, **k):
        mark("counts_start")
        out = orig_heads(*a, **k)
        mark("counts_end")
        return out

    A._device_sample, A._device_headers = sample, heads
    rows = []
    try:
        A.choose_block_ndim(x, eb)
        for _ in range(repeats):
            cp.cuda.Device().synchronize()
            mark("start")
            A.choose_block_ndim(x, eb)
            mark("end")
            marks["end"].synchronize()
            t = {k: cp.cuda.get_elapsed_time(marks["start"], e) / 1e3 for k, e in marks.items()}
            t.update({f"host_{k}": v - host["start"] for k, v in host.items()})
            rows.append(t)
    finally:
        A._device_sample, A._device_headers = orig_sample, orig_heads
    return {k: statistics.median(r[k] for r in rows) for k in rows[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--rel", type=float, nargs="+", default=[1e-2, 1e-4])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=None)
    ap.add_argument("--sample-caps", type=int, nargs="*", default=[],
                    help="also time the choice with autoshape.MAX_SAMPLE_ELEMS set to each of these")
    args = ap.parse_args()
    import cupy as cp

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from gpu_codec import batched_events

    events = functools.partial(batched_events, batch=1)  # one call per event pair, after a warm-up

    from perfscout.codecs.szp import autoshape as A
    from perfscout.codecs.szp import gpu as G
    from perfscout.codecs.szp.autoshape import choose_block_ndim

    x = _field(cp, args.gib)
    lo, hi = float(x.min()), float(x.max())
    doc = {"device": G.device_name(), "host": platform.node(), "python": platform.python_version(),
           "cupy": cp.__version__, "shape": list(x.shape), "nbytes": int(x.nbytes), "runs": []}
    copy = statistics.median(events(lambda: cp.copyto(cp.empty_like(x), x), args.repeats))
    doc["copy_s"] = copy
    for rel in args.rel:
        eb = rel * (hi - lo)
        for label, kw in (("1-D", {"block_ndim": 1}), ("2-D", {"block_ndim": 2}), ("3-D", {"block_ndim": 3}),
                          ("auto", {"choose": choose_block_ndim})):
            def c(kw=kw):
                return G.compress_device(x, "abs", eb, **kw)

            ds = c()
            r = {"rel": rel, "shape": label, "block_ndim": ds.header.block_ndim,
                 "ratio": x.nbytes / (ds.body.size + 4),
                 "compress_e2e_s": statistics.median(events(c, args.repeats)),
                 "compress_host_s": statistics.median(_host(cp, c, args.repeats)),
                 "compress_timeline": _timeline(cp, G, c, args.repeats),
                 "compress_profile": _profile(cp, c, args.repeats)}
            if label == "auto":
                def ch():
                    return choose_block_ndim(x, eb)

                r["choose_e2e_s"] = statistics.median(events(ch, args.repeats))
                r["choose_host_s"] = statistics.median(_host(cp, ch, args.repeats))
                r["choose_profile"] = _profile(cp, ch, args.repeats)
                r["choose_phases"] = _choice_phases(cp, A, x, eb, args.repeats)
            else:
                def d(ds=ds):
                    return G.decompress_device(ds)

                r["decompress_e2e_s"] = statistics.median(events(d, args.repeats))
                r["decompress_host_s"] = statistics.median(_host(cp, d, args.repeats))
                r["decompress_timeline"] = _timeline(cp, G, d, args.repeats, "_launch_decompress")
                r["decompress_profile"] = _profile(cp, d, args.repeats)
            gb = x.nbytes / 1e9
            line = (f"REL {rel:g} {label:4} ({ds.header.block_ndim}-D) CR {r['ratio']:.2f}  c e2e "
                    f"{gb / r['compress_e2e_s']:.0f} GB/s host {r['compress_host_s'] * 1e3:.3f} ms  timeline "
                    + " ".join(f"{k}={v * 1e3:.3f}ms" for k, v in r["compress_timeline"].items()))
            if "decompress_e2e_s" in r:
                line += (f"  d e2e {gb / r['decompress_e2e_s']:.0f} GB/s host "
                         f"{r['decompress_host_s'] * 1e3:.3f} ms timeline "
                         + " ".join(f"{k}={v * 1e3:.3f}ms" for k, v in r["decompress_timeline"].items()))
            if "choose_e2e_s" in r:
                line += (f"  choose {r['choose_e2e_s'] * 1e6:.0f} us (host {r['choose_host_s'] * 1e6:.0f}); phases "
                         + " ".join(f"{k}={v * 1e6:.0f}us" for k, v in r["choose_phases"].items()))
            print(line, flush=True)
            doc["runs"].append(r)
    print(f"copy {x.nbytes / copy / 1e9:.0f} GB/s ({copy * 1e3:.3f} ms)")
    default_cap = A.MAX_SAMPLE_ELEMS
    doc["sample_caps"] = []
    for cap in args.sample_caps:
        A.MAX_SAMPLE_ELEMS = cap
        A.sample_geometry.cache_clear()
        A._DEVICE_INDICES.clear()
        for rel in args.rel:
            eb = rel * (hi - lo)
            ch = A.choose_block_ndim(x, eb)
            t = statistics.median(events(lambda eb=eb: A.choose_block_ndim(x, eb), args.repeats))
            doc["sample_caps"].append({"cap": cap, "rel": rel, "choose_s": t, "block_ndim": ch.block_ndim,
                                       "estimated_bytes": ch.estimated_bytes, "sample_elems": ch.sample_elems})
            print(f"sample cap {cap}: REL {rel:g} choose {t * 1e6:.0f} us -> {ch.block_ndim}-D "
                  f"(estimated {ch.estimated_bytes})", flush=True)
    A.MAX_SAMPLE_ELEMS = default_cap
    A.sample_geometry.cache_clear()
    A._DEVICE_INDICES.clear()
    for r in doc["runs"]:
        if r["rel"] == args.rel[0] and r["shape"] in ("3-D", "auto"):
            print(f"--- profile compress {r['shape']} REL {r['rel']:g} ({args.repeats} calls)")
            print("\n".join(r["compress_profile"]))
            if "choose_profile" in r:
                print("--- profile choose")
                print("\n".join(r["choose_profile"]))
            if "decompress_profile" in r:
                print("--- profile decompress")
                print("\n".join(r["decompress_profile"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
