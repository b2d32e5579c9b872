#!/usr/bin/env bash
# One device call for issue #27 on the GPU machine, from the root of a perfscout tree with the
# wheels the image lacks in .whl/ (cp312; the list is in benchmarks/results/README.md, "One
# pipeline on the H200"), carried with `carry: [".whl"]`:
#   1. the first isolated evaluate() with and without the caller's prefault of the hand-over
#      mapping, 4 pairs of fresh processes (benchmarks/isolation_prefault_ab.py);
#   2. the isolation benchmark, 10 fresh processes, NumPy's huge-page advice off;
#   3. the one pipeline's GPU-side tests: the agent's evaluations as sweep tasks (its CUDA
#      calls in one GPU worker), the GPU worker, and that a GPU evaluation leaves nothing in
#      CuPy's pool.
# Files go to $OUT: one_pipeline_gpu_device_h200.log, isolation_prefault_ab_h200.log,
# isolation_fresh_h200_aba_no_thp.{json,log}, one_pipeline_gpu_tests_h200.log.
set -u
O=${OUT:-/tmp/o}; mkdir -p "$O"; LOG=$O/one_pipeline_gpu_device_h200.log
{ date -u; nvidia-smi -L; nproc; uptime; python3 --version; } > "$LOG" 2>&1
. benchmarks/device_common.sh
device_setup || exit 1
python3 -c "from perfscout.analysis import stream_compiled as S; S.warm()" >>"$LOG" 2>&1  # the kernel cache, filled once
echo "== prefault A/B $(date -u +%T)" | tee -a "$LOG"
for i in 1 2 3 4; do for v in default noprefault; do
  NUMPY_MADVISE_HUGEPAGE=0 timeout 40 python3 benchmarks/isolation_prefault_ab.py $v >> "$O/isolation_prefault_ab_h200.log" 2>&1
done; done
device_isolation isolation_fresh_h200_aba_no_thp
echo "== tests $(date -u +%T)" | tee -a "$LOG"
timeout 220 python3 -m pytest tests/unit/test_agent_evaluations_are_sweep_tasks.py tests/integration/test_sweep_gpu_worker.py \
  tests/gpu/test_sweep_gpu_worker.py tests/gpu/test_gpu_eval_releases_its_arrays.py tests/integration/test_entry_points_agree.py \
  -p no:cacheprovider -q -rfEs --tb=short --durations=8 > "$O/one_pipeline_gpu_tests_h200.log" 2>&1
echo "tests exit $?" | tee -a "$LOG"; tail -5 "$O/one_pipeline_gpu_tests_h200.log"
echo "== done $(date -u +%T)" | tee -a "$LOG"
