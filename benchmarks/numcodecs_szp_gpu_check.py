"""perfscout.szp as a numcodecs codec, Zarr v3 serializer and xarray encoding on a GPU.

One 256^3 float32 field (smooth, seeded) at abs bound 1e-3 * R: the numcodecs codec encodes
on the GPU (the chunk header says device=cuda), the NumPy reference decodes the GPU's chunk
to the same values and writes the same stream; a Zarr store (128^3 chunks) and an xarray
dataset are written and read back with the bound verified. On a machine without perfscout
installed (no entry points) importing perfscout.codecs.numcodecs.zarr3 registers the codecs.

    PYTHONPATH=$PWD python3 benchmarks/numcodecs_szp_gpu_check.py   # writes $OUT/issue21_gpu_check.json
"""
import json
import os
import sys
import time

import numpy as np

import perfscout.codecs.numcodecs.zarr3 as z3  # registers with numcodecs and zarr (no entry points here)
from perfscout.cli.codecs_cmd import codec_rows
from perfscout.codecs.framing import from_bytes
from perfscout.codecs.numcodecs import SZP
from perfscout.tools.bounds import verify_bound

out = {"argv": sys.argv}
rows = {r["id"]: r for r in codec_rows()}
out["szp_devices"] = rows["szp-gpu"]["devices"]
rng = np.random.default_rng(21)
n = 256
x = np.cumsum(np.cumsum(rng.standard_normal((n, n, n), dtype=np.float32), axis=0), axis=1).astype(np.float32)
eb = 1e-3 * float(x.max() - x.min())
gpu = SZP("abs", eb)
t0 = time.perf_counter()
blob = gpu.encode(x)
t1 = time.perf_counter()
comp, _ = from_bytes(blob)
out["encode_meta"] = {k: comp.meta.get(k) for k in ("device", "reason", "device_name", "format_version")}
y_gpu = gpu.decode(blob)
t2 = time.perf_counter()
y_cpu = SZP("abs", eb, device="cpu").decode(blob)  # the GPU's chunk decoded by the NumPy reference
cpu_blob = SZP("abs", eb, device="cpu").encode(x)
out["whole_field"] = {
    "shape": list(x.shape), "abs_bound": eb, "ratio": x.nbytes / len(blob),
    "encode_s_incl_verify": t1 - t0, "decode_s": t2 - t1,
    "bound": verify_bound(x, y_gpu, abs_bound=eb).status,
    "gpu_and_cpu_decode_identical": bool(np.array_equal(y_gpu, y_cpu)),
    # the chunks' headers differ by design (they record the device); the streams must not
    "gpu_and_cpu_stream_bytes_identical": comp.data == from_bytes(cpu_blob)[0].data,
}
import zarr  # noqa: E402

store = "/tmp/szp.zarr"
arr = zarr.create_array(store, shape=x.shape, chunks=(128, 128, 128), dtype="f4",
                        serializer=z3.SZP(mode="abs", bound=eb), compressors=None, overwrite=True)
t0 = time.perf_counter()
arr[:] = x
t1 = time.perf_counter()
back = zarr.open_array(store, mode="r")[:]
t2 = time.perf_counter()
chunk_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(store, "c")) for f in fs)
out["zarr"] = {"chunks": [128, 128, 128], "ratio": x.nbytes / chunk_bytes, "write_s": t1 - t0, "read_s": t2 - t1,
               "bound": verify_bound(x, back, abs_bound=eb).status}
import xarray as xr  # noqa: E402

xs = "/tmp/szp-xr.zarr"
xr.Dataset({"t": (("z", "y", "x"), x[:64])}).to_zarr(
    xs, mode="w", zarr_format=3, consolidated=False,
    encoding={"t": {"serializer": z3.SZP(mode="abs", bound=eb), "compressors": None}})
with xr.open_zarr(xs, consolidated=False) as ds:
    out["xarray"] = {"bound": verify_bound(x[:64], ds["t"].values, abs_bound=eb).status}
print(json.dumps(out, indent=1))
with open(os.path.join(os.environ.get("OUT", "/tmp"), "issue21_gpu_check.json"), "w") as fh:
    json.dump(out, fh, indent=1)
