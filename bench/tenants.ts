/**
 * `npm run bench:tenants`: one rollout fleet for two trainers, side by side in one run.
 * Two DAPO coordinators (the engine of `raas train`) with different workloads — team a: n 4, batch 8,
 * one-turn chats; team b: n 8, batch 4, two- and three-turn chats — each with its own model (two
 * simulated vLLM backends per model, in their own process so the servers' CPU work does not slow
 * simulated GPU time), each "training" TRAIN_MS per step before its weight update. Two rollout
 * servers with a tenants section (RUN_WORKERS RUN slots each).
 *   alone:     team a on one server, team b on the other, at the same time (no sharing);
 *   shared:    both on both servers, equal weights (the gain of sharing);
 *   saturated: both on both servers with no training wait, so both always have jobs waiting, at
 *              weights 1:1 and 2:1 (the fairness of the fair queue).
 * Reports, as medians over --reps repetitions (min–max):
 *   - informative groups/s of each team and of both (the makespan of both runs), and the gain of
 *     sharing: both shared ÷ both alone;
 *   - fairness (saturated runs): each tenant's /status on each server is sampled every 100 ms; over
 *     the samples where both tenants have jobs waiting for RUN on that server, the share of its RUN
 *     slots each holds.
 *     Jain's index of the shares over the weights (equal weights: target ≥ 0.95), and team a's share
 *     at 2:1 (target within 5 % of 2/3);
 *   - isolation, counted on the servers: while the shared runs go, each team asks both servers for
 *     the other's job ids (GET /jobs/:id and POST /cancel); leaked reads and effective cancels must
 *     be 0, and every journal line of a tenant must name one of its own backends (0 foreign uses).
 * Writes bench/results/tenants.json. Flags: --quick (2 steps, 1 rep: does it work), --reps N (default 3), --steps N (default 6),
 * --json (a machine-readable line at the end).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Coordinator } from '../src/dapo/index.js';
import { startRolloutServer, type RolloutServer } from '../src/server/index.js';
import type { SimOptions } from '../src/sim/index.js';
import { rng } from '../src/util/hash.js';

const args = process.argv.slice(2);
const flag = (name: string, dflt: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const here = path.dirname(new URL(import.meta.url).pathname);
const quick = args.includes('--quick');
const REPS = flag('--reps', quick ? 1 : 3);
const STEPS = flag('--steps', quick ? 2 : 6);
const RUN_WORKERS = 8;
/**
 * The trainer's step: in asynchronous RL a step takes about as long as generating its batch, and
 * while it runs a coordinator only fills its staleness window, then waits; a shared fleet gives that
 * idle capacity to the other trainer.
 */
const TRAIN_MS = 2500;
const ADMIN = 'bench-admin-token';
const TOKENS = { a: 'bench-team-a-token', b: 'bench-team-b-token' } as const;
const LATENCY = {
  prefill_ms_per_token: 0.05,
  decode_ms_per_token: 2.5,
  overhead_ms: 2,
  concurrency_slowdown: 0.01,
  max_num_seqs: 256,
} satisfies SimOptions['latency'];
const FILLER = { median_tokens: 60, sigma: 0.6, min_tokens: 4, max_tokens: 600 } satisfies SimOptions['filler'];

type Team = 'a' | 'b';
const WORK: Record<Team, { n: number; batch: number; turns: (i: number) => number; model: string }> = {
  a: { n: 4, batch: 8, turns: () => 1, model: 'team-a/Qwen3-8B' },
  b: { n: 8, batch: 4, turns: (i) => 2 + (i % 2), model: 'team-b/Qwen3-1.7B' },
};

/** Chats whose pass rates make about half the groups informative. */
function dataset(dir: string, team: Team): string {
  const r = rng(team === 'a' ? 1 : 2);
  const rows = Array.from({ length: 600 }, (_, i) => {
    const u = r();
    const pass_rate = u < 0.25 ? 0 : u < 0.5 ? 1 : 0.3 + 0.4 * r();
    return JSON.stringify({ data_source: 'chat', instance_id: `${team}${i}`, turns: WORK[team].turns(i), pass_rate });
  });
  const f = path.join(dir, `${team}.jsonl`);
  writeFileSync(f, `${rows.join('\n')}\n`);
  return f;
}

/** Two simulated backends serving one model, in a child process. */
async function simFleet(model: string): Promise<{ child: ChildProcess; urls: string[] }> {
  const spec = { count: 2, options: { model, seed: 3, latency: LATENCY, filler: FILLER, abort_on_weight_update: false } };
  const child = spawn(process.execPath, [...process.execArgv, path.join(here, 'sim-fleet.ts'), JSON.stringify(spec)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (c) => reject(new Error(`sim-fleet exited with ${c}`)));
  });
  return { child, urls: (JSON.parse(line) as { urls: string[] }).urls };
}

function server(dir: string, weights: Record<Team, number>): Promise<RolloutServer> {
  return startRolloutServer({
    port: 0,
    log_level: 'silent',
    token: ADMIN,
    workers: { init: 16, run: RUN_WORKERS, eval: 16 },
    journal: { dir: mkdtempSync(path.join(dir, 'journal-')) },
    tenants: (['a', 'b'] as const).map((t) => ({ name: t, token: TOKENS[t], weight: weights[t] })),
  });
}

interface TeamRun {
  groups: number;
  wall_s: number;
  /** Job ids seen in its batches (the other team probes them). */
  ids: string[];
}

/** One coordinator: STEPS steps, `trainMs` of "training" then a weight update after each. */
async function runTeam(
  team: Team,
  servers: RolloutServer[],
  backends: string[],
  data: string,
  seenIds: string[],
  trainMs = TRAIN_MS,
): Promise<TeamRun> {
  const w = WORK[team];
  const c = new Coordinator(
    {
      name: `bench-${team}`,
      seed: 7,
      servers: servers.map((s) => ({ url: s.url, token: TOKENS[team] })),
      backends,
      dataset: { path: data },
      n: w.n,
      batch_size: w.batch,
      steps: STEPS,
      mode: 'async',
      carry_over: true,
      max_staleness: 1,
      // Four times the RUN slots of the servers it uses: alone, either team keeps both servers busy
      // with jobs waiting (its staleness window, 2 × batch groups, bounds it too).
      max_inflight_jobs: 4 * RUN_WORKERS * servers.length,
      sampling_params: { max_tokens_per_turn: 512 },
    },
    { onWarning: () => {} },
  );
  const t0 = performance.now();
  let groups = 0;
  try {
    for await (const batch of c.batches()) {
      groups += batch.groups.length;
      for (const g of batch.groups) for (const r of g.rollouts) seenIds.push(r.job_id);
      await new Promise((r) => setTimeout(r, trainMs));
      if (batch.step + 1 < STEPS) await c.updateWeights();
    }
  } finally {
    await c.close();
  }
  return { groups, wall_s: (performance.now() - t0) / 1000, ids: seenIds };
}

/**
 * Samples each tenant's /status on each server (its own view: its RUN queue and the RUN slots it
 * holds): over the samples where both tenants have jobs waiting for RUN on that server, the RUN slots
 * each one holds.
 */
class ShareSampler {
  readonly held: Record<Team, number> = { a: 0, b: 0 };
  samples = 0;
  private timer: NodeJS.Timeout | undefined;
  constructor(private readonly urls: string[]) {}
  start(): void {
    this.timer = setInterval(() => void this.sample(), 100);
  }
  stop(): void {
    clearInterval(this.timer);
  }
  private async sample(): Promise<void> {
    for (const url of this.urls) {
      try {
        const [a, b] = await Promise.all(
          (['a', 'b'] as const).map(
            async (t) =>
              (await (await fetch(`${url}/status`, { headers: { authorization: `Bearer ${TOKENS[t]}` } })).json()) as {
                queues: { run: number };
                workers: { run: { busy: number } };
              },
          ),
        );
        if (a!.queues.run > 0 && b!.queues.run > 0) {
          this.held.a += a!.workers.run.busy;
          this.held.b += b!.workers.run.busy;
          this.samples++;
        }
      } catch {
        // a sample lost to a busy moment
      }
    }
  }
}

/** What the other team's lookups of a team's ids got: leaked reads and cancels that took effect. */
class Prober {
  reads = 0;
  cancels = 0;
  probes = 0;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  constructor(
    private readonly urls: string[],
    private readonly ids: Record<Team, string[]>,
  ) {}
  start(): void {
    this.timer = setInterval(() => {
      this.running = this.running.then(() => this.probe()).catch(() => {});
    }, 300);
  }
  /** Stops probing, once the probe under way ended (before the servers close). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
  private async probe(): Promise<void> {
    for (const [asker, owner] of [
      ['a', 'b'],
      ['b', 'a'],
    ] as const) {
      // Ids only the owner has: the two teams' runs are named apart.
      const id = this.ids[owner].at(-1);
      if (!id) continue;
      for (const url of this.urls) {
        const h = { authorization: `Bearer ${TOKENS[asker]}`, 'content-type': 'application/json' };
        this.probes++;
        const get = await fetch(`${url}/jobs/${id}`, { headers: h });
        if (get.status !== 404) this.reads++;
        const c = (await (await fetch(`${url}/cancel`, { method: 'POST', headers: h, body: JSON.stringify({ job_id: id }) })).json()) as {
          cancelled: boolean;
        };
        if (c.cancelled) this.cancels++;
      }
    }
  }
}

/** Journal lines whose tenant's job used a backend of the other tenant. */
function foreignUses(servers: RolloutServer[], own: Record<Team, Set<string>>): number {
  let n = 0;
  for (const s of servers) {
    const f = path.join(s.config.journal.dir!, 'results.jsonl');
    for (const l of readFileSync(f, 'utf8').split('\n').filter(Boolean)) {
      const e = JSON.parse(l) as { tenant: Team; result: { backend: string | null } };
      if (e.result.backend && !own[e.tenant].has(e.result.backend)) n++;
    }
  }
  return n;
}

interface Rep {
  alone: Record<Team | 'both', number>;
  equal: Record<Team | 'both', number>;
  busyEqual: Record<Team | 'both', number>;
  weighted: Record<Team | 'both', number>;
  gain: number;
  jain: number;
  share_a_equal: number;
  share_a_2to1: number;
  share_a_trainers: number;
  samples: number;
  reads: number;
  cancels: number;
  probes: number;
  foreign_backend_uses: number;
  load_avg_1m: number;
}

const rate = (r: TeamRun): number => r.groups / r.wall_s;
const both = (a: TeamRun, b: TeamRun): number => (a.groups + b.groups) / Math.max(a.wall_s, b.wall_s);

async function oneRep(dir: string, sims: Record<Team, string[]>, data: Record<Team, string>): Promise<Rep> {
  const load0 = loadavg()[0]!;
  const own = { a: new Set(sims.a), b: new Set(sims.b) };
  // Alone: one server each, at the same time.
  let s = [await server(dir, { a: 1, b: 1 }), await server(dir, { a: 1, b: 1 })];
  const [aa, ba] = await Promise.all([runTeam('a', [s[0]!], sims.a, data.a, []), runTeam('b', [s[1]!], sims.b, data.b, [])]);
  await Promise.all(s.map((x) => x.close()));
  // Shared, with the probes, the share sampler and the journal check.
  const shared = async (weights: Record<Team, number>, trainMs: number) => {
    s = [await server(dir, weights), await server(dir, weights)];
    const sampler = new ShareSampler(s.map((x) => x.url));
    const ids = { a: [] as string[], b: [] as string[] };
    const prober = new Prober(
      s.map((x) => x.url),
      ids,
    );
    sampler.start();
    prober.start();
    const [a, b] = await Promise.all([runTeam('a', s, sims.a, data.a, ids.a, trainMs), runTeam('b', s, sims.b, data.b, ids.b, trainMs)]);
    sampler.stop();
    await prober.stop();
    const foreign = foreignUses(s, own);
    await Promise.all(s.map((x) => x.close()));
    const share = sampler.held.a / (sampler.held.a + sampler.held.b);
    return { a, b, share, samples: sampler.samples, prober, foreign };
  };
  // The gain of sharing: both trainers as they run (training between steps), on both servers.
  const tr = await shared({ a: 1, b: 1 }, TRAIN_MS);
  // The weights: both saturate the fleet (no training wait), so each has jobs waiting all along; a
  // bursty trainer that comes back finds its slots held by the other's running jobs, which the
  // fair queue does not take back, and that transient is not what the weights promise.
  const eq = await shared({ a: 1, b: 1 }, 0);
  const wt = await shared({ a: 2, b: 1 }, 0);
  // Jain's index of the allocations over their fair shares (equal weights: 0.5 each).
  const x = [eq.share / 0.5, (1 - eq.share) / 0.5];
  const jain = (x[0]! + x[1]!) ** 2 / (2 * (x[0]! ** 2 + x[1]! ** 2));
  const runs = [tr, eq, wt];
  return {
    alone: { a: rate(aa), b: rate(ba), both: both(aa, ba) },
    equal: { a: rate(tr.a), b: rate(tr.b), both: both(tr.a, tr.b) },
    busyEqual: { a: rate(eq.a), b: rate(eq.b), both: both(eq.a, eq.b) },
    weighted: { a: rate(wt.a), b: rate(wt.b), both: both(wt.a, wt.b) },
    gain: both(tr.a, tr.b) / both(aa, ba),
    jain,
    share_a_equal: eq.share,
    share_a_2to1: wt.share,
    share_a_trainers: tr.share,
    samples: eq.samples + wt.samples,
    reads: runs.reduce((n, r) => n + r.prober.reads, 0),
    cancels: runs.reduce((n, r) => n + r.prober.cancels, 0),
    probes: runs.reduce((n, r) => n + r.prober.probes, 0),
    foreign_backend_uses: runs.reduce((n, r) => n + r.foreign, 0),
    load_avg_1m: Math.max(load0, loadavg()[0]!),
  };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((p, q) => p - q);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'raas-bench-tenants-'));
  const fleets = await Promise.all([simFleet(WORK.a.model), simFleet(WORK.b.model)]);
  const sims = { a: fleets[0].urls, b: fleets[1].urls };
  const data = { a: dataset(dir, 'a'), b: dataset(dir, 'b') };
  const reps: Rep[] = [];
  try {
    for (let i = 0; i < REPS; i++) {
      reps.push(await oneRep(dir, sims, data));
      process.stderr.write(`bench:tenants: rep ${i + 1}/${REPS} done\n`);
    }
  } finally {
    for (const f of fleets) f.child.stdin!.end();
    await Promise.all(fleets.map((f) => new Promise((r) => (f.child.exitCode !== null ? r(null) : f.child.once('exit', r)))));
    rmSync(dir, { recursive: true, force: true });
  }
  const m = (f: (r: Rep) => number, d = 2): string => {
    const xs = reps.map(f);
    const v = median(xs).toFixed(d);
    return xs.length > 1 ? `${v} (${Math.min(...xs).toFixed(d)}–${Math.max(...xs).toFixed(d)})` : v;
  };
  const sum = (f: (r: Rep) => number): number => reps.reduce((n, r) => n + f(r), 0);
  const out = [
    `bench:tenants — ${REPS} rep(s), ${STEPS} steps per team, 2 servers × ${RUN_WORKERS} RUN slots, ${cpus().length} cores, load avg (1 min) ${m((r) => r.load_avg_1m, 1)}`,
    `command: npm run bench:tenants${args.length ? ` -- ${args.join(' ')}` : ''}`,
    '',
    '| informative groups/s | team a (n 4, batch 8, 1 turn) | team b (n 8, batch 4, 2–3 turns) | both |',
    '|---|---|---|---|',
    `| alone, one server each (${TRAIN_MS / 1000} s of training per step) | ${m((r) => r.alone.a)} | ${m((r) => r.alone.b)} | ${m((r) => r.alone.both)} |`,
    `| shared two servers, weights 1:1 (same training) | ${m((r) => r.equal.a)} | ${m((r) => r.equal.b)} | ${m((r) => r.equal.both)} |`,
    `| shared, saturated (no training wait), weights 1:1 | ${m((r) => r.busyEqual.a)} | ${m((r) => r.busyEqual.b)} | ${m((r) => r.busyEqual.both)} |`,
    `| shared, saturated, weights 2:1 | ${m((r) => r.weighted.a)} | ${m((r) => r.weighted.b)} | ${m((r) => r.weighted.both)} |`,
    '',
    '| figure | measured | target |',
    '|---|---|---|',
    `| gain of sharing (both shared 1:1 ÷ both alone) | ${m((r) => r.gain)} | > 1 |`,
    `| Jain's index, weights 1:1, saturated (shares of RUN slots while both wait for RUN) | ${m((r) => r.jain, 3)} | ≥ 0.95 |`,
    `| team a's share at 1:1, saturated | ${m((r) => r.share_a_equal, 3)} | 0.500 |`,
    `| team a's share at 2:1, saturated | ${m((r) => r.share_a_2to1, 3)} (${m((r) => ((r.share_a_2to1 - 2 / 3) / (2 / 3)) * 100, 1)} %) | 0.667 ± 5 % |`,
    `| team a's share at 1:1 between training steps (bursty: it finds slots taken) | ${m((r) => r.share_a_trainers, 3)} | |`,
    `| cross-tenant reads / effective cancels (of ${sum((r) => r.probes)} probes) | ${sum((r) => r.reads)} / ${sum((r) => r.cancels)} | 0 / 0 |`,
    `| journal lines naming another tenant's backend | ${sum((r) => r.foreign_backend_uses)} | 0 |`,
    `| fairness samples (both tenants waiting for RUN) | ${sum((r) => r.samples)} | |`,
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(path.join(here, 'results', 'tenants.json'), `${JSON.stringify({ args, table: out, reps }, null, 1)}\n`);
  if (args.includes('--json')) process.stdout.write(`${JSON.stringify({ reps })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:tenants: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
