#!/usr/bin/env bash
# One device call for issue #29 (benchmarks/results/szp_gpu_README.md, "Fair against cuSZp"),
# run on the GPU machine from the root of a perfscout tree, with beside it (never committed):
#   $CUSZP_SRC  a `git archive` of github.com/szcompressor/cuSZp (its commit in PERFSCOUT_COMMIT)
#   $DATA       the real fields of ../shared/data
#   $WHL        wheels the device image lacks (pydantic, pydantic-core, annotated-types,
#               typing-inspection, pysz, zfpy)
# Stages (in the order of STAGES; each under a timeout cut to DEADLINE_S, seconds from the start):
#   build  the wheels, libcuSZp.so (scripts/build_cuszp.sh) and benchmarks/cuszp_kernel_timer.cu
#   bench  benchmarks/gpu_fair.py bench (one process; JSON + log)
#   ab     szp-gpu alone on smooth3d at REL 1e-3 with each SZP_NVRTC_DEFINES of AB (';'-separated)
#   ncu    ncu --clock-control none of szp-gpu's and cuSZp's kernels (gpu_fair.py ncu)
#   tests  pytest -m gpu over the GPU tests and the GPU fuzz (TESTS)
# Files go to $OUT: gpu_fair_device_h200.log, gpu_fair_h200.json/.log, gpu_fair_ab_h200.log,
# gpu_fair_ncu_h200_details.txt / _raw.csv, gpu_fair_tests_h200.log.
set -u
T0=$(date +%s)
cap() { local want=$1; [ -z "${DEADLINE_S:-}" ] && { echo "$want"; return; }
        local left=$(( T0 + DEADLINE_S - 10 - $(date +%s) )); [ "$left" -lt 5 ] && left=5
        [ "$want" -lt "$left" ] && echo "$want" || echo "$left"; }
O=${OUT:-/tmp/o}; mkdir -p "$O"
CUSZP_SRC=${CUSZP_SRC:-../cuszp}; DATA=${DATA:-../data}; WHL=${WHL:-../whl}
STAGES=${STAGES:-build bench ncu tests}
export PYTHONUNBUFFERED=1 PERFSCOUT_SHARED_DATA=$(cd "$DATA" && pwd) PERFSCOUT_HOME=/tmp/ps_home
export PERFSCOUT_CUSZP_LIB=$PERFSCOUT_HOME/cuszp/lib/libcuSZp.so
TIMER=/tmp/libcuszp_timer.so
LOG=$O/gpu_fair_device_h200.log
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu --format=csv; nvcc --version | tail -2; } > "$LOG" 2>&1
step() { echo "== $(date -u +%T) (+$(( $(date +%s) - T0 )) s) $*" | tee -a "$LOG"; }

do_build() {
  step "install wheels"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHL"/*.whl \
    >>"$LOG" 2>&1 || { echo "wheel install failed" | tee -a "$LOG"; exit 1; }
  PYTHONPATH=/tmp/site:$PWD python3 -c "import perfscout.tools.gpu_eval, perfscout.codecs.registry" >>"$LOG" 2>&1 \
    || { echo "perfscout does not import with these wheels" | tee -a "$LOG"; tail -5 "$LOG"; exit 1; }
  step "build cuSZp"
  CUSZP_COMMIT=$(cat "$CUSZP_SRC/PERFSCOUT_COMMIT" 2>/dev/null || echo unknown) \
    timeout 240 scripts/build_cuszp.sh "$CUSZP_SRC" "$PERFSCOUT_HOME/cuszp" >>"$LOG" 2>&1
  echo "cuSZp build exit $?: $(cat $PERFSCOUT_CUSZP_LIB.json 2>/dev/null)" | tee -a "$LOG"
  step "build the cuSZp kernel timer"
  timeout 180 nvcc -O3 -DNDEBUG -arch=sm_90 -shared -Xcompiler -fPIC -I"$CUSZP_SRC/include" -I"$CUSZP_SRC/include/cuSZp" \
    -o $TIMER benchmarks/cuszp_kernel_timer.cu "$CUSZP_SRC"/src/cuSZp_kernels_{1,2,3}D_f32.cu >>"$LOG" 2>&1
  echo "timer build exit $?" | tee -a "$LOG"
}
export PYTHONPATH=/tmp/site:$PWD
# the GPU tests profile under ncu inside the OS sandbox: bubblewrap from the carried .deb
# (.device/sandbox/deb, as benchmarks/sandbox_device.sh uses it) when the image has none
if ! command -v bwrap >/dev/null && ls .device/sandbox/deb/bubblewrap*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/bw && for f in .device/sandbox/deb/*.deb; do dpkg -x "$f" /tmp/bw; done
  export PERFSCOUT_BWRAP=/tmp/bw/usr/bin/bwrap
fi
# tests start the CLI in a cleaned environment (no PYTHONPATH): a .pth file in the image's own
# site-packages lets those processes see the carried wheels and this tree too
SP=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '/tmp/site\n%s\n' "$PWD" > "$SP/zz_perfscout_device.pth" 2>/dev/null \
  || echo "cannot write $SP: tests that start the CLI will not import the carried wheels"

do_bench() {
  step "benchmark"
  timeout $(cap ${BENCH_S:-300}) python3 benchmarks/gpu_fair.py bench --data "$DATA" --out "$O/gpu_fair_h200.json" \
    --timer $TIMER --repeats ${REPEATS:-7} ${BENCH_ARGS:-} > "$O/gpu_fair_h200.log" 2>&1
  echo "bench exit $?" | tee -a "$LOG"
  tail -40 "$O/gpu_fair_h200.log"
}

do_ab() {
  step "A/B of szp-gpu builds"
  IFS=';' read -ra VARIANTS <<< "${AB:-}"
  for v in "" "${VARIANTS[@]}"; do
    echo "-- SZP_NVRTC_DEFINES='$v'" >> "$O/gpu_fair_ab_h200.log"
    SZP_NVRTC_DEFINES="$v" timeout $(cap 60) python3 benchmarks/gpu_fair.py bench --codecs szp --fields smooth3d,vorticity.512_512 \
      --bounds 1e-3 --data "$DATA" --out /tmp/ab.json --repeats 7 2>&1 | grep -v "^{" >> "$O/gpu_fair_ab_h200.log"
  done
  tail -30 "$O/gpu_fair_ab_h200.log"
}

do_ncu() {
  step "ncu"
  command -v ncu >/dev/null || { echo "no ncu" | tee -a "$LOG"; return; }
  # NCU_FULL=1: --set full (source counters too) of szp-gpu's two main kernels only, skipping
  # the shape choice's three small szp_compress launches
  if [ "${NCU_FULL:-0}" = 1 ]; then
    SEL=(--set full -k 'regex:^szp_(compress|decompress)$' --launch-skip 3 -c 2); TAG=_full
  else
    SEL=(--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats
         --section InstructionStats --section SchedulerStats --section ComputeWorkloadAnalysis
         --section MemoryWorkloadAnalysis -k 'regex:szp_(compress|decompress|width_scan|corner_scan|corner_unpack)|cuSZp_'
         -c ${NCU_C:-12}); TAG=
  fi
  timeout $(cap ${NCU_S:-150}) ncu --clock-control none "${SEL[@]}" -f -o /tmp/fair \
    python3 benchmarks/gpu_fair.py ncu --data "$DATA" --gib ${NCU_GIB:-0.5} --bounds 1e-3 >> "$LOG" 2>&1
  echo "ncu exit $?" | tee -a "$LOG"
  ncu --import /tmp/fair.ncu-rep --csv --page raw > "$O/gpu_fair_ncu${TAG}_h200_raw.csv" 2>>"$LOG"
  ncu --import /tmp/fair.ncu-rep --page details > "$O/gpu_fair_ncu${TAG}_h200_details.txt" 2>>"$LOG"
  [ -n "$TAG" ] && ncu --import /tmp/fair.ncu-rep --page source --csv --print-source sass > "$O/gpu_fair_ncu${TAG}_h200_sass.csv" 2>>"$LOG"
  grep -E "^  [a-zA-Z_]+.*\(|Duration|DRAM Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Registers Per|Achieved Occupancy|Theoretical Occupancy" \
    "$O/gpu_fair_ncu${TAG}_h200_details.txt" | head -120
}

do_tests() {
  step "GPU tests"
  timeout $(cap ${TESTS_S:-300}) python3 -m pytest -m gpu ${TESTS:-tests/gpu tests/unit/test_szp_fuzz.py tests/unit/test_gpu_peers_host.py} \
    -p no:cacheprovider -q -rfE --tb=short --durations=10 > "$O/gpu_fair_tests_h200.log" 2>&1
  echo "tests exit $?" | tee -a "$LOG"
  tail -25 "$O/gpu_fair_tests_h200.log"
}

for stage in $STAGES; do "do_$stage"; done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$LOG" 2>&1
step "done"
