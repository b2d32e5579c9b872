# Sourced by the device scripts (benchmarks/*_device.sh), from the root of a perfscout tree
# with the wheels the GPU machine's image lacks in .whl/ (cp312; the list is in
# benchmarks/results/README.md, "One pipeline on the H200"). Needs O (the output folder) and
# LOG (the script's log) set.

# The wheels into /tmp/site, perfscout and them on the path of this shell and of every
# Python it starts (tests run the CLI in a cleaned environment: a .pth file lets it see both).
device_setup() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >>"$LOG" 2>&1 || { echo "wheels failed" | tee -a "$LOG"; return 1; }
  export PYTHONPATH=/tmp/site:$PWD PERFSCOUT_HOME=/tmp/ps_home PYTHONUNBUFFERED=1
  local sp
  sp=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  printf '/tmp/site\n%s\n' "$PWD" > "$sp/zz_perfscout_device.pth" 2>>"$LOG"
}

# The metric kernels' library built (or loaded) on this machine: one JSON line into $LOG.
device_build_kernels() {
  echo "== build $(date -u +%T)" | tee -a "$LOG"
  python3 - >>"$LOG" 2>&1 <<'EOF'
import json, sys, time
t = time.perf_counter()
from perfscout.analysis import stream_native as N
k = N.load()
built_s = time.perf_counter() - t
print(json.dumps({"built_s": round(built_s, 3), "library": str(N.library_path()), "loaded": k is not None,
                  "why_not": N.last_failure(), "numba_imported": "numba" in sys.modules}))
EOF
  tail -1 "$LOG"
}

# The isolation benchmark (10 fresh processes, NumPy's huge-page advice off) into $O/NAME.{json,log}.
device_isolation() {
  local name=$1
  echo "== isolation $(date -u +%T)" | tee -a "$LOG"
  NUMPY_MADVISE_HUGEPAGE=0 timeout 200 python3 benchmarks/isolation_fresh.py --mib 256 --processes 10 \
    --out "$O/$name.json" > "$O/$name.log" 2>&1
  echo "isolation exit $?" | tee -a "$LOG"; tail -1 "$O/$name.log"
}
