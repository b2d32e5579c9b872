#!/usr/bin/env bash
# One device call for issue #27 after SSIM's window sums became float64 (run from the root of
# a perfscout tree with the wheels in .whl/, carried with `carry: [".whl"]`; SZP_GPU_FUZZ_N=2000
# was set for the recorded run): the library built on this machine, the isolation benchmark, the kernels' and metrics' tests (CPU forms and
# the CuPy metric pass), the GPU evaluation tests. Files to $OUT.
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"; LOG=$O/ssim_f64_device_h200.log
{ date -u; nvidia-smi -L; nproc; uptime; python3 --version; cc --version | head -1; } > "$LOG" 2>&1
. benchmarks/device_common.sh
device_setup || exit 1
device_build_kernels
device_isolation isolation_fresh_h200_f64ssim
echo "== tests $(date -u +%T)" | tee -a "$LOG"
timeout 200 python3 -m pytest tests/unit/test_stream_native.py tests/unit/test_stream_compiled.py \
  tests/unit/test_metrics_streaming.py tests/unit/test_stream_fast.py tests/unit/test_metrics.py \
  -p no:cacheprovider -q -rfEs --tb=short -n 8 > "$O/ssim_f64_tests_h200.log" 2>&1
echo "tests exit $?" | tee -a "$LOG"; tail -3 "$O/ssim_f64_tests_h200.log"
echo "== gpu tests $(date -u +%T)" | tee -a "$LOG"
timeout 200 python3 -m pytest tests/gpu/test_gpu_eval_releases_its_arrays.py tests/gpu/test_sweep_gpu_worker.py tests/gpu/test_szp_gpu_e2e.py tests/unit/test_agent_evaluations_are_sweep_tasks.py \
  -p no:cacheprovider -q -rfEs --tb=short > "$O/ssim_f64_gpu_tests_h200.log" 2>&1
echo "gpu tests exit $?" | tee -a "$LOG"; tail -3 "$O/ssim_f64_gpu_tests_h200.log"
echo "== done $(date -u +%T)" | tee -a "$LOG"
