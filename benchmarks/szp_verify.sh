#!/usr/bin/env bash
# One device call to verify szp-gpu kernels and record their numbers
# (benchmarks/results/szp_gpu_README.md, run v6): the GPU test suite (byte identity with the
# NumPy reference on random, adversarial and the real fields, chunking, DLPack, 64-bit-index
# builds, corrupt streams, no local memory, the ncu wrapper), 8 parallel GPU fuzz processes
# of 6000 arrays each, then the full benchmark. Run from the repository root on the device,
# after the pydantic wheels are installed (see the README), with .device/data carried.
set -u
O=${OUT:-/tmp/o}; mkdir -p $O
export PERFSCOUT_SHARED_DATA=$PWD/.device/data PYTHONUNBUFFERED=1
L=$O/szp_gpu_v6_tests_h200.log
nvidia-smi -L > $L
timeout 150 python3 -m pytest -q -m gpu tests/gpu tests/integration/test_ncu_gpu.py -p no:cacheprovider 2>&1 | tail -15 >> $L
for s in 31 32 33 34 35 36 37 38; do (SZP_GPU_FUZZ_N=6000 SZP_GPU_FUZZ_SEED=$s timeout 200 python3 -m pytest -q -m gpu tests/unit/test_szp_fuzz.py -k gpu -p no:cacheprovider > /tmp/fuzz_$s.log 2>&1; echo "seed $s exit $?" >> /tmp/fuzz_$s.log) & done
wait
for s in 31 32 33 34 35 36 37 38; do echo "== SZP_GPU_FUZZ_N=6000 SZP_GPU_FUZZ_SEED=$s pytest -m gpu tests/unit/test_szp_fuzz.py -k gpu"; tail -3 /tmp/fuzz_$s.log; done >> $L
cat $L
timeout 200 python3 benchmarks/gpu_codec.py bench --out $O/szp_gpu_bench_h200_v6.json > $O/szp_gpu_bench_h200_v6.log 2>&1
tail -21 $O/szp_gpu_bench_h200_v6.log
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $O/szp_gpu_v6_device_h200.txt
