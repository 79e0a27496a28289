/**
 * `npm run bench:routing`: LLM backend routing side by side in one run.
 * 4 simulated vLLM backends with a realistic latency model (serial prefill of uncached tokens over a
 * 16-token-block prefix cache, decode slowed by concurrency), one rollout server (64 RUN workers),
 * 256 multi-turn chat jobs submitted at once in groups of 8, with mixed turn counts and document
 * lengths. Routing: active + group affinity (the default) vs active vs assigned (the paper's key) vs
 * per-request round robin. Reports jobs/s, makespan and the backends' prefix-cache hit rate (from
 * their /metrics), medians over repetitions whose order rotates, and the ratios of the default.
 * Flags: --quick (1 repetition, 128 jobs), --reps N, --short-prompts (1-3k instead of 4-8k token
 * prompts), --only <routing>, --json (machine-readable line at the end).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startRolloutServer } from '../src/server/index.js';
import { parseMetrics, type SimOptions } from '../src/sim/index.js';
import { docChatHandler } from './doc-chat.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const repsAt = args.indexOf('--reps');
const REPS = repsAt >= 0 ? Number(args[repsAt + 1]) : quick ? 1 : 3;
const JOBS = quick ? 128 : 256;
const GROUP = 8;
const BACKENDS = 4;

/**
 * An 8B-class model on one GPU: prefill 10k tokens/s (one request at a time), decode 12 ms per token
 * per sequence, 3% slower per other running sequence, and KV room for 8k blocks (131k tokens: an 8B
 * model on a 40 GB GPU) with LRU eviction. The
 * backend's time must dominate the rollout server's CPU time, or the benchmark measures the machine.
 */
const LATENCY: SimOptions['latency'] = {
  prefill_ms_per_token: 0.1,
  decode_ms_per_token: 12,
  overhead_ms: 5,
  concurrency_slowdown: 0.03,
  max_num_seqs: 256,
};
const FILLER: SimOptions['filler'] = { median_tokens: 60, sigma: 0.5, min_tokens: 8, max_tokens: 300 };
const CACHE_BLOCKS = 8_192;
/**
 * Prompt lengths of agent tasks (tool definitions, task statement, repository context): 4-8k tokens,
 * shared by the n rollouts of a group. `--short-prompts` uses 1-3k.
 */
const SHORT = args.includes('--short-prompts');
const DOC_MIN = SHORT ? 1000 : 4000;
const DOC_SPREAD = SHORT ? 2000 : 4000;
/** Each follow-up carries a tool output of this many tokens (unique to the rollout), as agent turns do. */
const OBS_TOKENS = 300;

interface Routing {
  name: string;
  routing: 'active' | 'assigned' | 'round_robin';
  group_affinity: boolean;
}
const ALL_ROUTINGS: Routing[] = [
  { name: 'active + group affinity (default)', routing: 'active', group_affinity: true },
  { name: 'active, no group affinity', routing: 'active', group_affinity: false },
  { name: 'assigned (paper)', routing: 'assigned', group_affinity: false },
  { name: 'round_robin per request', routing: 'round_robin', group_affinity: false },
];
const onlyAt = args.indexOf('--only');
const ROUTINGS =
  onlyAt >= 0
    ? ALL_ROUTINGS.filter((r) => r.routing === args[onlyAt + 1] && r.group_affinity === (args[onlyAt + 1] === 'active'))
    : ALL_ROUTINGS;

interface RunStats {
  jobs_per_s: number;
  makespan_s: number;
  hit_rate: number;
  turns: number;
  errors: number;
  /** Jobs each backend served (max/min shows the balance). */
  spread: number[];
  /** Mean time per backend request in prefill (incl. waiting for it) and decode, and mean tokens. */
  per_request_ms: { prefill: number; decode: number; e2e: number; tokens: number };
  /** Sum of backend request time / (makespan × RUN workers): how much of the run the jobs spent in the backends. */
  llm_busy_share: number;
}

/** Starts the simulated backends in a child process (their own event loop, like real GPUs). */
async function startFleet(): Promise<{ urls: string[]; child: ChildProcess }> {
  const options: SimOptions = { seed: 100, latency: LATENCY, filler: FILLER, max_model_len: 32768, prefix_cache_blocks: CACHE_BLOCKS };
  const script = fileURLToPath(new URL('./sim-fleet.ts', import.meta.url));
  const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify({ count: BACKENDS, options })], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const first = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`sim fleet exited with ${code}`)));
  });
  return { urls: (JSON.parse(first) as { urls: string[] }).urls, child };
}

const COUNTERS = {
  hits: 'vllm:prefix_cache_hits_total',
  queries: 'vllm:prefix_cache_queries_total',
  requests: 'vllm:request_success_total',
  prefill_s: 'vllm:request_prefill_time_seconds_sum',
  decode_s: 'vllm:request_decode_time_seconds_sum',
  e2e_s: 'vllm:e2e_request_latency_seconds_sum',
  gen_tokens: 'vllm:generation_tokens_total',
} as const;
type Counters = Record<keyof typeof COUNTERS, number>;

/** The fleet's counters summed over backends (read before and after a run; the difference is the run's). */
async function cacheCounters(urls: string[]): Promise<Counters> {
  const out = Object.fromEntries(Object.keys(COUNTERS).map((k) => [k, 0])) as Counters;
  for (const u of urls) {
    const m = parseMetrics(await (await fetch(`${u}/metrics`)).text());
    for (const [k, name] of Object.entries(COUNTERS)) out[k as keyof Counters] += m[name] ?? 0;
  }
  return out;
}

/** The jobs of one run: JOBS / GROUP groups with mixed turn counts and document lengths. */
function jobBodies(rep: number): Array<Record<string, unknown>> {
  return Array.from({ length: JOBS }, (_, j) => {
    const g = Math.floor(j / GROUP);
    return {
      instance: {
        data_source: 'doc-chat',
        instance_id: `doc-${g}`,
        turns: 2 + ((g * 5) % 7),
        doc_tokens: DOC_MIN + ((g * 1337) % DOC_SPREAD),
        obs_tokens: OBS_TOKENS,
        pass_rate: 0.5,
      },
      sampling_params: { seed: rep, max_tokens_per_turn: 256 },
      job_id: `rep${rep}-g${g}-r${j % GROUP}`,
      group_id: `rep${rep}-g${g}`,
    };
  });
}

async function runOnce(r: Routing, rep: number, urls: string[]): Promise<RunStats> {
  // Each run starts cold: empty prefix caches; hit rate = Δhits / Δqueries, as vLLM's counters are read.
  for (const u of urls) await fetch(`${u}/reset_prefix_cache`, { method: 'POST' });
  const before = await cacheCounters(urls);
  const server = await startRolloutServer(
    {
      port: 0,
      workers: { init: 64, run: 64, eval: 64 },
      llm: { routing: r.routing, group_affinity: r.group_affinity, backends: urls.map((address) => ({ address, api: 'vllm' as const })) },
    },
    { handlers: [docChatHandler] },
  );
  try {
    const started = performance.now();
    const results = await Promise.all(
      jobBodies(rep).map(async (body) => {
        const res = await fetch(`${server.url}/process`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        return (await res.json()) as { critical_error: string | null; num_turns: number; backend: string | null };
      }),
    );
    const makespan = (performance.now() - started) / 1000;
    const after = await cacheCounters(urls);
    const d = Object.fromEntries(
      Object.keys(COUNTERS).map((k) => [k, after[k as keyof Counters] - before[k as keyof Counters]]),
    ) as Counters;
    const hits = d.hits;
    const queries = d.queries;
    const spread = urls.map((u) => results.filter((x) => x.backend === u).length);
    return {
      jobs_per_s: JOBS / makespan,
      makespan_s: makespan,
      hit_rate: queries === 0 ? 0 : hits / queries,
      turns: results.reduce((a, x) => a + (x.num_turns ?? 0), 0),
      errors: results.filter((x) => x.critical_error !== null).length,
      spread,
      per_request_ms: {
        prefill: (1000 * d.prefill_s) / d.requests,
        decode: (1000 * d.decode_s) / d.requests,
        e2e: (1000 * d.e2e_s) / d.requests,
        tokens: d.gen_tokens / d.requests,
      },
      llm_busy_share: d.e2e_s / (makespan * 64),
    };
  } finally {
    await server.close();
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const all = new Map<string, RunStats[]>(ROUTINGS.map((r) => [r.name, []]));
  process.stderr.write(`bench:routing: ${JOBS} jobs in groups of ${GROUP}, ${BACKENDS} simulated backends, ${REPS} repetition(s)\n`);
  const fleet = await startFleet();
  try {
    // Warm-up, not measured: loads the tokenizer, tokenises every group's document once (the handler
    // caches a group's prompt ids) and JIT-compiles the paths, so no routing pays for it.
    const warm = await startRolloutServer(
      { port: 0, llm: { backends: fleet.urls.map((address) => ({ address, api: 'vllm' as const })) } },
      { handlers: [docChatHandler] },
    );
    await Promise.all(
      jobBodies(-1)
        .filter((_, j) => j % GROUP === 0)
        .map((b) =>
          fetch(`${warm.url}/process`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ ...b, instance: { ...(b.instance as object), turns: 1 }, sampling_params: { max_tokens_per_turn: 4 } }),
          }),
        ),
    );
    await warm.close();
    for (let rep = 0; rep < REPS; rep++) {
      // Rotate the order so machine-load drift does not always favour the same routing.
      const order = ROUTINGS.map((_, i) => ROUTINGS[(i + rep) % ROUTINGS.length]!);
      for (const r of order) {
        const s = await runOnce(r, rep, fleet.urls);
        all.get(r.name)!.push(s);
        process.stderr.write(
          `  rep ${rep} ${r.name.padEnd(36)} ${s.jobs_per_s.toFixed(2)} jobs/s  makespan ${s.makespan_s.toFixed(2)} s  hit ${(100 * s.hit_rate).toFixed(1)}%  jobs/backend ${s.spread.join('/')}  errors ${s.errors}  per request: prefill ${s.per_request_ms.prefill.toFixed(0)} ms decode ${s.per_request_ms.decode.toFixed(0)} ms (${s.per_request_ms.tokens.toFixed(0)} tokens)  in-backend share ${(100 * s.llm_busy_share).toFixed(0)}%\n`,
        );
      }
    }
  } finally {
    fleet.child.stdin!.end();
  }
  const summary = ROUTINGS.map((r) => {
    const xs = all.get(r.name)!;
    return {
      name: r.name,
      jobs_per_s: median(xs.map((x) => x.jobs_per_s)),
      makespan_s: median(xs.map((x) => x.makespan_s)),
      hit_rate: median(xs.map((x) => x.hit_rate)),
      errors: xs.reduce((a, x) => a + x.errors, 0),
    };
  });
  const def = summary[0]!;
  const named = (routing: string): (typeof summary)[number] | undefined => summary.find((s) => s.name.startsWith(routing));
  process.stdout.write(
    `\n| routing | jobs/s (median) | makespan s | prefix-cache hit rate | default's jobs/s ratio |\n|---|---|---|---|---|\n`,
  );
  for (const s of summary) {
    process.stdout.write(
      `| ${s.name} | ${s.jobs_per_s.toFixed(2)} | ${s.makespan_s.toFixed(2)} | ${(100 * s.hit_rate).toFixed(1)}% | ${(def.jobs_per_s / s.jobs_per_s).toFixed(3)}× |\n`,
    );
  }
  const vsRr = def.jobs_per_s / (named('round_robin')?.jobs_per_s ?? Number.NaN);
  const vsAssigned = def.jobs_per_s / (named('assigned')?.jobs_per_s ?? Number.NaN);
  process.stdout.write(
    `\ntargets: default ≥ 1.2× round robin: ${vsRr.toFixed(3)}× ${vsRr >= 1.2 ? 'met' : 'MISSED'}; ≥ 1.05× assigned: ${vsAssigned.toFixed(3)}× ${vsAssigned >= 1.05 ? 'met' : 'MISSED'}; hit rate ≥ 90%: ${(100 * def.hit_rate).toFixed(1)}% ${def.hit_rate >= 0.9 ? 'met' : 'MISSED'}\n`,
  );
  if (args.includes('--json'))
    process.stdout.write(
      `${JSON.stringify({ jobs: JOBS, reps: REPS, summary, ratios: { vs_round_robin: vsRr, vs_assigned: vsAssigned } })}\n`,
    );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:routing failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
