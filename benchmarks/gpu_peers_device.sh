#!/usr/bin/env bash
# One device call for the GPU peers (issue #14), run from the repository root on the GPU machine
# with .device/gpu_peers carried (never committed):
#   .device/gpu_peers/whl/     wheels the device image lacks: nvidia-nvcomp-cu13 + nvidia-libnvcomp-cu13,
#                              pydantic(+core, annotated-types, typing-inspection), pysz, zfpy
#   .device/gpu_peers/cuSZp/   `git archive` of github.com/szcompressor/cuSZp (commit in cuSZp.commit)
#   .device/gpu_peers/data/    the real fields of ../shared/data
# Steps, each under its own timeout so the call ends inside its limit with what it has:
#   1. install the wheels into /tmp/site; 2. build libcuSZp.so for this GPU (scripts/build_cuszp.sh);
#   3. the GPU tests of the peers; 4. the benchmark (benchmarks/gpu_peers.py, one process, JSON);
#   5. the GPU sweep end to end through the CLI (examples/sweep_gpu.yaml) and its report.
#   cost: where a sweep task's seconds go (interpreter + imports, CUDA context, one `perfscout
#   eval` per backend on a 1 GiB field with its phases_s, a 6-task sweep timed per task).
# Usage: [STAGES="tests bench sweep"] [SWEEP_S=230] [BENCH_S=210] [TESTS_S=150] [DEADLINE_S=580]
#        [TESTS="tests/gpu/test_cuszp.py ..."]
#        bash benchmarks/gpu_peers_device.sh [TAG]
# (stages run in the order given)
# (files go to $OUT, named *_TAG.*; TAG default h200). The sweep's run directory comes back as
# sweep_gpu_run_TAG.tar.gz; put it at .device/gpu_peers/sweep_run.tar.gz and the next call
# resumes it (task keys hash the data's content, so the re-made tiled files match).
set -u
T=${1:-h200}
# DEADLINE_S (seconds from now, optional): every stage's timeout is cut to what is left before it,
# less 15 s for the files to be written, so the whole call ends inside the device's limit
T0=$(date +%s)
cap() { local want=$1; [ -z "${DEADLINE_S:-}" ] && { echo "$want"; return; }
        local left=$(( T0 + DEADLINE_S - 15 - $(date +%s) )); [ "$left" -lt 5 ] && left=5
        [ "$want" -lt "$left" ] && echo "$want" || echo "$left"; }
STAGES=${STAGES:-tests bench sweep}
O=${OUT:-/tmp/o}; mkdir -p "$O"
G=.device/gpu_peers
export PYTHONUNBUFFERED=1 PERFSCOUT_SHARED_DATA=$PWD/$G/data PERFSCOUT_HOME=/tmp/ps_home
LOG=$O/gpu_peers_device_$T.log
{ date -u; nvidia-smi -L; git log -1 --format='base commit %H %s' 2>/dev/null; } > "$LOG"
step() { echo "== $(date -u +%T) $*" | tee -a "$LOG"; }

step "install wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $G/whl/*.whl \
  >>"$LOG" 2>&1 || { echo "wheel install failed" | tee -a "$LOG"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD

step "build cuSZp"
S=$(date +%s)
CUSZP_COMMIT=$(cat $G/cuSZp.commit 2>/dev/null || echo unknown) \
  timeout 240 scripts/build_cuszp.sh $G/cuSZp "$PERFSCOUT_HOME/cuszp" >>"$LOG" 2>&1
echo "build exit $? in $(( $(date +%s) - S )) s; $(cat $PERFSCOUT_HOME/cuszp/lib/libcuSZp.so.json 2>/dev/null)" | tee -a "$LOG"
export PERFSCOUT_CUSZP_LIB=$PERFSCOUT_HOME/cuszp/lib/libcuSZp.so
python3 - <<'EOF' 2>&1 | tee -a "$LOG"
from perfscout.codecs.registry import list_codecs
for c in list_codecs():
    print(f"{c.id:16} {c.device:5} available={c.available} {c.version} {c.reason}")
EOF

do_tests() {
step "GPU tests"
timeout $(cap ${TESTS_S:-150}) python3 -m pytest -m gpu ${TESTS:-tests/gpu/test_cuszp.py tests/gpu/test_nvcomp.py} \
  -p no:cacheprovider -v -rfE --tb=short --durations=8 > "$O/gpu_peers_tests_$T.log" 2>&1
echo "tests exit $?" | tee -a "$LOG"
grep -E "^(FAILED|ERROR)|passed|failed" "$O/gpu_peers_tests_$T.log" | tail -30 | tee -a "$LOG"
}

do_bench() {
step "benchmark"
S=$(date +%s)
timeout $(cap ${BENCH_S:-210}) python3 benchmarks/gpu_peers.py bench --data $G/data --out "$O/gpu_peers_bench_$T.json" \
  --repeats 5 ${BENCH_ARGS:-} > "$O/gpu_peers_bench_$T.log" 2>&1
echo "bench exit $? in $(( $(date +%s) - S )) s" | tee -a "$LOG"
tail -3 "$O/gpu_peers_bench_$T.log"
}

do_sweep() {
step "sweep"
[ -f runs/gpu_data/smooth3d.synthetic.f32 ] || timeout 90 python3 benchmarks/gpu_peers.py tile --data $G/data --out runs/gpu_data >>"$LOG" 2>&1
rm -rf runs/gpu; RESUME=""
if [ -f $G/sweep_run.tar.gz ]; then mkdir -p runs && tar -xzf $G/sweep_run.tar.gz -C runs && RESUME=--resume; fi
S=$(date +%s)
timeout -s INT $(cap ${SWEEP_S:-230}) python3 -m perfscout sweep examples/sweep_gpu.yaml --out runs/gpu --no-progress $RESUME \
  >> "$O/sweep_gpu_$T.log" 2>&1
echo "sweep exit $? in $(( $(date +%s) - S )) s" | tee -a "$LOG"
S=$(date +%s)
timeout $(cap 90) python3 -m perfscout report runs/gpu >> "$O/sweep_gpu_$T.log" 2>&1
echo "report exit $? in $(( $(date +%s) - S )) s" | tee -a "$LOG"
python3 - <<'EOF' 2>&1 | tee -a "$LOG"
# per-task seconds: results in completion order (GPU tasks run one at a time), and what the
# evaluation itself spent (gpu_detail's phases_s)
import glob, json, os
from perfscout.analysis.report.gpu import parse_detail
rows = []
for f in glob.glob("runs/gpu/raw/*/result.json"):
    r = json.load(open(f))
    if str(r.get("device", "")).startswith("cuda"):
        rows.append((os.path.getmtime(f), r, sum(((parse_detail(r.get("error")) or {}).get("phases_s") or {}).values())))
rows.sort(key=lambda t: t[0])
gaps = [b[0] - a[0] for a, b in zip(rows, rows[1:])]
if gaps:
    print(f"GPU tasks: {len(rows)}; seconds between completions: median {sorted(gaps)[len(gaps)//2]:.2f}, "
          f"max {max(gaps):.2f}; evaluation's own phases: median {sorted(t[2] for t in rows)[len(rows)//2]:.2f} s")
EOF
cp runs/gpu/report.md "$O/sweep_gpu_report_$T.md" 2>/dev/null
cp runs/gpu/results.csv "$O/sweep_gpu_results_$T.csv" 2>/dev/null
tar -czf "$O/sweep_gpu_run_$T.tar.gz" -C runs gpu 2>/dev/null
}

do_cost() {
step "cost"
timeout 90 python3 benchmarks/gpu_peers.py tile --data $G/data --out runs/gpu_data >>"$LOG" 2>&1
C=$O/gpu_peers_cost_$T.log
TIMEFORMAT="%R s"
{ echo "-- interpreter + perfscout imports (x2)"; for i in 1 2; do time python3 -c "import perfscout.tools.evaluate, perfscout.tools.gpu_eval, perfscout.sweep.worker"; done
  echo "-- + CuPy and a CUDA context (x2)"; for i in 1 2; do time python3 -c "import cupy; cupy.zeros(1).sum().item()"; done
  echo "-- + loading 1 GiB (np.fromfile) and isfinite"; time python3 -c "import numpy as n; a=n.fromfile('runs/gpu_data/999x999.float.tiled17x17.f32','<f4'); n.isfinite(a).all()"
  for c in szp-gpu cuszp-outlier nvcomp-bitcomp; do
    echo "-- perfscout eval $c rel 1e-3 on 999x999.tiled (1.07 GiB)"
    time timeout 60 python3 -m perfscout eval --data runs/gpu_data/999x999.float.tiled17x17.f32 --shape 16983,16983 \
      --dtype f32 --codec $c --mode rel --bound 1e-3 --device cuda --repeats 5 --json > /tmp/cost_$c.json
    python3 -c "import json,sys; from perfscout.analysis.report.gpu import parse_detail as p; r=json.load(open('/tmp/cost_$c.json')); d=p(r['error']) or {}; print(r['status'], 'CR', r['ratio'], 'phases', d.get('phases_s'))"
  done
  printf 'name: cost\nrepeats: 5\nexperiments:\n  - name: e\n    datasets: [{path: %s, shape: [16983, 16983], label: t}]\n    codecs: [szp-gpu, cuszp-plain, cuszp-outlier]\n    devices: [cuda]\n    bounds: {rel: [1.0e-2, 1.0e-3]}\n' \
    "$PWD/runs/gpu_data/999x999.float.tiled17x17.f32" > /tmp/cost.yaml
  echo "-- sweep of 6 GPU tasks"; rm -rf /tmp/cost_run
  time timeout 120 python3 -m perfscout sweep /tmp/cost.yaml --out /tmp/cost_run --no-progress
  python3 -c "
import json,glob
from perfscout.analysis.report.gpu import parse_detail as p
import os
for f in sorted(glob.glob('/tmp/cost_run/raw/*/result.json'), key=os.path.getmtime):
    r=json.load(open(f)); d=p(r.get('error')) or {}; ph=d.get('phases_s') or {}
    print(r['started_at'], 'done at', round(os.path.getmtime(f) % 3600, 2),
          r['codec'], r['bound'], r['status'], round(sum(ph.values()), 2), ph)
"
} > "$C" 2>&1
tail -40 "$C" | tee -a "$LOG"
}

for stage in $STAGES; do "do_$stage"; done  # in the order given
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit,temperature.gpu \
  --format=csv >> "$LOG" 2>&1
step "done"
