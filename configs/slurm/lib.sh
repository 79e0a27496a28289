# Functions shared by configs/slurm/raas.sbatch and configs/slurm/raas-join.sbatch (sourced, never
# run). They read the settings of the sourcing script: LAUNCHER, MODEL, LLM_ARGS, GPUS_PER_LLM,
# SIM_CONFIG, RAAS, SERVE_PORT, SERVE_ARGS, JOURNAL_DIR, and JOIN/JOIN_LLM for servers that join a
# registry. sbatch runs a copy of the batch script from its spool directory, so the scripts source
# this file from RAAS_HOME, not from their own location.

# A node's address: its name resolved (DNS or /etc/hosts) — never `hostname`, which is the same for
# several Slurm nodes on one host and may name another interface than the cluster network.
node_addr() {
  local a
  a=$(getent hosts "$1" | awk '{print $1; exit}')
  [ -n "$a" ] || { echo "raas: cannot resolve node $1 (getent hosts)" >&2; return 1; }
  echo "$a"
}
url_host() { [[ $1 == *:* ]] && echo "[$1]" || echo "$1"; }

# One inference server, bound to this node's address: launch_llm PORT INDEX.
launch_llm() {
  local addr
  addr=$(node_addr "$SLURMD_NODENAME") || exit 1
  if [ -n "$GPUS_PER_LLM" ]; then
    CUDA_VISIBLE_DEVICES=$(seq -s, $(($2 * GPUS_PER_LLM)) $(($2 * GPUS_PER_LLM + GPUS_PER_LLM - 1)))
    export CUDA_VISIBLE_DEVICES
  fi
  # shellcheck disable=SC2086
  case "$LAUNCHER" in
    vllm) exec vllm serve "$MODEL" --host "$addr" --port "$1" $LLM_ARGS ;;
    sglang) exec python3 -m sglang.launch_server --model-path "$MODEL" --host "$addr" --port "$1" $LLM_ARGS ;;
    sim) exec $RAAS sim-llm --host "$addr" --port "$1" --config "$SIM_CONFIG" $LLM_ARGS ;;
  esac
}

# This node's rollout server. Its results journal is node-local, so a restarted coordinator
# re-attaches to finished jobs (GET /jobs/:id) even if the server restarted meanwhile. With JOIN
# (a registry's URL) it registers there, heartbeats, and offers this node's inference servers, which
# the trainers then place onto it (same node).
launch_serve() {
  local addr h i join=()
  addr=$(node_addr "$SLURMD_NODENAME") || exit 1
  if [ -n "${JOIN:-}" ]; then
    h=$(url_host "$addr")
    join=(--join "$JOIN" --node-id "$SLURMD_NODENAME" --join-llm)
    for ((i = 0; i < LLM_PER_NODE; i++)); do join+=("http://$h:$((LLM_PORT + i)),$LLM_API"); done
  fi
  # shellcheck disable=SC2086
  exec $RAAS serve --host "$addr" --port "$SERVE_PORT" --token-env RAAS_TOKEN --journal-dir "$JOURNAL_DIR/$SLURMD_NODENAME" "${join[@]}" $SERVE_ARGS
}
export -f node_addr url_host launch_llm launch_serve

# One step per server and node: a server that dies takes down nothing else. Ending the batch
# script cancels these steps (and every sandbox with them: --die-with-parent).
# start_on NODE LOG URL COMMAND...; WATCH collects "url pid log" of every server for wait_health.
WATCH=()
start_on() {
  local node=$1 log=$2 url=$3
  shift 3
  srun --nodes=1 --ntasks=1 --nodelist="$node" --overlap --output="$log" "$@" &
  WATCH+=("$url $! $log")
}

# Waits until every server answers GET /health with 2xx. Fails at once when a server's step has
# ended (it could not start: see its log), and after WAIT_S seconds otherwise.
wait_health() {
  node -e '
    const fs = require("fs");
    const [deadline, ...watch] = process.argv.slice(1);
    const end = Date.now() + Number(deadline) * 1000;
    const gone = (pid) => { try { return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1][0] === "Z"; } catch { return true; } };
    const ok = (u) => fetch(`${u}/health`, { signal: AbortSignal.timeout(5000) }).then((r) => r.ok, () => false);
    (async () => {
      let left = watch.map((w) => { const [url, pid, ...log] = w.split(" "); return { url, pid, log: log.join(" ") }; });
      while (left.length > 0) {
        left = (await Promise.all(left.map(async (s) => ((await ok(s.url)) ? null : s)))).filter(Boolean);
        const dead = left.filter((s) => gone(s.pid));
        if (dead.length > 0) { for (const s of dead) console.error(`raas: the server for ${s.url} exited during start-up; see ${s.log}`); process.exit(1); }
        if (left.length === 0) return;
        if (Date.now() > end) { console.error(`raas: no answer from ${left.map((s) => s.url).join(" ")} within ${deadline} s`); process.exit(1); }
        await new Promise((r) => setTimeout(r, 1000));
      }
    })();' "$WAIT_S" "$@"
}

