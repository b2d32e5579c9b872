#!/usr/bin/env bash
# Profile the library-kernel suite on the GPU machine; everything lands in $OUT (<= 8 files).
#   bash benchmarks/planted_library/profile_device.sh
#   ONLY=a,b PREFIX=fixes bash benchmarks/planted_library/profile_device.sh   # a subset, files fixes_*
# 1. nvidia-smi + ncu version; 2. CUDA-event timings and host launch timing (no profiler);
# 3. one ncu run (--set full, clocks left alone, --profile-from-start off: only the one
#    profiled call of each case, never the warm-ups), exported as the raw page (metrics)
#    and the details page (ncu's own rule messages). The log maps launches to cases.
set -u
OUT=${OUT:-/tmp/library_out}
PREFIX=${PREFIX:-library}
ONLY_ARGS=()
[ -n "${ONLY:-}" ] && ONLY_ARGS=(--only "$ONLY")
# The full suite writes device.txt, run.log, timings.json (as committed in profiles/); a
# subset run prefixes them with PREFIX_. The CSVs are always PREFIX_raw.csv / _details.csv.
P=""
[ "$PREFIX" != library ] && P="${PREFIX}_"
mkdir -p "$OUT"
cd "$(dirname "$0")"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | tail -1)
{ nvidia-smi; nvidia-smi -q | grep -iE "clocks|MHz" | head -40; "$NCU" --version;
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cupy', cupy.__version__)"; } \
  > "$OUT/${P}device.txt" 2>&1
export PYTHONUNBUFFERED=1
LOG="$OUT/${P}run.log"
echo "== time mode" > "$LOG"
timeout 80 python3 run_library.py --mode time "${ONLY_ARGS[@]}" --out "$OUT/${P}timings.json" >> "$LOG" 2>&1
echo "time rc=$?" >> "$LOG"
echo "== ncu (rc below)" >> "$LOG"
timeout 250 "$NCU" --set full --clock-control none --profile-from-start off --nvtx -c 120 \
    --import-source no -f -o "/tmp/$PREFIX" python3 run_library.py --mode profile "${ONLY_ARGS[@]}" >> "$LOG" 2>&1
echo "ncu rc=$?" >> "$LOG"
"$NCU" --import "/tmp/$PREFIX.ncu-rep" --csv --page raw > "$OUT/${PREFIX}_raw.csv" 2>> "$LOG"
"$NCU" --import "/tmp/$PREFIX.ncu-rep" --csv --page details > "$OUT/${PREFIX}_details.csv" 2>> "$LOG"
ls -la "/tmp/$PREFIX.ncu-rep" "$OUT" >> "$LOG" 2>&1
tail -5 "$LOG"; grep -c '^"' "$OUT/${PREFIX}_raw.csv"
