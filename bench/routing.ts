/**
 * `npm run bench:routing`: LLM backend routing side by side in one run.
 * 4 simulated vLLM backends with a realistic latency model (serial prefill of uncached tokens over a
 * 16-token-block prefix cache, decode slowed by concurrency), one rollout server (64 RUN workers),
 * 256 multi-turn chat jobs submitted at once in groups of 8, with mixed turn counts and document
 * lengths. Routing: active + group affinity (the default) vs active vs assigned (the paper's key) vs
 * per-request round robin. Reports jobs/s, makespan and the backends' prefix-cache hit rate (from
 * their /metrics), medians over repetitions whose order rotates, and the ratios of the default.
 * Flags: --quick (1 repetition, 128 jobs), --reps N, --json (machine-readable line at the end).
 */
import { startRolloutServer } from '../src/server/index.js';
import { parseMetrics, startSim, type SimHandle, type SimOptions } from '../src/sim/index.js';
import { docChatHandler } from './doc-chat.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const repsAt = args.indexOf('--reps');
const REPS = repsAt >= 0 ? Number(args[repsAt + 1]) : quick ? 1 : 3;
const JOBS = quick ? 128 : 256;
const GROUP = 8;
const BACKENDS = 4;

/** An 8B-class model on one GPU, scaled so one run takes seconds, not minutes. */
const LATENCY: SimOptions['latency'] = { prefill_ms_per_token: 0.15, decode_ms_per_token: 4, overhead_ms: 2, concurrency_slowdown: 0.03, max_num_seqs: 256 };
const FILLER: SimOptions['filler'] = { median_tokens: 80, sigma: 0.5, min_tokens: 8, max_tokens: 400 };

interface Routing {
  name: string;
  routing: 'active' | 'assigned' | 'round_robin';
  group_affinity: boolean;
}
const ROUTINGS: Routing[] = [
  { name: 'active + group affinity (default)', routing: 'active', group_affinity: true },
  { name: 'active, no group affinity', routing: 'active', group_affinity: false },
  { name: 'assigned (paper)', routing: 'assigned', group_affinity: false },
  { name: 'round_robin per request', routing: 'round_robin', group_affinity: false },
];

interface RunStats {
  jobs_per_s: number;
  makespan_s: number;
  hit_rate: number;
  turns: number;
  errors: number;
  /** Jobs each backend served (max/min shows the balance). */
  spread: number[];
}

async function runOnce(r: Routing, rep: number): Promise<RunStats> {
  const sims: SimHandle[] = await Promise.all(Array.from({ length: BACKENDS }, (_, i) => startSim({ seed: 100 + i, latency: LATENCY, filler: FILLER, max_model_len: 32768 })));
  const server = await startRolloutServer(
    { port: 0, workers: { init: 64, run: 64, eval: 64 }, llm: { routing: r.routing, group_affinity: r.group_affinity, backends: sims.map((s) => ({ address: s.url, api: 'vllm' as const })) } },
    { handlers: [docChatHandler] },
  );
  try {
    const started = performance.now();
    const results = await Promise.all(
      Array.from({ length: JOBS }, async (_, j) => {
        const g = Math.floor(j / GROUP);
        const body = {
          instance: { data_source: 'doc-chat', instance_id: `doc-${g}`, turns: 2 + ((g * 5) % 7), doc_tokens: 800 + ((g * 337) % 1600), pass_rate: 0.5 },
          sampling_params: { seed: rep, max_tokens_per_turn: 256 },
          job_id: `rep${rep}-g${g}-r${j % GROUP}`,
          group_id: `rep${rep}-g${g}`,
        };
        const res = await fetch(`${server.url}/process`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
        return (await res.json()) as { critical_error: string | null; num_turns: number; backend: string | null };
      }),
    );
    const makespan = (performance.now() - started) / 1000;
    let hits = 0;
    let queries = 0;
    for (const s of sims) {
      const m = parseMetrics(await (await fetch(`${s.url}/metrics`)).text());
      hits += m['vllm:prefix_cache_hits_total'] ?? 0;
      queries += m['vllm:prefix_cache_queries_total'] ?? 0;
    }
    const spread = sims.map((s) => results.filter((x) => x.backend === s.url).length);
    return {
      jobs_per_s: JOBS / makespan,
      makespan_s: makespan,
      hit_rate: queries === 0 ? 0 : hits / queries,
      turns: results.reduce((a, x) => a + (x.num_turns ?? 0), 0),
      errors: results.filter((x) => x.critical_error !== null).length,
      spread,
    };
  } finally {
    await server.close();
    await Promise.all(sims.map((s) => s.close()));
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const all = new Map<string, RunStats[]>(ROUTINGS.map((r) => [r.name, []]));
  process.stderr.write(`bench:routing: ${JOBS} jobs in groups of ${GROUP}, ${BACKENDS} simulated backends, ${REPS} repetition(s)\n`);
  for (let rep = 0; rep < REPS; rep++) {
    // Rotate the order so machine-load drift does not always favour the same routing.
    const order = ROUTINGS.map((_, i) => ROUTINGS[(i + rep) % ROUTINGS.length]!);
    for (const r of order) {
      const s = await runOnce(r, rep);
      all.get(r.name)!.push(s);
      process.stderr.write(`  rep ${rep} ${r.name.padEnd(36)} ${s.jobs_per_s.toFixed(2)} jobs/s  makespan ${s.makespan_s.toFixed(2)} s  hit ${(100 * s.hit_rate).toFixed(1)}%  jobs/backend ${s.spread.join('/')}  errors ${s.errors}\n`);
    }
  }
  const summary = ROUTINGS.map((r) => {
    const xs = all.get(r.name)!;
    return { name: r.name, jobs_per_s: median(xs.map((x) => x.jobs_per_s)), makespan_s: median(xs.map((x) => x.makespan_s)), hit_rate: median(xs.map((x) => x.hit_rate)), errors: xs.reduce((a, x) => a + x.errors, 0) };
  });
  const def = summary[0]!;
  process.stdout.write(`\n| routing | jobs/s (median) | makespan s | prefix-cache hit rate | default's jobs/s ratio |\n|---|---|---|---|---|\n`);
  for (const s of summary) {
    process.stdout.write(`| ${s.name} | ${s.jobs_per_s.toFixed(2)} | ${s.makespan_s.toFixed(2)} | ${(100 * s.hit_rate).toFixed(1)}% | ${(def.jobs_per_s / s.jobs_per_s).toFixed(3)}× |\n`);
  }
  const vsRr = def.jobs_per_s / summary[3]!.jobs_per_s;
  const vsAssigned = def.jobs_per_s / summary[2]!.jobs_per_s;
  process.stdout.write(
    `\ntargets: default ≥ 1.2× round robin: ${vsRr.toFixed(3)}× ${vsRr >= 1.2 ? 'met' : 'MISSED'}; ≥ 1.05× assigned: ${vsAssigned.toFixed(3)}× ${vsAssigned >= 1.05 ? 'met' : 'MISSED'}; hit rate ≥ 90%: ${(100 * def.hit_rate).toFixed(1)}% ${def.hit_rate >= 0.9 ? 'met' : 'MISSED'}\n`,
  );
  if (args.includes('--json')) process.stdout.write(`${JSON.stringify({ jobs: JOBS, reps: REPS, summary, ratios: { vs_round_robin: vsRr, vs_assigned: vsAssigned } })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:routing failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
