#!/usr/bin/env bash
# A throw-away single-node Slurm cluster on this machine, for tests (needs root and
# Debian's slurm-wlm + munge; .ci/system-deps.sh installs them).
#
#   .ci/slurm-local.sh start DIR CTLD_PORT SLURMD_PORT   # prints the slurm.conf path
#   .ci/slurm-local.sh stop DIR
#
# Everything lives in DIR: slurm.conf, a munge key and socket, state, spool, logs, pid
# files. Nothing in /etc is touched: clients find the cluster through SLURM_CONF=DIR/slurm.conf.
# The node is this host (NodeAddr 127.0.0.1) with its real CPU count and memory; the
# process tracking and task plugins are the ones that need no cgroups (containers).
set -euo pipefail
cmd=${1:?usage: slurm-local.sh start DIR CTLD_PORT SLURMD_PORT | stop DIR}
dir=${2:?DIR}

stop() {
  for d in slurmd slurmctld munged; do
    if [ -f "$dir/$d.pid" ]; then
      pid=$(cat "$dir/$d.pid" 2>/dev/null || true)
      if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
      fi
      rm -f "$dir/$d.pid"
    fi
  done
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "unknown command $cmd" >&2; exit 2; }
ctld_port=${3:?CTLD_PORT}
slurmd_port=${4:?SLURMD_PORT}
[ "$(id -u)" = 0 ] || { echo "slurm-local: needs root (slurmd runs jobs as their user)" >&2; exit 3; }
for b in munged slurmctld slurmd sbatch; do
  command -v "$b" >/dev/null 2>&1 || [ -x "/usr/sbin/$b" ] || { echo "slurm-local: $b not installed (apt-get install slurm-wlm munge)" >&2; exit 3; }
done
export PATH="/usr/sbin:$PATH"

mkdir -p "$dir"/{state,spool,munge}
chmod 700 "$dir/munge"
host=$(hostname -s)
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))

# munge: its own key and socket in DIR (the system's munged, if any, is left alone)
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
       --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munge.seed"

cat > "$dir/slurm.conf" <<EOF
ClusterName=perfscout-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -f "$SLURM_CONF" -i
slurmd -f "$SLURM_CONF" -N "$host"
# ready when the node is idle
for _ in $(seq 150); do
  if sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "$SLURM_CONF"
    exit 0
  fi
  sleep 0.2
done
echo "slurm-local: the node did not become idle; logs in $dir" >&2
tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log" >&2 || true
stop
exit 4
