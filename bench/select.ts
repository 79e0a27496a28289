/**
 * `npm run bench:select`: pre-rollout prompt selection and adaptive group size against plain DAPO
 * dynamic sampling, on the same seeds, side by side in one run.
 *
 * Workload (bench/select-task.ts): 128 one-turn question prompts whose pass rates come from the
 * simulator's `logit` difficulty model (many near 0 and 1, a band between, moving as the weights
 * update: most prompts get easier, some harder, 10 % never solvable); answers of ~150 tokens
 * (lognormal) decoded at 2 ms/token on two simulated vLLM backends in a child process; a real
 * rollout server in this process (32 RUN workers); the coordinator in async mode with carry-over
 * (η = 1), n = 8, batch_size = 8, 60 steps (about 12 passes over the data without selection); the "trainer" sleeps 300 ms per step, then the
 * backends get a weight update (`/finish_weight_update`) and the coordinator `updateWeights`.
 * Every variant reaches the same number of accepted groups (steps × batch_size).
 *
 * Variants: `none` (every prompt, n = 8: DAPO's dynamic sampling), `history` (selection with its
 * defaults), `history + adaptive n` (variable group sizes in [4, 16]), `history + adaptive n (fixed
 * batch)` (groups grow from 8 to at most 24, the batch keeps 8 per group).
 *
 * Reports per variant, medians over seeds with min–max: rollouts started per accepted group (and
 * per rollout in a batch), wall time to the last batch and the time spent waiting for batches,
 * the filtered share, skips, and the share of the dataset still visited (over the run, and in its
 * second half); then the ratios none ÷ variant with the targets (≥ 1.5× fewer rollouts per accepted
 * group, ≥ 1.3× less wall time). Writes bench/results/select.json.
 * Flags: --seeds 1,2 (default), --steps N, --quick (1 seed, 16 steps: does it work), --only TEXT.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Coordinator } from '../src/dapo/index.js';
import type { TrainConfigInput } from '../src/protocol/config-train.js';
import { startRolloutServer } from '../src/server/index.js';
import type { SimOptions } from '../src/sim/index.js';
import { pickHandler, writePickDataset } from './select-task.js';

const args = process.argv.slice(2);
const opt = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const SEEDS = (opt('--seeds') ?? (quick ? '1' : '1,2')).split(',').map(Number);
const STEPS = Number(opt('--steps') ?? (quick ? 16 : 60));
const ONLY = opt('--only');
const N = 8;
const B = 8;
const PROMPTS = 128;
const RUN_WORKERS = 32;
const TRAIN_MS = 300;
const here = path.dirname(new URL(import.meta.url).pathname);
const SIM: SimOptions = {
  latency: { prefill_ms_per_token: 0.05, decode_ms_per_token: 2, overhead_ms: 2, concurrency_slowdown: 0.01, max_num_seqs: 256 },
  abort_on_weight_update: false,
  weight_version: '0',
  difficulty: { model: 'logit' },
};

interface Variant {
  name: string;
  selection: NonNullable<TrainConfigInput['selection']>;
}
const VARIANTS: Variant[] = [
  { name: 'none', selection: { mode: 'none' } },
  { name: 'history', selection: { mode: 'history' } },
  { name: 'history + adaptive n', selection: { mode: 'history', adaptive_n: { min: 4, max: 16 } } },
  { name: 'history + adaptive n (fixed batch)', selection: { mode: 'history', adaptive_n: { batch: 'fixed', max: 24 } } },
].filter((v) => !ONLY || v.name.includes(ONLY));

interface Measured {
  variant: string;
  seed: number;
  accepted: number;
  rollouts: number;
  rollouts_per_accepted: number;
  rollouts_per_batch_rollout: number;
  wall_s: number;
  wait_s: number;
  filtered_share: number;
  skipped: number;
  visited_share: number;
  visited_share_late: number;
  batch_mean_reward: number;
  load_avg_1m: number;
}

async function startSims(seed: number): Promise<{ child: ChildProcess; urls: string[] }> {
  const spec = { count: 2, median_tokens: 150, options: { ...SIM, seed } };
  const child = spawn(process.execPath, [...process.execArgv, path.join(here, 'select-sim.ts'), JSON.stringify(spec)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (c) => reject(new Error(`select-sim exited with ${c}`)));
  });
  return { child, urls: (JSON.parse(line) as { urls: string[] }).urls };
}

async function stopSims(s: { child: ChildProcess }): Promise<void> {
  s.child.stdin!.end();
  await new Promise((r) => (s.child.exitCode !== null ? r(null) : s.child.once('exit', r)));
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function runOnce(v: Variant, seed: number, dataset: string): Promise<Measured> {
  // Fresh backends per run: the difficulty model moves with the weight updates a backend has seen.
  const sims = await startSims(seed);
  const server = await startRolloutServer({ port: 0, workers: { init: 32, run: RUN_WORKERS, eval: 32 }, log_level: 'silent' } as never, {
    handlers: [pickHandler],
  });
  const cfg: TrainConfigInput = {
    name: `select-${v.name.replace(/\W+/g, '-')}-${seed}`,
    seed,
    servers: [{ url: server.url }],
    backends: sims.urls.map((address) => ({ address, api: 'vllm' as const })),
    dataset: { path: dataset },
    n: N,
    batch_size: B,
    steps: STEPS,
    mode: 'async',
    carry_over: true,
    max_staleness: 1,
    max_inflight_jobs: RUN_WORKERS + 2 * N,
    sampling_params: { max_tokens_per_turn: 1024 },
    selection: v.selection,
  };
  const load0 = loadavg()[0]!;
  const c = new Coordinator(cfg, { onWarning: () => {} });
  try {
    await c.start();
    const t0 = performance.now();
    let wait = 0;
    let batchRollouts = 0;
    let rewardSum = 0;
    for (let step = 0; step < STEPS; step++) {
      const w0 = performance.now();
      const batch = await c.nextBatch();
      wait += performance.now() - w0;
      batchRollouts += batch.groups.reduce((a, g) => a + g.rollouts.length, 0);
      rewardSum += Number(batch.stats.batch_mean_reward ?? 0);
      if (step === STEPS - 1) break;
      await sleep(TRAIN_MS);
      // The trainer's weight sync: the backends serve the new weights, then the coordinator is told.
      await Promise.all(
        sims.urls.map((u) =>
          fetch(`${u}/finish_weight_update`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }),
        ),
      );
      await c.updateWeights({});
    }
    const wall = (performance.now() - t0) / 1000;
    const t = c.status().totals;
    const hist = c.promptHistory();
    const finished = t.accepted + t.filtered + t.dropped_error;
    return {
      variant: v.name,
      seed,
      accepted: t.handed,
      rollouts: t.jobs_submitted,
      rollouts_per_accepted: t.jobs_submitted / t.handed,
      rollouts_per_batch_rollout: t.jobs_submitted / batchRollouts,
      wall_s: wall,
      wait_s: wait / 1000,
      filtered_share: finished ? t.filtered / finished : 0,
      skipped: t.skipped,
      visited_share: hist.filter((r) => r.submitted > 0).length / PROMPTS,
      visited_share_late: hist.filter((r) => r.groups.some((g) => g.step >= STEPS / 2)).length / PROMPTS,
      batch_mean_reward: rewardSum / STEPS,
      load_avg_1m: (load0 + loadavg()[0]!) / 2,
    };
  } finally {
    await c.close();
    await server.close();
    await stopSims(sims);
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
const spread = (xs: number[], d = 2): string => `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})`;

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'raas-bench-select-'));
  const dataset = path.join(dir, 'pick.jsonl');
  writePickDataset(dataset, PROMPTS);
  const runs: Measured[] = [];
  try {
    for (const [i, seed] of SEEDS.entries()) {
      // Rotate the order per seed so a drift of the machine's load does not favour one variant.
      const order = VARIANTS.map((_, k) => VARIANTS[(k + i) % VARIANTS.length]!);
      for (const v of order) {
        const m = await runOnce(v, seed, dataset);
        runs.push(m);
        process.stderr.write(
          `seed ${seed} ${v.name}: ${m.rollouts} rollouts for ${m.accepted} accepted groups (${m.rollouts_per_accepted.toFixed(2)} per group), ${m.wall_s.toFixed(1)} s, skipped ${m.skipped}, visited ${(m.visited_share * 100).toFixed(0)} %\n`,
        );
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const by = (name: string): Measured[] => runs.filter((r) => r.variant === name);
  const base = by('none');
  console.log(
    `\nbench:select — ${PROMPTS} prompts (logit difficulty), n=${N}, batch_size=${B}, ${STEPS} steps (${STEPS * B} accepted groups), async η=1, ${RUN_WORKERS} RUN workers; seeds ${SEEDS.join(',')}`,
  );
  console.log('medians over seeds (min–max)\n');
  const head = [
    'variant',
    'rollouts/accepted group',
    'rollouts/batch rollout',
    'wall s',
    'waiting s',
    'filtered',
    'skipped',
    'visited',
    'visited (2nd half)',
  ];
  console.log(head.join(' | '));
  for (const v of VARIANTS) {
    const r = by(v.name);
    console.log(
      [
        v.name,
        spread(r.map((x) => x.rollouts_per_accepted)),
        spread(r.map((x) => x.rollouts_per_batch_rollout)),
        spread(
          r.map((x) => x.wall_s),
          1,
        ),
        spread(
          r.map((x) => x.wait_s),
          1,
        ),
        spread(r.map((x) => x.filtered_share)),
        spread(
          r.map((x) => x.skipped),
          0,
        ),
        spread(r.map((x) => x.visited_share)),
        spread(r.map((x) => x.visited_share_late)),
      ].join(' | '),
    );
  }
  if (base.length) {
    console.log('\nratios none ÷ variant, per seed (median):');
    for (const v of VARIANTS.filter((x) => x.name !== 'none')) {
      const r = by(v.name);
      const per = (k: keyof Measured) => r.map((x) => Number(base.find((b) => b.seed === x.seed)![k]) / Number(x[k]));
      const rpa = per('rollouts_per_accepted');
      const rpb = per('rollouts_per_batch_rollout');
      const wall = per('wall_s');
      const wait = per('wait_s');
      console.log(
        `${v.name}: rollouts per accepted group ${spread(rpa)}× fewer (target ≥ 1.5), per batch rollout ${spread(rpb)}×; wall time ${spread(wall)}× less (target ≥ 1.3), waiting ${spread(wait)}×`,
      );
    }
  }
  const load = runs.map((r) => r.load_avg_1m);
  console.log(`\nload average (1 min) during the runs: ${spread(load, 1)} on ${(await import('node:os')).cpus().length} cores`);
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(
    path.join(here, 'results', 'select.json'),
    JSON.stringify({ steps: STEPS, n: N, batch_size: B, prompts: PROMPTS, seeds: SEEDS, runs }, null, 2) + '\n',
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
