#!/usr/bin/env bash
# A real multi-node Slurm cluster on this one machine, for the Slurm test and benchmark (docs/slurm.md).
#
#   scripts/slurm-cluster.sh up [NODES]   # install Slurm + MUNGE if absent, start munged, slurmctld, NODES slurmd
#   scripts/slurm-cluster.sh env          # prints `export SLURM_CONF=...` for sbatch/squeue against it
#   scripts/slurm-cluster.sh down         # cancel its jobs, stop only the daemons `up` started, undo its changes
#
# Everything is private to RAAS_SLURM_DIR (default /run/raas-slurm): its own slurm.conf (clients find
# it through SLURM_CONF), its own munged on its own socket and key, its own ports, pid files, spool
# and state. A Slurm or MUNGE already installed and running on the machine is neither used nor
# touched. Nodes are raas1..raasN: one `slurmd -N raasK` each (Debian's slurmd runs several nodes
# on one host). Slurm itself talks over 127.0.0.1 only (NoInAddrAny); each node's name resolves to
# its own loopback address 127.0.71.K through /etc/hosts lines marked "raas-slurm", which `down`
# removes, so `raas serve` on every node can bind its own address and the same port, as on a cluster.
# Needs root (daemons, /etc/hosts, apt-get); idempotent (`up` twice keeps the running cluster).
set -euo pipefail

DIR=${RAAS_SLURM_DIR:-/run/raas-slurm}
NODES=${2:-${RAAS_SLURM_NODES:-2}}
CTLD_PORT=${RAAS_SLURM_PORT:-16817}   # slurmd of node K listens on CTLD_PORT + 100 + K
NET=127.0.71                          # node K's address: $NET.K
MARK="# raas-slurm $DIR"
CONF=$DIR/slurm.conf

die() { echo "slurm-cluster: $*" >&2; exit 1; }
log() { echo "slurm-cluster: $*" >&2; }

# A pid from a pid file, if that process still runs and its command line names our config or dir
# (so a recycled pid never gets a signal from us).
our_pid() {
  local f=$1 pid
  [ -s "$f" ] || return 1
  pid=$(tr -dc 0-9 < "$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF "$DIR" && echo "$pid"
}

stop_pid_file() {
  local f=$1 pid i
  pid=$(our_pid "$f") || return 0
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  log "pid $pid ($f) ignored SIGTERM for 10 s; SIGKILL"
  kill -9 "$pid" 2>/dev/null || true
}

install() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null && return 0
  log "installing slurm-wlm and munge (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  # The packages' own services (system munged, slurmd, slurmctld) must not start: this cluster
  # runs private daemons only. policy-rc.d is Debian's switch for that, set for the install only.
  local policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    policy=/usr/sbin/policy-rc.d
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
  fi
  local rc=0
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null; } || rc=$?
  [ -z "$policy" ] || rm -f "$policy"
  [ "$rc" = 0 ] || die "apt-get install slurm-wlm munge failed ($rc)"
}

write_conf() {
  local host cpus mem k
  host=$(hostname -s)
  cpus=$(nproc)
  mem=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
  {
    echo "# written by scripts/slurm-cluster.sh; removed by its 'down'"
    echo "ClusterName=raas-local"
    echo "SlurmctldHost=$host"
    echo "SlurmctldPort=$CTLD_PORT"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$DIR/munge/munge.socket"
    echo "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "KillWait=10"
    echo "SlurmUser=root"
    echo "SlurmctldPidFile=$DIR/slurmctld.pid"
    echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
    echo "StateSaveLocation=$DIR/state"
    echo "SlurmdPidFile=$DIR/slurmd-%n.pid"
    echo "SlurmdSpoolDir=$DIR/spool-%n"
    echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
    echo "SchedulerType=sched/backfill"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    for ((k = 1; k <= NODES; k++)); do
      echo "NodeName=raas$k NodeHostname=$host NodeAddr=127.0.0.1 Port=$((CTLD_PORT + 100 + k)) CPUs=$cpus RealMemory=$mem State=UNKNOWN"
    done
    echo "PartitionName=raas Nodes=raas[1-$NODES] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8"
  } > "$CONF"
}

hosts_add() {
  local k line
  for ((k = 1; k <= NODES; k++)); do
    line="$NET.$k raas$k $MARK"
    grep -qxF "$line" /etc/hosts && continue
    # A foreign entry for the name would send our servers elsewhere: refuse rather than shadow it.
    if awk -v n="raas$k" '!/raas-slurm/ && $0 !~ /^[[:space:]]*#/ { for (i = 2; i <= NF; i++) if ($i == n) f = 1 } END { exit !f }' /etc/hosts; then
      die "/etc/hosts already names raas$k (not ours); remove it or run on another machine"
    fi
    echo "$line" >> /etc/hosts
  done
}

hosts_remove() {
  [ -w /etc/hosts ] || return 0
  grep -qF "$MARK" /etc/hosts || return 0
  # Rewrite in place (not rename): /etc/hosts may be a bind mount.
  local kept
  kept=$(grep -vF "$MARK" /etc/hosts || true)
  printf '%s\n' "$kept" > /etc/hosts
}

up() {
  [ "$(id -u)" = 0 ] || die "needs root (daemons, /etc/hosts, apt-get); run as root or with sudo"
  [[ "$NODES" =~ ^[0-9]+$ ]] && [ "$NODES" -ge 1 ] && [ "$NODES" -le 64 ] || die "NODES: expected 1..64, got $NODES"
  if our_pid "$DIR/slurmctld.pid" >/dev/null; then
    local have
    have=$(grep -c '^NodeName=' "$CONF")
    [ "$have" = "$NODES" ] || die "a cluster with $have nodes is already up in $DIR; run '$0 down' first"
    log "already up ($NODES nodes, $CONF)"
    return 0
  fi
  install
  local myaddr
  myaddr=$(getent hosts "$(hostname -s)" | awk '{print $1; exit}')
  # Slurm binds the address the host name resolves to; we only ever use loopback.
  [[ "$myaddr" == 127.* ]] || die "$(hostname -s) resolves to ${myaddr:-nothing}, not a loopback address; this local cluster binds loopback only"

  mkdir -p "$DIR/log" "$DIR/state" "$DIR/munge" "$DIR/munge-key"
  chmod 755 "$DIR"
  chmod 711 "$DIR/munge"
  chmod 700 "$DIR/munge-key"
  if [ ! -s "$DIR/munge-key/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge-key/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge-key/munge.key"
  fi
  if ! our_pid "$DIR/munge/munged.pid" >/dev/null; then
    munged --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge-key/munge.key" \
      --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge-key/munged.seed"
  fi
  write_conf
  hosts_add
  slurmctld -f "$CONF"
  local k
  for ((k = 1; k <= NODES; k++)); do
    our_pid "$DIR/slurmd-raas$k.pid" >/dev/null || slurmd -f "$CONF" -N "raas$k"
  done
  export SLURM_CONF=$CONF
  local i idle=0
  for ((i = 0; i < 120; i++)); do
    idle=$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | grep -c . || true)
    [ "$idle" -ge "$NODES" ] && break
    sleep 0.5
  done
  [ "$idle" -ge "$NODES" ] || { sinfo -N >&2 || true; die "only $idle of $NODES nodes idle after 60 s (logs: $DIR/log)"; }
  log "up: $NODES nodes raas[1-$NODES] at $NET.1-$NODES; export SLURM_CONF=$CONF"
}

down() {
  [ -e "$CONF" ] || { hosts_remove; log "nothing to stop ($DIR)"; return 0; }
  export SLURM_CONF=$CONF
  if our_pid "$DIR/slurmctld.pid" >/dev/null; then
    local jobs i
    jobs=$(squeue -h -o '%i' 2>/dev/null || true)
    if [ -n "$jobs" ]; then
      log "cancelling jobs: $(echo $jobs)"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for ((i = 0; i < 120; i++)); do [ -z "$(squeue -h -o '%i' 2>/dev/null)" ] && break; sleep 0.5; done
    fi
  fi
  # slurmd first (each ends its job steps' slurmstepd), then the controller, then munged.
  local f
  for f in "$DIR"/slurmd-*.pid; do [ -e "$f" ] && stop_pid_file "$f"; done
  stop_pid_file "$DIR/slurmctld.pid"
  stop_pid_file "$DIR/munge/munged.pid"
  hosts_remove
  rm -rf "$DIR"
  log "down"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 up [NODES] | env | down   (RAAS_SLURM_DIR=$DIR, RAAS_SLURM_NODES=$NODES)" >&2; exit 2 ;;
esac
