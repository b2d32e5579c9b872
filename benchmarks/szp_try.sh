#!/usr/bin/env bash
# One device call to try a szp-gpu kernel change (benchmarks/results/szp_gpu_README.md):
# GPU tests (byte identity with the NumPy reference on random, adversarial and real fields,
# reduced fuzz), the quick benchmark (copy + smooth3d at REL 1e-3), the full benchmark when
# FULL=1, and a short ncu profile. Everything is logged under $OUT, file names tagged with
# $TAG. Run from the repository root on the device, after the pydantic wheels are installed
# (see the README for the full command); the real fields come from .device/data (ignored,
# carried with the call).
set -u
OUT=${OUT:-/tmp/szp_try_out}
TAG=${TAG:-v5}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PERFSCOUT_SHARED_DATA=$PWD/.device/data
LOG="$OUT/szp_gpu_${TAG}_tests_h200.log"
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,temperature.gpu \
  --format=csv; } > "$OUT/szp_gpu_${TAG}_device.txt" 2>&1
SZP_GPU_FUZZ_N=${SZP_GPU_FUZZ_N:-6000} SZP_GPU_FUZZ_SEED=${SZP_GPU_FUZZ_SEED:-5} \
  timeout 240 python3 -m pytest -q -m gpu tests/gpu tests/unit/test_szp_fuzz.py -k gpu 2>&1 | tee "$LOG"
echo "pytest exit: ${PIPESTATUS[0]}" | tee -a "$LOG"
timeout 100 python3 benchmarks/gpu_codec.py bench --quick --out "$OUT/szp_gpu_bench_h200_${TAG}_quick.json" 2>&1 | tail -12
if [ -n "${AB_DEFINES:-}" ]; then  # the same quick benchmark with extra kernel defines
  echo "== A/B: SZP_NVRTC_DEFINES=$AB_DEFINES"
  SZP_NVRTC_DEFINES="$AB_DEFINES" timeout 100 python3 benchmarks/gpu_codec.py bench --quick \
    --out "$OUT/szp_gpu_bench_h200_${TAG}_quick_ab.json" 2>&1 | tail -5
fi
if [ "${FULL:-0}" = 1 ]; then
  timeout 300 python3 benchmarks/gpu_codec.py bench --out "$OUT/szp_gpu_bench_h200_${TAG}.json" 2>&1 \
    | tee "$OUT/szp_gpu_bench_h200_${TAG}.log" | tail -24
fi
if [ "${NCU:-1}" = 1 ] && command -v ncu >/dev/null; then
  timeout 120 ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
    --section Occupancy --section LaunchStats --section InstructionStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis -k 'regex:szp_(compress|decompress|width_scan)' -c 3 -f -o /tmp/szp_${TAG} \
    python3 benchmarks/gpu_codec.py ncu >> "$LOG" 2>&1
  ncu --import /tmp/szp_${TAG}.ncu-rep --csv --page raw > "$OUT/szp_gpu_ncu_h200_${TAG}_raw.csv" 2>&1
  ncu --import /tmp/szp_${TAG}.ncu-rep --page details > "$OUT/szp_gpu_ncu_h200_${TAG}_details.txt" 2>&1
  grep -E "szp_|Duration|DRAM Throughput|Issue Slots|Registers Per|Achieved Occupancy|Executed Instructions  |Pipe" \
    "$OUT/szp_gpu_ncu_h200_${TAG}_details.txt" | head -60
else
  echo "ncu not found" | tee -a "$LOG"
fi
