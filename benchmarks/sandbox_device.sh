#!/usr/bin/env bash
# One device call (issue #12): the bubblewrap sandbox on the GPU machine, with ncu inside it.
# Run from the repository root there, with .device/sandbox carried (never committed):
#   .device/sandbox/deb/  Debian's bubblewrap .deb (+ libcap2, libselinux1, libpcre2-8-0), from
#                         `apt-get download`; unpacked into /tmp/bw with dpkg -x, never into /
#   .device/sandbox/whl/  wheels the image lacks: pydantic, pydantic-core, annotated-types,
#                         typing-inspection
# Steps, each under its own timeout so the call ends inside its limit with what it has:
#   1. the escape corpus and the sandbox unit tests, for real under bwrap;
#   2. an nvcc-built kernel (tests/fixtures/ncu/programs/transpose_naive.cu) profiled with
#      `perfscout profile` (ncu chosen automatically, inside the sandbox);
#   3. the CuPy fixture program profiled the same way;
#   4. a hostile CUDA program under ncu: it launches a kernel, then tries to write outside
#      and read /etc/shadow; the host is checked afterwards;
#   5. (issue #30, round 3) the hostile sandbox tests, all of them, the `gpu` ones with the real
#      ncu included: the profiler's memory out of reach (needs perf: skipped where the image has
#      none; .device/sandbox/deb/linux-perf*.deb is unpacked and used when carried and its
#      libraries resolve), ncu's table never read from the program's stdout, secrets by content
#      and by hard link;
#   6. a program that prints a forged ncu raw page while launching a real kernel, profiled with
#      `perfscout profile --no-details` (the raw page now comes from the report read back);
#   7. the secret walk's cost (names + first 4 KiB + hard links) on 1k-50k files, and the
#      sandbox's start-up overhead.
# Usage: bash benchmarks/sandbox_device.sh [TAG]  (files go to $OUT, named *_TAG.*):
#   sandbox_device_TAG.log  the steps and their exit codes; sandbox_escapes_TAG.log;
#   sandbox_ncu_{nvcc,cupy,hostile,forged}_TAG.json; sandbox_hostile_TAG.log and .xml (junit);
#   sandbox_overhead_TAG.json
set -u
T=${1:-h200}
O=${OUT:-/tmp/o}; mkdir -p "$O"
D=.device/sandbox
REPO=$PWD
export PYTHONUNBUFFERED=1 PERFSCOUT_HOME=/tmp/ps_home
LOG=$O/sandbox_device_$T.log
{ date -u; nvidia-smi -L; uname -r; git log -1 --format='base commit %H %s' 2>/dev/null;
  command -v ncu nvcc perf bwrap; } > "$LOG" 2>&1
step() { echo "== $(date -u +%T) $*" | tee -a "$LOG"; }

step "unpack bubblewrap, install wheels"
mkdir -p /tmp/bw
for f in $D/deb/*.deb; do dpkg -x "$f" /tmp/bw; done
export PERFSCOUT_BWRAP=/tmp/bw/usr/bin/bwrap
if ldd "$PERFSCOUT_BWRAP" | grep -q "not found"; then  # only then use the carried libraries
  printf '#!/bin/sh\nLD_LIBRARY_PATH=/tmp/bw/lib/x86_64-linux-gnu:/tmp/bw/usr/lib/x86_64-linux-gnu exec /tmp/bw/usr/bin/bwrap "$@"\n' > /tmp/bw/bwrap.sh
  chmod +x /tmp/bw/bwrap.sh; export PERFSCOUT_BWRAP=/tmp/bw/bwrap.sh
fi
if ls $D/whl/*.whl >/dev/null 2>&1; then  # only what the image lacks, into a folder of its own
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $D/whl/*.whl \
    >>"$LOG" 2>&1 || { echo "wheel install failed" | tee -a "$LOG"; exit 1; }
fi
export PYTHONPATH=/tmp/site:$REPO
# tests start the CLI in a cleaned environment (no PYTHONPATH): a .pth file in the image's own
# site-packages lets those processes see the carried wheels and this tree too
SP=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
printf '/tmp/site\n%s\n' "$REPO" > "$SP/zz_perfscout_device.pth" 2>/dev/null \
  || echo "cannot write $SP: tests that start the CLI will not import the carried wheels"
python3 -c "import pydantic, pytest" >>"$LOG" 2>&1 || { echo "pydantic/pytest missing: carry their wheels in $D/whl" | tee -a "$LOG"; exit 1; }
if ! command -v perf >/dev/null && ls $D/deb/linux-perf*.deb >/dev/null 2>&1; then  # perf, when carried
  mkdir -p /tmp/perf && for f in $D/deb/linux-perf*.deb; do dpkg -x "$f" /tmp/perf; done
  P=$(ls /tmp/perf/usr/bin/perf* 2>/dev/null | head -1)
  if [ -n "$P" ] && ! ldd "$P" | grep -q "not found"; then
    mkdir -p /tmp/perf/bin; ln -sf "$P" /tmp/perf/bin/perf; export PATH=/tmp/perf/bin:$PATH
  fi
fi
echo "perf: $(command -v perf || echo none) $(perf --version 2>/dev/null)" | tee -a "$LOG"
{ "$PERFSCOUT_BWRAP" --version; python3 -c "from perfscout.tools.bwrap import probe_bwrap; print(probe_bwrap())"; } 2>&1 | tee -a "$LOG"

step "escape corpus + sandbox unit tests"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/integration/test_sandbox_escapes.py \
  tests/unit/test_sandbox.py > "$O/sandbox_escapes_$T.log" 2>&1
echo "pytest exit $?; $(tail -1 "$O/sandbox_escapes_$T.log")" | tee -a "$LOG"

step "nvcc kernel under ncu, in the sandbox"
mkdir -p /tmp/w && cp tests/fixtures/ncu/programs/transpose_naive.cu /tmp/w/
(cd /tmp/w && timeout 25 nvcc -O2 -o transpose_naive transpose_naive.cu) >>"$LOG" 2>&1
(cd /tmp/w && timeout 35 python3 -m perfscout profile --json -k transpose -c 2 -- ./transpose_naive) \
  > "$O/sandbox_ncu_nvcc_$T.json" 2>>"$LOG"
echo "profile exit $?" | tee -a "$LOG"

step "CuPy program under ncu, in the sandbox"
cp tests/fixtures/ncu/programs/cupy_kernels.py /tmp/w/
(cd /tmp/w && timeout 35 python3 -m perfscout profile --json -c 4 -- python3 cupy_kernels.py 22) \
  > "$O/sandbox_ncu_cupy_$T.json" 2>>"$LOG"
echo "profile exit $?" | tee -a "$LOG"

step "hostile CUDA program under ncu"
echo intact > /tmp/w_victim.txt
cat > /tmp/w/hostile.py <<'EOF'
import os
import cupy as cp
x = cp.arange(1 << 20, dtype=cp.float32)
print("kernel sum", float((x * 2).sum()))
for p in ("/tmp/w_victim.txt", "/root/perfscout-gpu-escape", "/tmp/perfscout-gpu-escape", "/tmp/w/escape"):
    try:
        open(p, "w").write("escaped")
        print("wrote", p)
    except OSError as e:
        print("denied", p, e.strerror)
try:
    print(open("/etc/shadow").read()[:20])
except OSError as e:
    print("denied /etc/shadow", e.strerror)
EOF
(cd /tmp/w && timeout 20 python3 -m perfscout profile --json --tool ncu -c 1 -- python3 hostile.py) \
  > "$O/sandbox_ncu_hostile_$T.json" 2>>"$LOG"
echo "profile exit $?" | tee -a "$LOG"
{ echo "host after the hostile run:"; cat /tmp/w_victim.txt; ls -la /root/perfscout-gpu-escape /tmp/perfscout-gpu-escape /tmp/w/escape 2>&1;
  cat "$PERFSCOUT_HOME"/runs/*/program.stdout 2>/dev/null | grep -E "denied|wrote|kernel sum"; } 2>&1 | tee -a "$LOG"
step "hostile sandbox tests (round 3), the gpu ones with the real ncu"
timeout 200 python3 -m pytest -q -p no:cacheprovider -rs tests/integration/test_hostile_sandbox.py \
  tests/unit/test_sandbox.py --junitxml "$O/sandbox_hostile_$T.xml" > "$O/sandbox_hostile_$T.log" 2>&1
echo "pytest exit $?; $(tail -1 "$O/sandbox_hostile_$T.log")" | tee -a "$LOG"

step "a forged ncu table on stdout, a real kernel, perfscout profile --no-details"
cat > /tmp/w/forged.py <<'EOF'
import cupy as cp
print('"ID","Process ID","Process Name","Host Name","Kernel Name","Block Size","Grid Size","Device","CC","gpc__cycles_elapsed.max","gpu__time_duration.sum"')
print('"","","","","","","","","","cycle","second"')
print('"0","1","p","h","forged_kernel","(256, 1, 1)","(1, 1, 1)","0","9.0","4242","0.000004242"')
x = cp.arange(1 << 20, dtype=cp.float32)
print("kernel sum", float((x * 2).sum()))
EOF
(cd /tmp/w && timeout 40 python3 -m perfscout profile --json --tool ncu --no-details -c 2 -- python3 forged.py) \
  > "$O/sandbox_ncu_forged_$T.json" 2>>"$LOG"
echo "profile exit $?; kernels: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print([k['name'] for k in d.get('kernels', [])], d.get('ncu_error'))" "$O/sandbox_ncu_forged_$T.json" 2>&1)" | tee -a "$LOG"

step "secret walk cost and sandbox start-up overhead"
timeout 150 python3 benchmarks/sandbox_overhead.py --pairs 10 --walk --out "$O/sandbox_overhead_$T.json" >>"$LOG" 2>&1
echo "bench exit $?" | tee -a "$LOG"
step "done"
