#!/usr/bin/env bash
# `npm run test:slurm`: brings up a local multi-node Slurm cluster (scripts/slurm-cluster.sh; Slurm
# and MUNGE are installed if absent), submits configs/slurm/raas.sbatch to it through the tests in
# test/slurm/ (a normal run and a node failure), and takes the cluster down again — unless it was
# already up when the test started, in which case it is left as it was. Fails when a job, a raas
# process on a node address or a daemon of the cluster outlives it. Needs root.
#   RAAS_SLURM_NODES=8 npm run test:slurm     # more nodes (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
export RAAS_SLURM_DIR=${RAAS_SLURM_DIR:-/run/raas-slurm}
NODES=${RAAS_SLURM_NODES:-2}
CLUSTER=scripts/slurm-cluster.sh

was_up=0
if [ -s "$RAAS_SLURM_DIR/slurmctld.pid" ] && kill -0 "$(cat "$RAAS_SLURM_DIR/slurmctld.pid")" 2>/dev/null; then was_up=1; fi
finish() {
  local rc=$? leaks=0
  if [ "$was_up" = 0 ]; then
    bash "$CLUSTER" down || rc=1
    # The daemons we started, by their config path, and anything bound to a node address.
    if pgrep -f -a -- "$RAAS_SLURM_DIR" >&2; then echo "slurm-test: daemons of the test cluster still running" >&2; leaks=1; fi
    if grep -qF "# raas-slurm $RAAS_SLURM_DIR" /etc/hosts; then echo "slurm-test: /etc/hosts entries left" >&2; leaks=1; fi
  fi
  if pgrep -f -a -- '--host 127\.0\.71\.' >&2; then echo "slurm-test: raas processes left on node addresses" >&2; leaks=1; fi
  [ "$leaks" = 0 ] || rc=1
  echo "slurm-test: $([ "$rc" = 0 ] && echo ok || echo "FAILED ($rc)")" >&2
  exit "$rc"
}
trap finish EXIT
bash "$CLUSTER" up "$NODES"
eval "$(bash "$CLUSTER" env)"
npx vitest run --config test/slurm/vitest.config.ts "$@"
