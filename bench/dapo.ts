/**
 * `npm run bench:dapo`: the DAPO coordinator's modes side by side in one run, on the same real
 * rollout server (in-process, 32 RUN workers) and simulated vLLM backends, the same seeded chat
 * dataset (a quarter of the prompts always fail, a quarter always pass, so about half the groups are
 * zero-variance) and heavy-tailed rollout lengths (lognormal filler, sigma 1).
 *   modes: sync (batch by batch), async without carry-over, async with carry-over (max_staleness 1)
 *   Table 3 shape: full system vs per-request round robin (no load balancing) vs sync (no stale-job cleanup)
 * Each run: 5 steps; the "trainer" sleeps TRAIN_MS per step, then calls updateWeights.
 * Reports informative groups/s, step time, rollout-worker utilization, wasted tokens (docs/batch-format.md),
 * staleness mean/max; medians over --reps repetitions (order rotates); writes bench/results/dapo.json
 * and dapo.svg. Flags: --quick (3 steps, 1 rep), --reps N.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Coordinator } from '../src/dapo/index.js';
import { barChartSvg } from '../src/dapo/plot.js';
import type { Batch } from '../src/protocol/batch.js';
import type { TrainConfigInput } from '../src/protocol/config-train.js';
import { startRolloutServer } from '../src/server/index.js';
import { startSim, type SimHandle, type SimOptions } from '../src/sim/index.js';
import { rng } from '../src/util/hash.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const repsAt = args.indexOf('--reps');
const REPS = repsAt >= 0 ? Number(args[repsAt + 1]) : 1;
const STEPS = quick ? 3 : 5;
const N = 4;
const B = args.includes('--tools') ? 4 : 8;
const RUN_WORKERS = 32;
const TRAIN_MS = 300;
const SEED = 11;
const LATENCY: SimOptions["latency"] = { prefill_ms_per_token: 0.1, decode_ms_per_token: 2.5, overhead_ms: 2, concurrency_slowdown: 0.01, max_num_seqs: 256 };
const FILLER: SimOptions['filler'] = { median_tokens: 60, sigma: 1, min_tokens: 4, max_tokens: 1500 };

interface Variant {
  name: string;
  cfg: Partial<TrainConfigInput>;
  routing?: 'active' | 'round_robin';
  /** The server's sandbox section (the tools set compares bash backends). */
  sandbox?: Record<string, unknown>;
}
const MODES: Variant[] = [
  { name: 'sync', cfg: { mode: 'sync' } },
  { name: 'async, no carry-over', cfg: { mode: 'async', carry_over: false } },
  { name: 'async + carry-over (η=1)', cfg: { mode: 'async', carry_over: true, max_staleness: 1 } },
];
/** `--tools`: the code tasks (bash, editor, python in bwrap sandboxes), PTY bash vs the tmux baseline. */
const TOOLS: Variant[] = [
  { name: 'full system (PTY bash)', cfg: { mode: 'async', carry_over: true, max_staleness: 1 }, sandbox: { bash_backend: 'pty' } },
  { name: 'w/o efficient bash (tmux, 500 ms poll)', cfg: { mode: 'async', carry_over: true, max_staleness: 1 }, sandbox: { bash_backend: 'tmux' } },
];
const TABLE3: Variant[] = [
  { name: 'full system', cfg: { mode: 'async', carry_over: true, max_staleness: 1 } },
  { name: 'w/o load balancing (round robin)', cfg: { mode: 'async', carry_over: true, max_staleness: 1 }, routing: 'round_robin' },
  { name: 'w/o stale-job cleanup (sync)', cfg: { mode: 'sync' } },
];

/** A quarter never solved, a quarter always solved, the rest in between: about half the groups of 4 are zero-variance. */
function writeDataset(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'raas-bench-dapo-'));
  const r = rng(SEED);
  const rows = Array.from({ length: 400 }, (_, i) => {
    const u = r();
    const pass_rate = u < 0.25 ? 0 : u < 0.5 ? 1 : 0.3 + 0.4 * r();
    return JSON.stringify({ data_source: 'chat', instance_id: `p${i}`, turns: 1 + Math.floor(r() * 3), pass_rate });
  });
  const file = path.join(dir, 'prompts.jsonl');
  writeFileSync(file, rows.join('\n') + '\n');
  return file;
}

interface Measured {
  variant: string;
  informative_groups_per_s: number;
  step_time_s: number;
  worker_utilization: number;
  waste_fraction: number;
  staleness_mean: number;
  staleness_max: number;
  rollouts_per_s: number;
  filtered: number;
  cancelled_jobs: number;
}

async function runOnce(v: Variant, dataset: string, tag: string): Promise<Measured> {
  const sims: SimHandle[] = [];
  for (let i = 0; i < 2; i++) sims.push(await startSim({ seed: SEED, latency: LATENCY, filler: FILLER, abort_on_weight_update: false, weight_version: '0', datasets: [dataset] }));
  const server = await startRolloutServer({ port: 0, workers: { init: 32, run: RUN_WORKERS, eval: 32 }, llm: { routing: v.routing ?? 'active' }, log_level: 'silent', ...(v.sandbox ? { sandbox: v.sandbox } : {}) } as never);
  const c = new Coordinator({
    name: `bench-${tag}`, seed: SEED, servers: [{ url: server.url }], backends: sims.map((s) => ({ address: s.url, api: 'vllm' as const })),
    dataset: { path: dataset }, n: N, batch_size: B, steps: STEPS, max_inflight_jobs: RUN_WORKERS, ...v.cfg,
  });
  const batches: Batch[] = [];
  try {
    await c.start();
    const t0 = performance.now();
    for (let s = 0; s < STEPS; s++) {
      batches.push(await c.nextBatch());
      await new Promise((r) => setTimeout(r, TRAIN_MS)); // the trainer's step
      await c.updateWeights({});
    }
    const wall = (performance.now() - t0) / 1000;
    const st = batches.map((b) => b.stats as Batch['stats'] & Record<string, number>);
    const sum = (f: (x: (typeof st)[number]) => number): number => st.reduce((a, x) => a + f(x), 0);
    const stal = batches.flatMap((b) => b.groups.flatMap((g) => g.rollouts.map((r) => r.staleness)));
    return {
      variant: v.name,
      informative_groups_per_s: (B * STEPS) / wall,
      step_time_s: wall / STEPS,
      worker_utilization: sum((x) => x.worker_utilization * x.wall_s) / sum((x) => x.wall_s),
      waste_fraction: sum((x) => x.tokens_wasted) / Math.max(1, sum((x) => x.tokens_generated)),
      staleness_mean: stal.reduce((a, b) => a + b, 0) / stal.length,
      staleness_max: Math.max(...stal),
      rollouts_per_s: (sum((x) => x.completed) * N) / wall,
      filtered: sum((x) => x.filtered),
      cancelled_jobs: sum((x) => x.jobs_cancelled),
    };
  } finally {
    await c.close();
    await server.close();
    for (const s of sims) await s.close();
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function runSet(title: string, variants: Variant[], dataset: string): Promise<Measured[]> {
  const runs = new Map<string, Measured[]>(variants.map((v) => [v.name, []]));
  for (let rep = 0; rep < REPS; rep++) {
    const order = variants.map((_, i) => variants[(i + rep) % variants.length]);
    for (const v of order) {
      const m = await runOnce(v, dataset, `${title}-${variants.indexOf(v)}-${rep}`);
      process.stderr.write(`  ${title} | ${v.name} | rep ${rep}: ${m.informative_groups_per_s.toFixed(2)} groups/s, util ${(m.worker_utilization * 100).toFixed(0)}%, waste ${(m.waste_fraction * 100).toFixed(1)}%\n`);
      runs.get(v.name)!.push(m);
    }
  }
  return variants.map((v) => {
    const ms = runs.get(v.name)!;
    const out = { ...ms[0] };
    for (const k of Object.keys(out) as Array<keyof Measured>) if (k !== 'variant') (out[k] as number) = median(ms.map((m) => m[k] as number));
    return out;
  });
}

function table(rows: Measured[], base: Measured): string {
  const head = '| variant | informative groups/s | × sync | step time s | worker util | waste | staleness mean/max | rollouts/s |\n|---|---|---|---|---|---|---|---|';
  const body = rows.map((r) =>
    `| ${r.variant} | ${r.informative_groups_per_s.toFixed(2)} | ${(r.informative_groups_per_s / base.informative_groups_per_s).toFixed(2)} | ${r.step_time_s.toFixed(2)} | ${(r.worker_utilization * 100).toFixed(0)}% | ${(r.waste_fraction * 100).toFixed(1)}% | ${r.staleness_mean.toFixed(2)}/${r.staleness_max} | ${r.rollouts_per_s.toFixed(1)} |`);
  return [head, ...body].join('\n');
}

async function tools(): Promise<void> {
  const dataset = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../configs/data/code.jsonl');
  process.stderr.write(`bench:dapo --tools: code tasks in bwrap sandboxes, ${STEPS} steps, n=${N}, batch_size=${B}, ${REPS} rep(s)\n`);
  const rows = await runSet('tools', TOOLS, dataset);
  const outDir = path.resolve(path.dirname(new URL(import.meta.url).pathname), 'results');
  writeFileSync(path.join(outDir, 'dapo-tools.json'), JSON.stringify({ bench: 'dapo --tools', date: new Date().toISOString(), steps: STEPS, n: N, batch_size: B, reps: REPS, rows }, null, 2) + '\n');
  process.stdout.write(`\nTable 3 shape: efficient bash\n${table(rows, rows[1])}\n`);
}

async function main(): Promise<void> {
  if (args.includes('--tools')) return tools();
  const dataset = writeDataset();
  process.stderr.write(`bench:dapo: ${STEPS} steps, n=${N}, batch_size=${B}, ${RUN_WORKERS} RUN workers, 2 simulated backends, train ${TRAIN_MS} ms/step, ${REPS} rep(s)\n`);
  const modes = await runSet('modes', MODES, dataset);
  const t3 = await runSet('table3', TABLE3, dataset);
  const sync = modes[0];
  const carry = modes[2];
  const result = {
    bench: 'dapo', date: new Date().toISOString(), steps: STEPS, n: N, batch_size: B, run_workers: RUN_WORKERS, train_ms: TRAIN_MS, reps: REPS,
    latency: LATENCY, filler: FILLER, modes, table3: t3,
    ratios: { async_carry_over_vs_sync: carry.informative_groups_per_s / sync.informative_groups_per_s, async_no_carry_vs_sync: modes[1].informative_groups_per_s / sync.informative_groups_per_s },
    targets: { speedup_ge_2: carry.informative_groups_per_s / sync.informative_groups_per_s >= 2, utilization_ge_90: carry.worker_utilization >= 0.9, waste_le_5: carry.waste_fraction <= 0.05 },
  };
  const outDir = path.resolve(path.dirname(new URL(import.meta.url).pathname), 'results');
  mkdirSync(outDir, { recursive: true });
  writeFileSync(path.join(outDir, 'dapo.json'), JSON.stringify(result, null, 2) + '\n');
  writeFileSync(path.join(outDir, 'dapo.svg'), barChartSvg('bench:dapo — DAPO modes (same servers, dataset, lengths)', modes.map((m) => m.variant), [
    { name: 'informative groups/s', color: '#1f77b4', values: modes.map((m) => m.informative_groups_per_s) },
    { name: 'worker utilization', color: '#2ca02c', values: modes.map((m) => m.worker_utilization) },
    { name: 'waste fraction', color: '#d62728', values: modes.map((m) => m.waste_fraction) },
  ]));
  process.stdout.write(`\nDAPO modes\n${table(modes, sync)}\n\nTable 3 shape\n${table(t3, t3[2])}\n\nasync+carry-over vs sync: ${result.ratios.async_carry_over_vs_sync.toFixed(2)}×\n`);
}

main().catch((err) => {
  process.stderr.write(`bench:dapo failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
