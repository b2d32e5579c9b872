#!/usr/bin/env bash
# One device call to verify the szp-gpu kernels (format v4; v7 kernels with chained blocks) and record their
# numbers (benchmarks/results/szp_gpu_README.md): install the wheels the device image lacks,
# the GPU tests of the szp kernels (byte identity with the NumPy reference for formats 2 and
# 3 on random, adversarial, corner-only and the real fields, chunking, v1/v2 streams decoded
# on the GPU, corrupt corners sections, no local memory, 64-bit-index builds), $NPROC
# parallel GPU fuzz processes of $FUZZ_N arrays each, then the quick benchmark (FULL=1: the
# full one). Run from the repository root on the device with .device/gpu_peers/data and the
# pydantic wheels of .device/gpu_peers/whl carried (see benchmarks/gpu_peers_device.sh).
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"
TAG=${TAG:-v7}
FUZZ_N=${FUZZ_N:-1500}; NPROC=${NPROC:-8}; SEED0=${SEED0:-41}
G=.device/gpu_peers
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $G/whl/*.whl \
  || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PERFSCOUT_SHARED_DATA=$PWD/$G/data PYTHONUNBUFFERED=1
L=$O/szp_gpu_${TAG}_tests_h200.log
{ date -u; nvidia-smi -L; git log -1 --format='base commit %H %s' 2>/dev/null; } > "$L"
python3 - >> "$L" 2>&1 <<'PY'
import cupy as cp
from perfscout.codecs.szp import gpu as G
print("NVRTC", cp.cuda.nvrtc.getVersion(), "CuPy", cp.__version__, "runtime", cp.cuda.runtime.runtimeGetVersion())
for fmt in (4, 3, 2):
    for dt in ("float32", "float64"):
        for bnd in (1, 2, 3):
            for wide in (False, True):
                m = G._module(dt, bnd, wide, fmt)
                ks = ["szp_compress", "szp_decompress", "szp_width_scan"] + (["szp_corner_scan", "szp_corner_pack", "szp_corner_unpack"] if fmt >= 3 else [])
                print(f"fmt{fmt} {dt} b{bnd} {'wide' if wide else 'narrow'}: " + "  ".join(
                    f"{k[4:]}:{m.get_function(k).num_regs}r/{m.get_function(k).local_size_bytes}L" for k in ks))
PY
echo "== pytest -m gpu tests/gpu/test_szp_gpu.py tests/unit/test_szp_fuzz.py (not the long fuzz)" >> "$L"
timeout ${TESTS_S:-200} python3 -m pytest -q -m gpu tests/gpu/test_szp_gpu.py tests/unit/test_szp_fuzz.py \
  -k "not seeded_fuzz_gpu" --maxfail=10 -p no:cacheprovider >> "$L" 2>&1
echo "pytest exit $?" >> "$L"
for k in $(seq 0 $((NPROC - 1))); do s=$((SEED0 + k)); (SZP_GPU_FUZZ_N=$FUZZ_N SZP_GPU_FUZZ_SEED=$s timeout ${FUZZ_S:-150} \
  python3 -m pytest -q -m gpu tests/unit/test_szp_fuzz.py -k seeded_fuzz_gpu -p no:cacheprovider > /tmp/fuzz_$s.log 2>&1;
  echo "seed $s exit $?" >> /tmp/fuzz_$s.log) & done
wait
for k in $(seq 0 $((NPROC - 1))); do s=$((SEED0 + k)); echo "== SZP_GPU_FUZZ_N=$FUZZ_N SZP_GPU_FUZZ_SEED=$s pytest -m gpu tests/unit/test_szp_fuzz.py -k seeded_fuzz_gpu"; tail -3 /tmp/fuzz_$s.log; done >> "$L"
cat "$L" | tail -40
if [ "${FULL:-0}" = 1 ]; then
  timeout ${BENCH_S:-250} python3 benchmarks/gpu_codec.py bench --out "$O/szp_gpu_bench_h200_${TAG}.json" > "$O/szp_gpu_bench_h200_${TAG}.log" 2>&1
else
  timeout ${BENCH_S:-120} python3 benchmarks/gpu_codec.py bench --quick --out "$O/szp_gpu_bench_h200_${TAG}_quick.json" > "$O/szp_gpu_bench_h200_${TAG}.log" 2>&1
fi
echo "bench exit $?"; tail -30 "$O/szp_gpu_bench_h200_${TAG}.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$O/szp_gpu_${TAG}_device_h200.txt"
