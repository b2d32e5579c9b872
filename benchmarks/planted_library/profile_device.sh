#!/usr/bin/env bash
# Profile the library-kernel suite on the GPU machine; everything lands in $OUT (<= 8 files).
#   bash benchmarks/planted_library/profile_device.sh
# 1. nvidia-smi + ncu version; 2. CUDA-event timings and host launch timing (no profiler);
# 3. one ncu run (--set full, clocks left alone, --profile-from-start off: only the one
#    profiled call of each case, never the warm-ups), exported as the raw page (metrics)
#    and the details page (ncu's own rule messages). The log maps launches to cases.
set -u
OUT=${OUT:-/tmp/library_out}
mkdir -p "$OUT"
cd "$(dirname "$0")"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
{ nvidia-smi; nvidia-smi -q | grep -iE "clocks|MHz" | head -40; "$NCU" --version;
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__)"; } \
  > "$OUT/device.txt" 2>&1
export PYTHONUNBUFFERED=1
echo "== time mode" > "$OUT/run.log"
timeout 80 python3 run_library.py --mode time --out "$OUT/timings.json" >> "$OUT/run.log" 2>&1
echo "time rc=$?" >> "$OUT/run.log"
echo "== ncu (rc below)" >> "$OUT/run.log"
timeout 250 "$NCU" --set full --clock-control none --profile-from-start off --nvtx -c 120 \
    --import-source no -f -o /tmp/library python3 run_library.py --mode profile >> "$OUT/run.log" 2>&1
echo "ncu rc=$?" >> "$OUT/run.log"
"$NCU" --import /tmp/library.ncu-rep --csv --page raw > "$OUT/library_raw.csv" 2>> "$OUT/run.log"
"$NCU" --import /tmp/library.ncu-rep --csv --page details > "$OUT/library_details.csv" 2>> "$OUT/run.log"
ls -la /tmp/library.ncu-rep "$OUT" >> "$OUT/run.log" 2>&1
tail -5 "$OUT/run.log"; grep -c '^"' "$OUT/library_raw.csv"
