#!/usr/bin/env bash
# One device call for issue #27 after the metric kernels became a library compiled ahead of
# time (perfscout/analysis/stream_native.py), from the root of a perfscout tree with the wheels
# the image lacks in .whl/ (cp312; the list is in benchmarks/results/README.md, "One pipeline
# on the H200"), carried with `carry: [".whl"]`:
#   1. the library built on this machine (its CPU, its compiler), the time it took;
#   2. the isolation benchmark, 10 fresh processes, NumPy's huge-page advice off;
#   3. the library's tests and the compiled metric pass's tests (every figure test on both
#      forms of the kernels: this CPU's machine code against numba's JIT);
#   4. the one pipeline's GPU-side tests, as at stop 35.
# Files go to $OUT: native_kernels_device_h200.log, isolation_fresh_h200_native.{json,log},
# native_kernels_tests_h200.log, native_kernels_gpu_tests_h200.log.
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"; LOG=$O/native_kernels_device_h200.log
{ date -u; nvidia-smi -L; nproc; uptime; python3 --version; command -v cc; cc --version | head -1; } > "$LOG" 2>&1
. benchmarks/device_common.sh
device_setup || exit 1
device_build_kernels
device_isolation isolation_fresh_h200_native
echo "== kernel tests $(date -u +%T)" | tee -a "$LOG"
timeout 150 python3 -m pytest tests/unit/test_stream_native.py tests/unit/test_stream_compiled.py \
  -p no:cacheprovider -q -rfEs --tb=short -n 8 > "$O/native_kernels_tests_h200.log" 2>&1 \
  || timeout 150 python3 -m pytest tests/unit/test_stream_native.py tests/unit/test_stream_compiled.py \
  -p no:cacheprovider -q -rfEs --tb=short -x >> "$O/native_kernels_tests_h200.log" 2>&1
echo "kernel tests exit $?" | tee -a "$LOG"; tail -3 "$O/native_kernels_tests_h200.log"
echo "== gpu tests $(date -u +%T)" | tee -a "$LOG"
timeout 150 python3 -m pytest tests/unit/test_agent_evaluations_are_sweep_tasks.py tests/gpu/test_sweep_gpu_worker.py \
  tests/gpu/test_gpu_eval_releases_its_arrays.py -p no:cacheprovider -q -rfEs --tb=short \
  > "$O/native_kernels_gpu_tests_h200.log" 2>&1
echo "gpu tests exit $?" | tee -a "$LOG"; tail -3 "$O/native_kernels_gpu_tests_h200.log"
echo "== done $(date -u +%T)" | tee -a "$LOG"
