#!/usr/bin/env bash
# Profile the planted suite on the GPU machine; everything lands in $OUT (<= 8 files).
#   bash benchmarks/planted/profile_on_device.sh
# 1. nvidia-smi + ncu version; 2. CUDA-event timings and host launch timing (no profiler);
# 3. one ncu run over every pk_ kernel (--set full, clocks left alone), then the report
#    exported as the raw page (metrics) and the details page (ncu's own rule messages).
set -u
OUT=${OUT:-/tmp/planted_out}
mkdir -p "$OUT"
cd "$(dirname "$0")"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
{ nvidia-smi; nvidia-smi -q | grep -iE "clocks|MHz" | head -40; "$NCU" --version; } > "$OUT/device.txt" 2>&1
export PYTHONUNBUFFERED=1
echo "== time mode" > "$OUT/run.log"
timeout 120 python3 run_suite.py --mode time --out "$OUT/timings.json" >> "$OUT/run.log" 2>&1
echo "== ncu (rc below)" >> "$OUT/run.log"
timeout 300 "$NCU" --set full --clock-control none -k regex:^pk_ -c 60 --import-source no \
    -f -o /tmp/planted python3 run_suite.py --mode profile >> "$OUT/run.log" 2>&1
echo "ncu rc=$?" >> "$OUT/run.log"
"$NCU" --import /tmp/planted.ncu-rep --csv --page raw > "$OUT/planted_raw.csv" 2>> "$OUT/run.log"
"$NCU" --import /tmp/planted.ncu-rep --csv --page details > "$OUT/planted_details.csv" 2>> "$OUT/run.log"
"$NCU" --import /tmp/planted.ncu-rep --page details --print-details all > "$OUT/planted_details.txt" 2>> "$OUT/run.log" \
  || "$NCU" --import /tmp/planted.ncu-rep --page details > "$OUT/planted_details.txt" 2>> "$OUT/run.log"
cp /tmp/planted.ncu-rep "$OUT/planted.ncu-rep" 2>/dev/null
ls -la "$OUT" >> "$OUT/run.log"
tail -5 "$OUT/run.log"; grep -c '^"' "$OUT/planted_raw.csv"
