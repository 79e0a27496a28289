/**
 * `npm run bench:flood`: how the server answers while agents flood it with text that is expensive to
 * tokenize (one unbroken run of CJK characters: one BPE pre-token, quadratic merges). The same
 * attack runs against two servers in one run: the default (long texts encoded on a worker-thread
 * pool, `tokenizer_pool: {workers: 1}`) and the baseline that encodes on the main thread
 * (`tokenizer_pool: {workers: 0}`, how raas worked before). While the jobs run, GET /health is probed
 * every 50 ms and the server's event-loop delay is sampled (the server runs in this process).
 * Prints /health p50 / p99 / max, event-loop p99 / max, wall time, and the ratios.
 * The floor is an idle server's /health latency, measured first. Target: /health p99 < 250 ms.
 * Flags: --jobs N (default 6), --chars N (default 10000), --floods N per job (default 2), --reps N (default 3), --json.
 */
import { loadavg } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { bash, codeTask, finish, startHarness, type Harness } from '../test/security/helpers.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const JOBS = arg('jobs', 6);
const CHARS = arg('chars', 10_000);
const FLOODS = arg('floods', 2);
const REPS = arg('reps', 3);

const flood = (n: number, seed: number): string =>
  `python3 -c "import sys; sys.stdout.write(''.join(chr(0x4e00 + (i * 7919 + ${seed}) % 20000) for i in range(${n})))"`;

const q = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1)))] ?? NaN;
};

interface Rep {
  health_p50: number;
  health_p99: number;
  health_max: number;
  loop_p99: number;
  loop_max: number;
  wall_s: number;
}

async function probeWhile(h: Harness, work: Promise<unknown>): Promise<Omit<Rep, 'wall_s'>> {
  const loop = monitorEventLoopDelay({ resolution: 5 });
  loop.enable();
  const health: number[] = [];
  let done = false;
  void work.finally(() => (done = true));
  while (!done) {
    health.push(await h.health());
    await new Promise((r) => setTimeout(r, 50));
  }
  loop.disable();
  return {
    health_p50: q(health, 0.5),
    health_p99: q(health, 0.99),
    health_max: Math.max(...health),
    loop_p99: loop.percentile(99) / 1e6,
    loop_max: loop.max / 1e6,
  };
}

async function runVariant(name: string, workers: number): Promise<{ idle: number; reps: Rep[] }> {
  const h = await startHarness(`bench-flood-${name}`, { server: { tokenizer_pool: { workers, min_chars: 2048 } } });
  try {
    const idle: number[] = [];
    for (let i = 0; i < 40; i++) idle.push(await h.health());
    const reps: Rep[] = [];
    for (let r = 0; r < REPS; r++) {
      const t0 = performance.now();
      const jobs = Array.from({ length: JOBS }, (_, k) => {
        const steps = Array.from({ length: FLOODS }, (_, f) => bash(flood(CHARS, r * 1000 + k * FLOODS + f)));
        const m = h.script(`flood-${r}-${k}`, [...steps, finish()]);
        return h.process({ instance: codeTask(m) }, 300_000);
      });
      const all = Promise.all(jobs);
      const probe = await probeWhile(h, all);
      const answers = await all;
      const bad = answers.filter((a) => a.status !== 200);
      if (bad.length > 0) throw new Error(`${name}: ${bad.length} job(s) did not answer 200: ${bad[0]!.text.slice(0, 200)}`);
      reps.push({ ...probe, wall_s: (performance.now() - t0) / 1000 });
    }
    return { idle: q(idle, 0.5), reps };
  } finally {
    await h.close();
  }
}

const med = (reps: Rep[], k: keyof Rep): number =>
  q(
    reps.map((r) => r[k]),
    0.5,
  );
const spread = (reps: Rep[], k: keyof Rep): string =>
  `${Math.min(...reps.map((r) => r[k])).toFixed(0)}–${Math.max(...reps.map((r) => r[k])).toFixed(0)}`;

async function main(): Promise<void> {
  const load0 = loadavg()[0]!;
  process.stderr.write(`bench:flood: ${JOBS} jobs x ${FLOODS} floods x ${CHARS} CJK chars, ${REPS} reps, load avg ${load0.toFixed(2)}\n`);
  const pool = await runVariant('pool', 1);
  const main = await runVariant('main-thread', 0);
  const row = (label: string, v: { idle: number; reps: Rep[] }): string =>
    `${label.padEnd(26)} /health p50 ${med(v.reps, 'health_p50').toFixed(0).padStart(5)} ms  p99 ${med(v.reps, 'health_p99').toFixed(0).padStart(5)} ms (${spread(v.reps, 'health_p99')})  max ${med(v.reps, 'health_max').toFixed(0).padStart(5)} ms  loop p99 ${med(v.reps, 'loop_p99').toFixed(0).padStart(4)} ms max ${med(v.reps, 'loop_max').toFixed(0).padStart(5)} ms  wall ${med(v.reps, 'wall_s').toFixed(1)} s`;
  process.stdout.write(`${row('worker pool (default)', pool)}\n${row('main thread (baseline)', main)}\n`);
  process.stdout.write(`floor: idle /health p50 ${pool.idle.toFixed(1)} ms\n`);
  process.stdout.write(
    `ratio baseline/pool: /health p99 ${(med(main.reps, 'health_p99') / med(pool.reps, 'health_p99')).toFixed(1)}x, loop max ${(med(main.reps, 'loop_max') / med(pool.reps, 'loop_max')).toFixed(1)}x, wall ${(med(main.reps, 'wall_s') / med(pool.reps, 'wall_s')).toFixed(2)}x\n`,
  );
  process.stdout.write(
    `target /health p99 < 250 ms: ${med(pool.reps, 'health_p99') < 250 ? 'met' : 'missed'}; load avg ${load0.toFixed(2)} -> ${loadavg()[0]!.toFixed(2)}\n`,
  );
  if (process.argv.includes('--json'))
    process.stdout.write(`${JSON.stringify({ jobs: JOBS, chars: CHARS, floods: FLOODS, load_avg_1m: load0, pool, main_thread: main })}\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);
