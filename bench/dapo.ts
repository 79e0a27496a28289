/**
 * `npm run bench:dapo`: the DAPO coordinator's modes side by side, each against the ideal schedule
 * of its own measured rollouts (the oracle, bench/dapo-oracle.ts) and against two sync baselines.
 * Same real rollout server (in-process, 32 RUN workers), same two simulated vLLM backends (in a child
 * process, bench/sim-fleet.ts, so the server's CPU work does not slow simulated GPU time), same
 * seeded chat dataset (a quarter of the prompts always fail, a quarter always pass, so about half
 * the groups are zero-variance).
 * Workload: 1–3 turns per rollout; each turn's length is lognormal (median 60 tokens, σ = 1) up to
 * a per-turn cap of 1024 tokens (sampling_params.max_tokens_per_turn; the chat handler's default
 * cap is 256, the simulator's filler cap is set above it), so a few rollouts run 10× the median.
 *   modes: plain sync (the coordinator's batch-by-batch mode: each round submits the missing
 *   groups), oversampling sync (veRL's DAPO recipe: 3 × batch_size prompts per round,
 *   bench/dapo-oversample.ts), async without carry-over, async with carry-over (max_staleness 1).
 * Each run: 4 steps of batch_size 12 (n = 4); the "trainer" sleeps TRAIN_MS per step, then updates the weights.
 * Each run starts on a warmed server (tokenizer loaded, as `raas serve` does before announcing its
 * URL; a few chat jobs through it), so the first step does not pay a cold process's stalls.
 * Per run it records every rollout's server-side duration (INIT + RUN + EVAL) and replays them under
 * the oracle (same 32 workers, batch size, group size, staleness bound — 0 for the sync modes —
 * and trainer time). After the measured window it admits nothing more and lets the groups in flight
 * finish, so the oracle replays every group the run admitted (Recorder.oracleGroups); it samples the
 * server's busy RUN workers (GET /status every 50 ms), this process's and the simulators' CPU time,
 * and the load average. The policy replay (bench/dapo-replay.ts) runs twice: with zero overhead, and
 * with the transit and weight-update delays the run measured.
 * Reports, as medians over --reps repetitions (rotated order) with min–max: informative groups/s,
 * × plain sync, × oversampling sync, ÷ oracle, server RUN-worker and coordinator utilization, wasted
 * tokens, staleness; and rollout tokens p50/p90/p99/max. Writes bench/results/dapo.json and dapo.svg.
 * Flags: --quick (2 steps, 1 rep: does it work), --reps N (default 3), --steps N (default 4),
 * --batch-size N (default 12), --slow K (every simulated
 * latency and the trainer step × K, for a machine whose CPU saturates), --table3 (adds the
 * round-robin routing variant, ProRL Agent's Table 3 shape), --only TEXT (diagnostic: only the
 * variants whose name contains TEXT, no ratios), --dump DIR (each run's groups: durations and rewards,
 * and the handover times of the run, the oracle and the replay, for offline replays), --cold (no
 * warm-up: the first step pays the server's start), --tools (code tasks, PTY vs tmux bash).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { DapoCore } from '../src/dapo/core.js';
import { Coordinator } from '../src/dapo/index.js';
import { barChartSvg } from '../src/dapo/plot.js';
import type { Batch } from '../src/protocol/batch.js';
import type { TrainConfigInput } from '../src/protocol/config-train.js';
import { RolloutClient } from '../src/client/index.js';
import { startRolloutServer, type RolloutServer } from '../src/server/index.js';
import type { SimOptions } from '../src/sim/index.js';
import { rng } from '../src/util/hash.js';
import { oracleSchedule } from './dapo-oracle.js';
import { runOversampled } from './dapo-oversample.js';
import { replayCoordinator } from './dapo-replay.js';
import { Recorder, RunUtilSampler, percentile, processCpuSeconds, recordCoordinator } from './dapo-record.js';

const args = process.argv.slice(2);
const flag = (name: string, dflt: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const here = path.dirname(new URL(import.meta.url).pathname);
const quick = args.includes('--quick');
const REPS = flag('--reps', quick ? 1 : 3);
const SLOW = flag('--slow', 1);
const STEPS = flag('--steps', quick ? 2 : 4);
const N = 4;
/**
 * 12 groups per batch on 32 workers (8 groups at a time): a step lasts longer than the σ = 1 tail's
 * long rollouts. At 8 (one batch = the groups in flight) a rollout started just before an update
 * must end within about two rollout lengths, and even the oracle then drops 6–9 % of the work as
 * too stale under max_staleness 1 (bench/dapo-oracle.ts on a recorded run).
 */
const B = flag('--batch-size', args.includes('--tools') ? 4 : 12);
const GEN_BATCH = 3 * B;
const RUN_WORKERS = 32;
/**
 * Jobs the coordinator keeps submitted: the RUN workers plus two groups waiting in the server's
 * queue, so a worker that frees starts the next job at once instead of idling while a result
 * travels back and the next group travels out (--inflight N overrides).
 */
const INFLIGHT = flag('--inflight', RUN_WORKERS + 2 * N);
const TRAIN_MS = 300 * SLOW;
const SEED = 11;
const TURN_CAP = 1024;
const LATENCY = {
  prefill_ms_per_token: 0.1 * SLOW,
  decode_ms_per_token: 2.5 * SLOW,
  overhead_ms: 2 * SLOW,
  concurrency_slowdown: 0.01,
  max_num_seqs: 256,
} satisfies SimOptions['latency'];
const FILLER = { median_tokens: 60, sigma: 1, min_tokens: 4, max_tokens: 4 * TURN_CAP } satisfies SimOptions['filler'];
const SAMPLING = { max_tokens_per_turn: TURN_CAP };

interface Variant {
  name: string;
  /** The coordinator's config, or the oversampling driver. */
  cfg?: Partial<TrainConfigInput>;
  oversample?: true;
  routing?: 'active' | 'round_robin';
  /** The server's sandbox section (the tools set compares bash backends). */
  sandbox?: Record<string, unknown>;
}
const CARRY: Variant = { name: 'async + carry-over (η=1)', cfg: { mode: 'async', carry_over: true, max_staleness: 1 } };
const MODES: Variant[] = [
  { name: 'plain sync (missing groups per round)', cfg: { mode: 'sync' } },
  { name: `oversampling sync (veRL DAPO, ${GEN_BATCH} prompts/round)`, oversample: true },
  { name: 'async, no carry-over', cfg: { mode: 'async', carry_over: false } },
  CARRY,
  ...(args.includes('--table3')
    ? [{ name: 'async + carry-over, round-robin routing', cfg: CARRY.cfg, routing: 'round_robin' as const }]
    : []),
];
/** `--tools`: the code tasks (bash, editor, python in bwrap sandboxes), PTY bash vs the tmux baseline. */
const TOOLS: Variant[] = [
  { name: 'full system (PTY bash)', cfg: CARRY.cfg, sandbox: { bash_backend: 'pty' } },
  { name: 'w/o efficient bash (tmux, 500 ms poll)', cfg: CARRY.cfg, sandbox: { bash_backend: 'tmux' } },
];

/** The oracle's staleness bound: the sync modes hand over only groups of the current version. */
const boundOf = (v: Variant): number => (v.oversample || v.cfg?.mode === 'sync' ? 0 : (v.cfg?.max_staleness ?? 1));

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
  oracle_groups_per_s: number;
  /** Measured ÷ oracle. */
  vs_oracle: number;
  /** The coordinator's policy on the same groups with zero overhead (bench/dapo-replay.ts) ÷ oracle; NaN for the oversampling driver. */
  replay_vs_oracle: number;
  /** The same replay with this run's transit and weight-update delays ÷ oracle. */
  replay_delays_vs_oracle: number;
  step_time_s: number;
  /** Time-averaged busy RUN workers ÷ RUN workers, sampled from the server's /status. */
  server_run_utilization: number;
  /** The coordinator's own count (jobs submitted and not ended ÷ max_inflight_jobs). */
  coordinator_utilization: number;
  oracle_utilization: number;
  /** The oracle's own waste on the same durations (work on groups it had to drop as too stale). */
  oracle_waste_fraction: number;
  waste_fraction: number;
  staleness_mean: number;
  staleness_max: number;
  rollouts_per_s: number;
  /** CPU time ÷ wall of this process (coordinator + rollout server) and of the simulators' process: 1 = one core. */
  cpu_bench: number;
  cpu_sims: number;
  load_avg_1m: number;
  tokens_p50: number;
  tokens_p90: number;
  tokens_p99: number;
  tokens_max: number;
  rollout_s_p50: number;
  rollout_s_max: number;
  /** Per job, mean ms from the driver's admission to its result, and the parts outside a RUN worker. */
  job_life_ms: number;
  job_queued_ms: number;
  job_init_eval_ms: number;
  job_transit_ms: number;
  /** Mean ms per weight update (admission holds meanwhile). */
  update_ms: number;
  wall_s: number;
}

/**
 * The simulated backends in their own process, started once per bench run (they keep no state that
 * matters between runs: request seeds come from job ids, weight versions from the registration).
 */
let sims: Promise<{ child: ChildProcess; urls: string[] }> | undefined;
function startSims(dataset: string): Promise<{ child: ChildProcess; urls: string[] }> {
  sims ??= (async () => {
    const spec = {
      count: 2,
      options: { seed: SEED, latency: LATENCY, filler: FILLER, abort_on_weight_update: false, weight_version: '0', datasets: [dataset] },
    };
    const child = spawn(process.execPath, [...process.execArgv, path.join(here, 'sim-fleet.ts'), JSON.stringify(spec)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', resolve);
      child.once('exit', (c) => reject(new Error(`sim-fleet exited with ${c}`)));
    });
    return { child, urls: (JSON.parse(line) as { urls: string[] }).urls };
  })();
  return sims;
}

async function stopSims(): Promise<void> {
  const s = await sims?.catch(() => undefined);
  if (!s) return;
  s.child.stdin!.end();
  await new Promise((r) => (s.child.exitCode !== null ? r(null) : s.child.once('exit', r)));
}

/**
 * Warms a fresh rollout server before the measured window, as a long-lived `raas serve` is: the
 * tokenizer loaded (raas serve loads it before announcing its URL), the chat template compiled,
 * connections to the simulators open, the hot paths compiled. Cold, the first step paid up to a
 * second of event-loop stalls in this process (server and coordinator share it) that no rollout's
 * duration records, so the oracle's replay could not see them: 4 steps made that 5-10 % of the wall.
 */
async function warmUp(server: RolloutServer, backends: Array<{ address: string; api: 'vllm' }>): Promise<void> {
  server.warmTokenizer();
  const client = new RolloutClient({ url: server.url });
  try {
    for (const b of backends) await client.addLlmServer(b);
    await Promise.all(
      Array.from({ length: 2 * N }, (_, k) =>
        client.process({ instance: { data_source: 'chat', instance_id: `warm${k}`, turns: 1, pass_rate: 0.5 }, sampling_params: SAMPLING }),
      ),
    );
    for (const b of backends) await client.removeLlmServer(b.address);
  } finally {
    client.close();
  }
}

async function runOnce(v: Variant, dataset: string, tag: string): Promise<Measured> {
  const { child, urls } = await startSims(dataset);
  const server = await startRolloutServer({
    port: 0,
    workers: { init: 32, run: RUN_WORKERS, eval: 32 },
    llm: { routing: v.routing ?? 'active' },
    log_level: 'silent',
    ...(v.sandbox ? { sandbox: v.sandbox } : {}),
  } as never);
  const backends = urls.map((address) => ({ address, api: 'vllm' as const }));
  if (!args.includes('--cold')) await warmUp(server, backends);
  const rec = new Recorder();
  const sampler = new RunUtilSampler(server.url);
  const name = `bench-${tag}`;
  let c: Coordinator | undefined;
  try {
    let wall: number;
    let cpu: NodeJS.CpuUsage;
    let simCpu: number;
    let rest: Pick<Measured, 'coordinator_utilization' | 'waste_fraction' | 'staleness_mean' | 'staleness_max'>;
    let updateMs = 0;
    const handoverAt: number[] = [];
    const load0 = loadavg()[0]!;
    if (v.oversample) {
      sampler.start();
      const cpu0 = process.cpuUsage();
      const sim0 = processCpuSeconds(child.pid!);
      const o = await runOversampled({
        name,
        seed: SEED,
        server: server.url,
        backends,
        dataset,
        n: N,
        batch_size: B,
        gen_batch_size: GEN_BATCH,
        steps: STEPS,
        train_ms: TRAIN_MS,
        sampling_params: SAMPLING,
        workers: RUN_WORKERS,
        recorder: rec,
      });
      cpu = process.cpuUsage(cpu0);
      simCpu = processCpuSeconds(child.pid!) - sim0;
      wall = o.wall_s;
      rest = {
        coordinator_utilization: o.driver_utilization,
        waste_fraction: o.tokens_wasted / Math.max(1, o.tokens_generated),
        staleness_mean: 0,
        staleness_max: 0,
      };
    } else {
      c = new Coordinator({
        name,
        seed: SEED,
        servers: [{ url: server.url }],
        backends,
        dataset: { path: dataset },
        n: N,
        batch_size: B,
        steps: STEPS,
        max_inflight_jobs: INFLIGHT,
        sampling_params: SAMPLING,
        ...v.cfg,
      });
      const batches: Batch[] = [];
      await c.start();
      recordCoordinator(c, rec);
      sampler.start();
      const cpu0 = process.cpuUsage();
      const sim0 = processCpuSeconds(child.pid!);
      const t0 = performance.now();
      for (let s = 0; s < STEPS; s++) {
        batches.push(await c.nextBatch());
        handoverAt.push((performance.now() - t0) / 1000);
        await new Promise((r) => setTimeout(r, TRAIN_MS)); // the trainer's step
        const u0 = performance.now();
        await c.updateWeights({});
        updateMs += (performance.now() - u0) / STEPS;
      }
      wall = (performance.now() - t0) / 1000;
      cpu = process.cpuUsage(cpu0);
      simCpu = processCpuSeconds(child.pid!) - sim0;
      const st = batches.map((b) => b.stats as Batch['stats'] & Record<string, number>);
      const sum = (f: (x: (typeof st)[number]) => number): number => st.reduce((a, x) => a + f(x), 0);
      const stal = batches.flatMap((b) => b.groups.flatMap((g) => g.rollouts.map((r) => r.staleness)));
      rest = {
        coordinator_utilization: sum((x) => x.worker_utilization * x.wall_s) / sum((x) => x.wall_s),
        waste_fraction:
          sum((x) => x.tokens_wasted) /
          Math.max(
            1,
            sum((x) => x.tokens_generated),
          ),
        staleness_mean: stal.reduce((a, b) => a + b, 0) / stal.length,
        staleness_max: Math.max(...stal),
      };
    }
    const serverUtil = sampler.stop();
    if (c) {
      // Outside the measured window: admit nothing more and let the groups in flight finish, so the
      // oracle's input holds every group the run admitted (the long ones included).
      const core = (c as unknown as { core: DapoCore }).core;
      core.paused = true;
      const deadline = performance.now() + 300_000 * SLOW;
      while (core.runningJobs > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    }
    // A replay that fails must not lose the measured run: it reports NaN and says why.
    const safely = <T>(what: string, f: () => T): T | undefined => {
      try {
        return f();
      } catch (err) {
        process.stderr.write(`  ${v.name}: ${what} failed: ${err instanceof Error ? err.message : String(err)}\n`);
        return undefined;
      }
    };
    const oracle = safely('oracle', () =>
      oracleSchedule(rec.oracleGroups(N), {
        workers: RUN_WORKERS,
        batch_size: B,
        max_staleness: boundOf(v),
        train_s: TRAIN_MS / 1000,
        steps: STEPS,
      }),
    ) ?? { informative_groups_per_s: Number.NaN, utilization: Number.NaN, waste_fraction: Number.NaN, handover_s: [] };
    const groupsPerS = (B * STEPS) / wall;
    const replay = v.cfg
      ? safely('policy replay', () =>
          replayCoordinator(rec.replayGroups(N), {
            config: { n: N, batch_size: B, ...v.cfg },
            workers: RUN_WORKERS,
            capacity: INFLIGHT,
            train_s: TRAIN_MS / 1000,
            steps: STEPS,
          }),
        )
      : undefined;
    // The same replay with the delays this run measured (admission → server and result → core:
    // the transit per job, split in two; a cancel's confirmation: the transit; the weight update's
    // hold): how much of the gap to the oracle the system's latencies explain.
    const life = rec.life();
    const transit = life.jobs > 0 ? life.transit_s / life.jobs : 0;
    const delayed = v.cfg
      ? safely('policy replay with delays', () =>
          replayCoordinator(rec.replayGroups(N), {
            config: { n: N, batch_size: B, ...v.cfg },
            workers: RUN_WORKERS,
            capacity: INFLIGHT,
            train_s: TRAIN_MS / 1000,
            steps: STEPS,
            delays: { submit_s: transit / 2, result_s: transit / 2, cancel_s: transit, update_s: updateMs / 1000 },
          }),
        )
      : undefined;
    const dump = args.indexOf('--dump');
    if (dump >= 0)
      writeFileSync(
        path.join(args[dump + 1]!, `${name}.json`),
        JSON.stringify({
          variant: v.name,
          bound: boundOf(v),
          groups: rec.replayGroups(N),
          handovers_s: handoverAt,
          oracle_handovers_s: oracle.handover_s,
          replay_handovers_s: replay?.handover_s ?? [],
        }) + '\n',
      );
    const toks = rec.tokens();
    const durs = [...rec.rollouts.values()].filter((r) => r.ok).map((r) => r.duration_s);
    const perJob = (x: number): number => (life.jobs > 0 ? (x / life.jobs) * 1000 : 0);
    return {
      variant: v.name,
      informative_groups_per_s: groupsPerS,
      oracle_groups_per_s: oracle.informative_groups_per_s,
      vs_oracle: groupsPerS / oracle.informative_groups_per_s,
      replay_vs_oracle: replay ? replay.informative_groups_per_s / oracle.informative_groups_per_s : Number.NaN,
      replay_delays_vs_oracle: delayed ? delayed.informative_groups_per_s / oracle.informative_groups_per_s : Number.NaN,
      step_time_s: wall / STEPS,
      server_run_utilization: serverUtil,
      oracle_utilization: oracle.utilization,
      oracle_waste_fraction: oracle.waste_fraction,
      ...rest,
      rollouts_per_s: toks.length / wall,
      cpu_bench: (cpu.user + cpu.system) / 1e6 / wall,
      cpu_sims: simCpu / wall,
      load_avg_1m: Math.max(load0, loadavg()[0]!),
      tokens_p50: percentile(toks, 50),
      tokens_p90: percentile(toks, 90),
      tokens_p99: percentile(toks, 99),
      tokens_max: percentile(toks, 100),
      rollout_s_p50: percentile(durs, 50),
      rollout_s_max: percentile(durs, 100),
      job_life_ms: perJob(life.life_s),
      job_queued_ms: perJob(life.queued_s),
      job_init_eval_ms: perJob(life.init_eval_s),
      job_transit_ms: perJob(life.transit_s),
      update_ms: updateMs,
      wall_s: wall,
    };
  } finally {
    sampler.stop();
    await c?.close();
    await server.close();
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

interface Summary {
  median: Measured;
  min: Measured;
  max: Measured;
  runs: Measured[];
}

async function runSet(title: string, variants: Variant[], dataset: string): Promise<Summary[]> {
  const runs = new Map<string, Measured[]>(variants.map((v) => [v.name, []]));
  for (let rep = 0; rep < REPS; rep++) {
    const order = variants.map((_, i) => variants[(i + rep) % variants.length]!);
    for (const v of order) {
      const m = await runOnce(v, dataset, `${title}-${variants.indexOf(v)}-${rep}`);
      process.stderr.write(
        `  ${v.name} | rep ${rep}: ${m.informative_groups_per_s.toFixed(2)} groups/s = ${(m.vs_oracle * 100).toFixed(0)}% of oracle ${m.oracle_groups_per_s.toFixed(2)} (policy replay ${(m.replay_vs_oracle * 100).toFixed(0)}%, with this run's delays ${(m.replay_delays_vs_oracle * 100).toFixed(0)}%); server RUN util ${(m.server_run_utilization * 100).toFixed(0)}% (coordinator ${(m.coordinator_utilization * 100).toFixed(0)}%, oracle ${(m.oracle_utilization * 100).toFixed(0)}%); waste ${(m.waste_fraction * 100).toFixed(1)}% (oracle ${(m.oracle_waste_fraction * 100).toFixed(1)}%); per job ${m.job_life_ms.toFixed(0)} ms of which queued ${m.job_queued_ms.toFixed(0)}, init+eval ${m.job_init_eval_ms.toFixed(0)}, transit ${m.job_transit_ms.toFixed(0)}; weight update ${m.update_ms.toFixed(0)} ms; CPU bench ${(m.cpu_bench * 100).toFixed(0)}% sims ${(m.cpu_sims * 100).toFixed(0)}% of a core; load ${m.load_avg_1m.toFixed(1)}; ${m.wall_s.toFixed(1)} s\n`,
      );
      runs.get(v.name)!.push(m);
    }
  }
  return variants.map((v) => {
    const ms = runs.get(v.name)!;
    const agg = (f: (xs: number[]) => number): Measured => {
      const out = { ...ms[0]! };
      for (const k of Object.keys(out) as Array<keyof Measured>)
        if (k !== 'variant') (out as unknown as Record<string, number>)[k] = f(ms.map((m) => m[k] as number));
      return out;
    };
    return { median: agg(median), min: agg((xs) => Math.min(...xs)), max: agg((xs) => Math.max(...xs)), runs: ms };
  });
}

const pct = (x: number): string => `${(x * 100).toFixed(0)}%`;
const range = (s: Summary, k: keyof Measured, f: (x: number) => string): string =>
  s.runs.length > 1 ? `${f(s.median[k] as number)} (${f(s.min[k] as number)}–${f(s.max[k] as number)})` : f(s.median[k] as number);

function table(rows: Summary[], sync: Summary | undefined, over: Summary | undefined): string {
  const head =
    "| variant | informative groups/s | × plain sync | × oversampling sync | oracle groups/s | ÷ oracle | policy replay ÷ oracle (with the run's delays) | server RUN util | coordinator util | waste | oracle waste | staleness mean/max | rollouts/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|";
  const x = (r: Summary, base: Summary | undefined): string =>
    base ? (r.median.informative_groups_per_s / base.median.informative_groups_per_s).toFixed(2) : '–';
  const body = rows.map(
    (r) =>
      `| ${r.median.variant} | ${range(r, 'informative_groups_per_s', (v) => v.toFixed(2))} | ${x(r, sync)} | ${x(r, over)} | ${r.median.oracle_groups_per_s.toFixed(2)} | ${range(r, 'vs_oracle', (v) => v.toFixed(2))} | ${Number.isNaN(r.median.replay_vs_oracle) ? '–' : `${r.median.replay_vs_oracle.toFixed(2)} (${r.median.replay_delays_vs_oracle.toFixed(2)})`} | ${range(r, 'server_run_utilization', pct)} | ${pct(r.median.coordinator_utilization)} | ${range(r, 'waste_fraction', (v) => `${(v * 100).toFixed(1)}%`)} | ${range(r, 'oracle_waste_fraction', (v) => `${(v * 100).toFixed(1)}%`)} | ${r.median.staleness_mean.toFixed(2)}/${r.median.staleness_max} | ${r.median.rollouts_per_s.toFixed(1)} |`,
  );
  return [head, ...body].join('\n');
}

async function tools(): Promise<void> {
  const dataset = path.resolve(here, '../configs/data/code.jsonl');
  process.stderr.write(`bench:dapo --tools: code tasks in bwrap sandboxes, ${STEPS} steps, n=${N}, batch_size=${B}, ${REPS} rep(s)\n`);
  const rows = await runSet('tools', TOOLS, dataset);
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(
    path.join(here, 'results', 'dapo-tools.json'),
    JSON.stringify(
      { bench: 'dapo --tools', date: new Date().toISOString(), steps: STEPS, n: N, batch_size: B, reps: REPS, rows },
      null,
      2,
    ) + '\n',
  );
  process.stdout.write(`\nTable 3 shape: efficient bash\n${table(rows, undefined, undefined)}\n`);
}

async function main(): Promise<void> {
  if (args.includes('--tools')) return tools();
  const dataset = writeDataset();
  const started = performance.now();
  const load0 = loadavg();
  process.stderr.write(
    `bench:dapo: ${STEPS} steps, n=${N}, batch_size=${B}, ${RUN_WORKERS} RUN workers, 2 simulated backends (decode ${LATENCY.decode_ms_per_token} ms/token), train ${TRAIN_MS} ms/step, turns lognormal median ${FILLER.median_tokens} σ=${FILLER.sigma} cap ${TURN_CAP}, ${REPS} rep(s), ${cpus().length} cores, load average ${load0.map((l) => l.toFixed(2)).join(' ')}\n`,
  );
  const only = args.indexOf('--only');
  if (only >= 0) {
    // A diagnostic: the variants whose name contains the given text, no ratios.
    const rows = await runSet(
      'only',
      MODES.filter((v) => v.name.includes(args[only + 1] ?? '')),
      dataset,
    );
    process.stdout.write(`\n${table(rows, undefined, undefined)}\n`);
    return;
  }
  const modes = await runSet('modes', MODES, dataset);
  const [sync, over, , carry] = modes as [Summary, Summary, Summary, Summary];
  const all = modes.flatMap((m) => m.runs);
  const tokens = {
    p50: median(all.map((m) => m.tokens_p50)),
    p90: median(all.map((m) => m.tokens_p90)),
    p99: median(all.map((m) => m.tokens_p99)),
    max: Math.max(...all.map((m) => m.tokens_max)),
  };
  const cpuBench = Math.max(...all.map((m) => m.cpu_bench));
  const loads = all.map((m) => m.load_avg_1m);
  const c = carry.median;
  const ratios = {
    carry_vs_oracle: c.vs_oracle,
    carry_vs_plain_sync: c.informative_groups_per_s / sync.median.informative_groups_per_s,
    carry_vs_oversampling_sync: c.informative_groups_per_s / over.median.informative_groups_per_s,
    no_carry_vs_plain_sync: modes[2]!.median.informative_groups_per_s / sync.median.informative_groups_per_s,
  };
  const targets = {
    carry_ge_0_95_of_oracle: ratios.carry_vs_oracle >= 0.95,
    carry_ge_3x_plain_sync: ratios.carry_vs_plain_sync >= 3,
    carry_ge_2x_oversampling_sync: ratios.carry_vs_oversampling_sync >= 2,
    server_run_util_ge_90: c.server_run_utilization >= 0.9,
    waste_le_3: c.waste_fraction <= 0.03,
  };
  const saturated = cpuBench > 0.9 || Math.max(...loads) > cpus().length;
  const result = {
    bench: 'dapo',
    date: new Date().toISOString(),
    steps: STEPS,
    n: N,
    batch_size: B,
    gen_batch_size: GEN_BATCH,
    run_workers: RUN_WORKERS,
    train_ms: TRAIN_MS,
    reps: REPS,
    slow: SLOW,
    latency: LATENCY,
    filler: FILLER,
    sampling_params: SAMPLING,
    load_avg_start: load0,
    load_avg_1m_range: [Math.min(...loads), Math.max(...loads)],
    cpu_bench_max: cpuBench,
    saturated,
    rollout_tokens: tokens,
    modes,
    ratios,
    targets,
    duration_s: (performance.now() - started) / 1000,
  };
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(path.join(here, 'results', 'dapo.json'), JSON.stringify(result, null, 2) + '\n');
  writeFileSync(
    path.join(here, 'results', 'dapo.svg'),
    barChartSvg(
      'bench:dapo — DAPO modes (same server, dataset, lengths): ÷ oracle, utilization, waste',
      modes.map((m) => m.median.variant),
      [
        { name: 'measured ÷ oracle', color: '#1f77b4', values: modes.map((m) => m.median.vs_oracle) },
        { name: 'server RUN-worker utilization', color: '#2ca02c', values: modes.map((m) => m.median.server_run_utilization) },
        { name: 'waste fraction', color: '#d62728', values: modes.map((m) => m.median.waste_fraction) },
      ],
    ),
  );
  const yes = (b: boolean): string => (b ? 'met' : 'MISSED');
  process.stdout.write(`\nDAPO modes (medians over ${REPS} rep(s), min–max in parentheses)\n${table(modes, sync, over)}\n\n`);
  process.stdout.write(
    `rollout tokens (median over runs): p50 ${tokens.p50}, p90 ${tokens.p90}, p99 ${tokens.p99}, max ${tokens.max} (p99/p50 ${(tokens.p99 / tokens.p50).toFixed(1)})\n`,
  );
  process.stdout.write(
    `CPU: this process (coordinator + server) up to ${pct(cpuBench)} of a core, simulators ${pct(Math.max(...all.map((m) => m.cpu_sims)))}; load average (1 min) ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)} on ${cpus().length} cores${saturated ? ' — SATURATED: rerun on a quiet machine or with --slow 2' : ''}\n`,
  );
  process.stdout.write(
    `targets: async+carry-over ÷ oracle ${ratios.carry_vs_oracle.toFixed(2)} (${carry.runs.length > 1 ? `${carry.min.vs_oracle.toFixed(2)}–${carry.max.vs_oracle.toFixed(2)}; ` : ''}≥ 0.95: ${yes(targets.carry_ge_0_95_of_oracle)}); × plain sync ${ratios.carry_vs_plain_sync.toFixed(2)} (≥ 3: ${yes(targets.carry_ge_3x_plain_sync)}); × oversampling sync ${ratios.carry_vs_oversampling_sync.toFixed(2)} (≥ 2: ${yes(targets.carry_ge_2x_oversampling_sync)}); server RUN util ${pct(c.server_run_utilization)} (≥ 90%: ${yes(targets.server_run_util_ge_90)}); waste ${(c.waste_fraction * 100).toFixed(1)}% (${carry.runs.length > 1 ? `${(carry.min.waste_fraction * 100).toFixed(1)}–${(carry.max.waste_fraction * 100).toFixed(1)}%; ` : ''}≤ 3%: ${yes(targets.waste_le_3)})\ncommand: npm run bench:dapo -- ${args.join(' ')}\n`,
  );
  process.stdout.write(`bench:dapo took ${result.duration_s.toFixed(0)} s\n`);
}

main()
  .then(stopSims)
  .catch(async (err) => {
    process.stderr.write(`bench:dapo failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    await stopSims();
    process.exit(1);
  });
