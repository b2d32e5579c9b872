#!/usr/bin/env bash
# One device call to try a szp-gpu kernel change (benchmarks/results/szp_gpu_README.md, "v4"):
# GPU tests (byte identity with the NumPy reference, reduced fuzz), the quick benchmark
# (copy + smooth3d at REL 1e-3), and a short ncu profile. Everything is logged under $OUT,
# file names tagged with $TAG (default v4). Run from the repository root on the device,
# after the pydantic wheels are installed (see the README for the full command).
set -u
OUT=${OUT:-/tmp/szp_try_out}
TAG=${TAG:-v4}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi -L > "$OUT/szp_gpu_${TAG}_device.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu \
  --format=csv >> "$OUT/szp_gpu_${TAG}_device.txt" 2>&1
SZP_GPU_FUZZ_N=${SZP_GPU_FUZZ_N:-6000} SZP_GPU_FUZZ_SEED=${SZP_GPU_FUZZ_SEED:-5} \
  timeout 130 python3 -m pytest -q -m gpu tests/gpu tests/unit/test_szp_fuzz.py -k gpu 2>&1 \
  | tee "$OUT/szp_gpu_${TAG}_tests_h200.log"
echo "pytest exit: ${PIPESTATUS[0]}" | tee -a "$OUT/szp_gpu_${TAG}_tests_h200.log"
timeout 100 python3 benchmarks/gpu_codec.py bench --quick --out "$OUT/szp_gpu_bench_h200_${TAG}_quick.json" 2>&1 \
  | tee "$OUT/szp_gpu_bench_h200_${TAG}_quick.log"
if command -v ncu >/dev/null; then
  timeout 100 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
    --section Occupancy --section LaunchStats --section InstructionStats --section SchedulerStats \
    -k 'regex:szp_(compress|decompress)' -c 2 -f -o /tmp/szp_${TAG} \
    python3 benchmarks/gpu_codec.py ncu > "$OUT/szp_gpu_${TAG}_ncu_run.log" 2>&1
  ncu --import /tmp/szp_${TAG}.ncu-rep --csv --page raw > "$OUT/szp_gpu_ncu_h200_${TAG}_raw.csv" 2>&1
  ncu --import /tmp/szp_${TAG}.ncu-rep --page details > "$OUT/szp_gpu_ncu_h200_${TAG}_details.txt" 2>&1
  grep -E "szp_|Duration|Memory Throughput|DRAM Throughput|Issue Slots|Executed Ipc|Registers Per|Achieved Occupancy|Theoretical Occupancy|Executed Instructions  " \
    "$OUT/szp_gpu_ncu_h200_${TAG}_details.txt" | head -60
else
  echo "ncu not found" | tee "$OUT/szp_gpu_${TAG}_ncu_run.log"
fi
