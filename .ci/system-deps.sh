#!/usr/bin/env bash
# Installs the Debian packages that integration tests use for real, when missing:
# Chromium (renders report.html), PostgreSQL (checkpointer at scale).
# Tests that need them skip with a clear message where this cannot run (no root/apt).
set -uo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)  # the viewer's browser tests (Selenium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v perf >/dev/null 2>&1 || need+=(linux-perf)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)  # the OS sandbox around every program perfscout runs
command -v cc >/dev/null 2>&1 || need+=(gcc)  # links the metric kernels' library (analysis/stream_native.py)
# a single-node Slurm cluster for the dask-jobqueue sweep test (.ci/slurm-local.sh)
[ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && command -v sbatch >/dev/null 2>&1 || need+=(slurm-wlm)
[ -x /usr/sbin/munged ] || need+=(munge)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: cannot install ${need[*]} (need root and apt-get); dependent tests will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || echo "system-deps: apt-get update failed" >&2
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
  || echo "system-deps: apt-get install ${need[*]} failed; dependent tests will skip" >&2
exit 0
