/**
 * `npm run bench:pools`: self-sizing stage pools (`workers: auto`) against the default sizes and
 * against the best static sizes a grid search finds on the same workload, side by side in one run.
 * One rollout server, four simulated vLLM backends (in their own process), a DAPO coordinator (the
 * engine of `raas train`) over a mixed dataset, a third of each kind:
 *   math-like: one model turn, EVAL instant (the chat handler, one turn);
 *   swe-like:  two model turns, INIT starts a process (as a sandbox start), EVAL waits SWE_EVAL_MS on
 *              a test process (`sleep`: a suite waiting on its services; the CPU stays free, so the
 *              EVAL pool, not the machine, is what limits it);
 *   chat:      six model turns (long RUN), EVAL instant.
 * Variants: the defaults (INIT 16, RUN 64, EVAL 16), `workers: auto`, and the grid RUN × EVAL (INIT
 * 32). Reports, as medians over --reps repetitions (min–max), informative groups/s and the p99 of a
 * job's life (admission to result), the best static variant, auto ÷ best (target ≥ 0.95) and
 * auto ÷ default (target ≥ 1.2), and the sizes auto settled on.
 * Writes bench/results/pools.json. The rollout server runs as `raas serve` (the built CLI: run `npm run build` first) in its own process.
 * Flags: --quick (a 4-point grid, 3 steps, 1 rep: does it work), --reps N (default 2), --steps N
 * (default 5), --only TEXT (diagnostic: the variants whose name contains TEXT, no ratios; each auto
 * run prints the decisions its pools took), --json.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Coordinator } from '../src/dapo/index.js';
import type { SimOptions } from '../src/sim/index.js';
import { rng } from '../src/util/hash.js';
import { Recorder, percentile, recordCoordinator } from './dapo-record.js';

const args = process.argv.slice(2);
const flag = (name: string, dflt: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const here = path.dirname(new URL(import.meta.url).pathname);
const quick = args.includes('--quick');
const REPS = flag('--reps', quick ? 1 : 2);
const STEPS = flag('--steps', quick ? 3 : 5);
const N = 4;
const BATCH = 16;
const SWE_EVAL_MS = 1500;
const LATENCY = {
  prefill_ms_per_token: 0.05,
  decode_ms_per_token: 2,
  overhead_ms: 2,
  concurrency_slowdown: 0.01,
  max_num_seqs: 256,
} satisfies SimOptions['latency'];
const FILLER = { median_tokens: 40, sigma: 0.5, min_tokens: 4, max_tokens: 400 } satisfies SimOptions['filler'];

type Sizes = { init: number | 'auto'; run: number | 'auto'; eval: number | 'auto' };
interface Variant {
  name: string;
  workers: Sizes | 'auto';
}
const DEFAULT: Variant = { name: 'default (16/64/16)', workers: { init: 16, run: 64, eval: 16 } };
const AUTO: Variant = { name: 'workers: auto', workers: 'auto' };
const GRID: Variant[] = (quick ? [32, 128] : [32, 64, 128]).flatMap((r) =>
  (quick ? [16, 128] : [16, 48, 128]).map((e) => ({ name: `static 32/${r}/${e}`, workers: { init: 32, run: r, eval: e } })),
);

function dataset(dir: string): string {
  const r = rng(5);
  const rows = Array.from({ length: 900 }, (_, i) => {
    const u = r();
    const pass_rate = u < 0.25 ? 0 : u < 0.5 ? 1 : 0.3 + 0.4 * r();
    const kind = i % 3;
    return JSON.stringify(
      kind === 0
        ? { data_source: 'chat', instance_id: `math${i}`, turns: 1, pass_rate }
        : kind === 1
          ? { data_source: 'swe-like', instance_id: `swe${i}`, turns: 2, pass_rate }
          : { data_source: 'chat', instance_id: `chat${i}`, turns: 6, pass_rate },
    );
  });
  const f = path.join(dir, 'mixed.jsonl');
  writeFileSync(f, `${rows.join('\n')}\n`);
  return f;
}

async function simFleet(): Promise<{ child: ChildProcess; urls: string[] }> {
  const spec = { count: 4, options: { seed: 3, latency: LATENCY, filler: FILLER, abort_on_weight_update: false } };
  const child = spawn(process.execPath, [...process.execArgv, path.join(here, 'sim-fleet.ts'), JSON.stringify(spec)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (c) => reject(new Error(`sim-fleet exited with ${c}`)));
  });
  return { child, urls: (JSON.parse(line) as { urls: string[] }).urls };
}

interface Measured {
  variant: string;
  groups_per_s: number;
  p99_life_s: number;
  /** The pool sizes over the run: time-averaged, and the largest (what auto chose). */
  sizes: string;
  load_avg_1m: number;
}

/** Samples the server's pool sizes every 250 ms: their mean and maximum over the run, and (auto) the reasons of its decisions. */
function sizeSampler(url: string): { stop(): string; reasons: Map<string, number> } {
  const sum = { init: 0, run: 0, eval: 0 };
  const max = { init: 0, run: 0, eval: 0 };
  const reasons = new Map<string, number>();
  let n = 0;
  const timer = setInterval(() => {
    void fetch(`${url}/status`)
      .then((r) => r.json() as Promise<{ workers: Record<'init' | 'run' | 'eval', { size: number; reason?: string }> }>)
      .then((st) => {
        n++;
        for (const k of ['init', 'run', 'eval'] as const) {
          sum[k] += st.workers[k].size;
          max[k] = Math.max(max[k], st.workers[k].size);
          const why = st.workers[k].reason;
          if (why) reasons.set(`${k}: ${why.replace(/\(gradient [0-9.]+\)/, '')}`, (reasons.get(`${k}: ${why}`) ?? 0) + 1);
        }
      })
      .catch(() => {});
  }, 250);
  return {
    reasons,
    stop() {
      clearInterval(timer);
      const mean = (k: 'init' | 'run' | 'eval') => Math.round(sum[k] / Math.max(1, n));
      return `mean ${mean('init')}/${mean('run')}/${mean('eval')}, max ${max.init}/${max.run}/${max.eval}`;
    },
  };
}

/**
 * `raas serve` as a child process (the built CLI), with the swe-like handler: its own process, so
 * what its autosizer measures is its own CPU, and the coordinator's work does not slow it.
 */
async function serve(dir: string, v: Variant): Promise<{ url: string; close(): Promise<void> }> {
  const cfg = path.join(dir, `server-${v.name.replace(/\W+/g, '')}.yaml`);
  writeFileSync(
    cfg,
    `workers: ${JSON.stringify(v.workers)}\nautosize: {interval_s: 1}\nmax_queued_jobs: 100000\nhandler_modules: [${JSON.stringify(path.join(here, 'pools-handler.mjs'))}]\n`,
  );
  const child = spawn(process.execPath, [path.join(here, '../dist/src/cli.js'), 'serve', '--port', '0', '--config', cfg], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, RAAS_BENCH_SWE_EVAL_S: String(SWE_EVAL_MS / 1000) },
  });
  const url = await new Promise<string>((resolve, reject) => {
    let buf = '';
    child.stdout!.on('data', (c: Buffer) => {
      buf += c;
      const m = /listening on (http:\/\/\S+?)[\s)]/.exec(buf);
      if (m) resolve(m[1]!);
    });
    child.once('exit', (c) => reject(new Error(`raas serve exited with ${c}: ${buf}`)));
  });
  return {
    url,
    close: () =>
      new Promise((r) => {
        child.once('exit', () => r());
        child.kill('SIGTERM');
      }),
  };
}

async function runOnce(v: Variant, backends: string[], data: string, tag: string, dir: string): Promise<Measured> {
  const load0 = loadavg()[0]!;
  const server = await serve(dir, v);
  // One job first: the server loads its tokenizer at the first job that needs it (a second or more
  // of CPU), and a weight update's health probe must not fall into that.
  const post = (route: string, body: unknown) =>
    fetch(`${server.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  await post('/add_llm_server', { address: backends[0] });
  await (await post('/process', { instance: { data_source: 'chat', turns: 1 }, job_id: 'warm-up' })).json();
  const rec = new Recorder();
  const c = new Coordinator(
    {
      name: `pools-${tag}`,
      seed: 9,
      servers: [{ url: server.url }],
      backends,
      dataset: { path: data },
      n: N,
      batch_size: BATCH,
      steps: STEPS,
      mode: 'async',
      carry_over: true,
      max_staleness: 2,
      // Demand beyond any pool size: the staleness window bounds what is in flight (3 × 16 groups × 4).
      max_inflight_jobs: 3 * BATCH * N,
      sampling_params: { max_tokens_per_turn: 256 },
    },
    { onWarning: () => {} },
  );
  const t0 = performance.now();
  let groups = 0;
  let sizes = '';
  const sampler = sizeSampler(server.url);
  try {
    await c.start();
    recordCoordinator(c, rec);
    for await (const batch of c.batches()) {
      groups += batch.groups.length;
      if (batch.step + 1 < STEPS) await updateWeights(c);
    }
  } finally {
    sizes = sampler.stop();
    if (sampler.reasons.size > 0)
      process.stderr.write(`bench:pools: ${v.name}: decisions seen ${JSON.stringify(Object.fromEntries(sampler.reasons))}\n`);
    await c.close();
    await server.close();
  }
  const wall = (performance.now() - t0) / 1000;
  const lives = [...rec.rollouts.values()].filter((r) => r.ok && r.life_s !== undefined).map((r) => r.life_s!);
  return {
    variant: v.name,
    groups_per_s: groups / wall,
    p99_life_s: percentile(lives, 99),
    sizes,
    load_avg_1m: Math.max(load0, loadavg()[0]!),
  };
}

/**
 * A weight update, tried again when its placement found no server answering GET /health within
 * 2 s: on a loaded 2-core machine a busy server can take longer than that to answer (the
 * coordinator then fails the update rather than place onto a server it believes dead).
 */
async function updateWeights(c: Coordinator): Promise<void> {
  const version = c.status().policy_version + 1;
  for (let i = 0; ; i++) {
    try {
      await c.updateWeights({ version });
      return;
    } catch (err) {
      if (i >= 30 || !(err instanceof Error && /no rollout server answers GET \/health/.test(err.message))) throw err;
      process.stderr.write('bench:pools: the server did not answer /health in time; the weight update is tried again\n');
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((p, q) => p - q);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'raas-bench-pools-'));
  const sims = await simFleet();
  const data = dataset(dir);
  const only = args.indexOf('--only');
  const variants = [DEFAULT, AUTO, ...GRID].filter((v) => only < 0 || v.name.includes(args[only + 1]!));
  const runs = new Map<string, Measured[]>(variants.map((v) => [v.name, []]));
  try {
    for (let rep = 0; rep < REPS; rep++) {
      // Rotate the order each repetition, so a slow moment of the machine does not fall on one variant.
      const order = variants.map((_, i) => variants[(i + rep) % variants.length]!);
      for (const v of order) {
        const m = await runOnce(v, sims.urls, data, `${rep}-${v.name.replace(/\W+/g, '')}`, dir);
        runs.get(v.name)!.push(m);
        process.stderr.write(
          `bench:pools: ${v.name}: ${m.groups_per_s.toFixed(3)} groups/s, p99 ${m.p99_life_s.toFixed(1)} s, sizes ${m.sizes}\n`,
        );
      }
    }
  } finally {
    sims.child.stdin!.end();
    await new Promise((r) => (sims.child.exitCode !== null ? r(null) : sims.child.once('exit', r)));
    rmSync(dir, { recursive: true, force: true });
  }
  if (only >= 0) {
    // A diagnostic run of some variants: their lines above, no ratios.
    return;
  }
  const med = (name: string, k: 'groups_per_s' | 'p99_life_s'): number => median(runs.get(name)!.map((m) => m[k]));
  const range = (name: string, k: 'groups_per_s' | 'p99_life_s', d: number): string => {
    const xs = runs.get(name)!.map((m) => m[k]);
    return xs.length > 1 ? `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})` : median(xs).toFixed(d);
  };
  const best = GRID.reduce((b, v) => (med(v.name, 'groups_per_s') > med(b.name, 'groups_per_s') ? v : b));
  const autoVsBest = med(AUTO.name, 'groups_per_s') / med(best.name, 'groups_per_s');
  const autoVsDefault = med(AUTO.name, 'groups_per_s') / med(DEFAULT.name, 'groups_per_s');
  const loads = [...runs.values()].flat().map((m) => m.load_avg_1m);
  const out = [
    `bench:pools — ${REPS} rep(s), ${STEPS} steps of ${BATCH} groups × ${N}, ${cpus().length} cores, load avg (1 min) ${median(loads).toFixed(1)} (${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)})`,
    `command: npm run bench:pools${args.length ? ` -- ${args.join(' ')}` : ''}`,
    '',
    '| pools (INIT/RUN/EVAL) | informative groups/s | p99 job life (s) | sizes over the run |',
    '|---|---|---|---|',
    ...variants.map(
      (v) =>
        `| ${v.name}${v === best ? ' **best static**' : ''} | ${range(v.name, 'groups_per_s', 3)} | ${range(v.name, 'p99_life_s', 1)} | ${runs.get(v.name)!.at(-1)!.sizes} |`,
    ),
    '',
    '| figure | measured | target |',
    '|---|---|---|',
    `| auto ÷ best static (${best.name}) | ${autoVsBest.toFixed(2)} | ≥ 0.95 |`,
    `| auto ÷ default | ${autoVsDefault.toFixed(2)} | ≥ 1.2 |`,
    `| p99 job life: auto vs best static | ${med(AUTO.name, 'p99_life_s').toFixed(1)} s vs ${med(best.name, 'p99_life_s').toFixed(1)} s | |`,
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(
    path.join(here, 'results', 'pools.json'),
    `${JSON.stringify({ args, table: out, runs: Object.fromEntries(runs) }, null, 1)}\n`,
  );
  if (args.includes('--json')) process.stdout.write(`${JSON.stringify(Object.fromEntries(runs))}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:pools: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
