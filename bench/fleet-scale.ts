/**
 * `npm run bench:fleet-scale`: one real coordinator (DapoCore + RolloutFleet, async + carry-over,
 * η = 1) against 8 → 64 → 1,024 simulated rollout servers (bench/fleet-sim.ts: real HTTP on
 * loopback, held /process answers, /cancel, /jobs/:id, /status; 64 RUN slots each; lognormal
 * rollout durations), in child processes so this process's CPU and memory are the coordinator's.
 * Every point runs at the same rate of finished jobs (--rate), so the mean rollout lasts
 * (jobs in flight ÷ rate): what grows with the fleet is the number of servers and of jobs in flight,
 * not the work per second. A batch is every group in flight (batch_size = servers × workers ÷ n).
 *
 * Reports per point (medians over --reps, min–max): coordinator CPU per job and × the smallest
 * point (target ≤ 1.2 at 1,024), RSS and heap per job in flight (target: flat, memory linear in jobs
 * in flight), admission and result latency p50/p99, handover latency p99, event-loop delay, server
 * slot utilization, sockets. Writes bench/results/fleet-scale.json.
 *
 * Each held /process answer is one socket here and one in a sim: 1,024 × 64 held answers need
 * `ulimit -n` above 66,000 for this process. When the limit is lower the bench lowers the jobs per
 * server of the points that do not fit (and says so), rather than failing.
 *
 * Then DapoCore alone (bench/fleet-scale-core.ts) at the same jobs in flight, without HTTP: the
 * figure that stays exact on a loaded machine.
 *
 * Flags: --servers 8,64,1024  --workers 64  --rate 500 (jobs/s)  --steps 3 (measured, after one
 * warm-up)  --sigma 0.8  --n 8  --reps 1  --train-ms 300  --health-ms N  --quick (8,64; 2 steps)
 * --core-only (the DapoCore table only).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { rng } from '../src/util/hash.js';
import { runCore } from './fleet-scale-core.js';
import { fdLimit, runPoint, type PointResult } from './fleet-scale-run.js';

const args = process.argv.slice(2);
const opt = (name: string, dflt: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1]! : dflt;
};
const quick = args.includes('--quick');
const SERVERS = opt('--servers', quick ? '8,64' : '8,64,1024')
  .split(',')
  .map(Number);
const WORKERS = Number(opt('--workers', '64'));
const RATE = Number(opt('--rate', '500'));
const STEPS = Number(opt('--steps', quick ? '2' : '3'));
const SIGMA = Number(opt('--sigma', '0.8'));
const N = Number(opt('--n', '8'));
const REPS = Number(opt('--reps', '1'));
const TRAIN_MS = Number(opt('--train-ms', '300'));
const HEALTH_MS = args.includes('--health-ms') ? Number(opt('--health-ms', '2000')) : undefined;
const SEED = 7;
const here = path.dirname(new URL(import.meta.url).pathname);

/** A quarter of the prompts never and a quarter always pass: about half the groups of 8 are zero-variance... no: 1/8 each, the rest mixed. */
function writeDataset(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'raas-bench-fleet-'));
  const r = rng(SEED);
  const rows = Array.from({ length: 4000 }, (_, i) => {
    const u = r();
    const pass_rate = u < 0.125 ? 0 : u < 0.25 ? 1 : 0.2 + 0.6 * r();
    return JSON.stringify({ data_source: 'chat', instance_id: `f${i}`, turns: 1, pass_rate });
  });
  const file = path.join(dir, 'prompts.jsonl');
  writeFileSync(file, `${rows.join('\n')}\n`);
  return file;
}

/** Sockets per process we leave for everything but held answers and cancels. */
const RESERVE = 512;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

/**
 * DapoCore alone at each point's jobs in flight (exact even on a loaded machine, never bound by
 * file descriptors); run after the HTTP points, whose RSS baselines its heap would blur.
 */
function coreTable(): Array<{ servers: number; in_flight: number; us_per_job: number }> {
  runCore(SERVERS[0]! * WORKERS, N, 3, SEED - 1); // warm-up: the JIT, not the first point, pays for compiling
  const core = SERVERS.map((servers) => {
    const runs = Array.from({ length: Math.max(3, REPS) }, (_, rep) => runCore(servers * WORKERS, N, 3, SEED + rep));
    return { servers, in_flight: servers * WORKERS, us_per_job: median(runs.map((r) => r.us_per_job)), runs };
  });
  const coreRatio = core[core.length - 1]!.us_per_job / core[0]!.us_per_job;
  process.stdout.write(
    `DapoCore alone (no HTTP; admission, acceptance, handover, carry-over; median of ${core[0]!.runs.length} runs):\n| servers × slots | jobs in flight | CPU µs/job | × ${core[0]!.servers} servers |\n|---|---|---|---|\n${core.map((c) => `| ${c.servers} × ${WORKERS} | ${c.in_flight} | ${c.us_per_job.toFixed(1)} | ${(c.us_per_job / core[0]!.us_per_job).toFixed(2)} |`).join('\n')}\ntarget ≤ 1.2: ${coreRatio.toFixed(2)} (${coreRatio <= 1.2 ? 'met' : 'MISSED'})\n\n`,
  );
  return core.map(({ servers, in_flight, us_per_job }) => ({ servers, in_flight, us_per_job }));
}

async function main(): Promise<void> {
  const limit = fdLimit();
  const dataset = writeDataset();
  const load0 = loadavg();
  const cmd = `npm run bench:fleet-scale -- ${args.join(' ')}`.trim();
  process.stderr.write(
    `bench:fleet-scale: servers ${SERVERS.join(' → ')}, ${WORKERS} RUN slots each, n=${N}, ${RATE} jobs/s, σ=${SIGMA}, ${STEPS} measured steps, ${REPS} rep(s); ulimit -n ${limit}; ${cpus().length} cores, load average ${load0.map((l) => l.toFixed(2)).join(' ')}\n  ${cmd}\n`,
  );
  if (args.includes('--core-only')) return void coreTable();
  const points: Array<{ servers: number; workers: number; fd_bound: boolean; runs: PointResult[] }> = [];
  for (const servers of SERVERS) {
    // One socket per held answer, plus a few per server for cancels and health checks.
    const fit = Math.floor((limit - RESERVE - 4 * servers) / servers);
    const workers = Math.max(1, Math.min(WORKERS, fit));
    if (workers < WORKERS)
      process.stderr.write(
        `  ${servers} servers × ${WORKERS} held answers need ulimit -n ≥ ${servers * (WORKERS + 4) + RESERVE} (have ${limit}): running ${workers} per server (${servers * workers} in flight)\n`,
      );
    const runs: PointResult[] = [];
    for (let rep = 0; rep < REPS; rep++) {
      const r = await runPoint({
        servers,
        workers,
        n: N,
        rate: RATE,
        sigma: SIGMA,
        steps: STEPS,
        train_ms: TRAIN_MS,
        dataset,
        seed: SEED + rep,
        sockets_per_sim: Math.min(16_000, limit - RESERVE),
        ...(HEALTH_MS ? { health_interval_ms: HEALTH_MS } : {}),
      });
      process.stderr.write(
        `  ${servers} servers × ${workers}: ${r.in_flight.toFixed(0)} in flight, ${r.jobs_window} jobs in ${r.window_s.toFixed(1)} s (${r.jobs_per_s.toFixed(0)}/s); CPU ${r.cpu_us_per_job.toFixed(0)} µs/job (${(r.cpu_share * 100).toFixed(0)}% of a core); RSS ${r.rss_peak_mb.toFixed(0)} MB (${r.rss_kb_per_job.toFixed(1)} KB/job), heap ${r.heap_peak_mb.toFixed(0)} MB (${r.heap_kb_per_job.toFixed(1)} KB/job); fds ${r.fds_peak}; admission p50/p99 ${r.admission_p50_ms.toFixed(1)}/${r.admission_p99_ms.toFixed(1)} ms (burst p99 ${r.burst_admission_p99_ms.toFixed(0)} ms, ${r.burst_s.toFixed(1)} s); result p50/p99 ${r.result_p50_ms.toFixed(1)}/${r.result_p99_ms.toFixed(1)} ms; handover ${r.handover_ms.map((x) => x.toFixed(1)).join('/')} ms; weight update ${r.update_ms.map((x) => x.toFixed(0)).join('/')} ms; loop p99 ${r.loop_p99_ms.toFixed(1)} max ${r.loop_max_ms.toFixed(0)} ms; server util ${(r.server_util * 100).toFixed(1)}%; cancels ${r.cancels}, errors ${r.errors}; close ${r.close_s.toFixed(1)} s; load ${r.load_avg.toFixed(1)}\n`,
      );
      runs.push(r);
    }
    points.push({ servers, workers, fd_bound: workers < WORKERS, runs });
  }
  // After the HTTP points: the core runs grow this process's heap, which would blur their RSS baselines.
  const core = coreTable();
  const summary = points.map((p) => {
    const m = (f: (r: PointResult) => number): { median: number; min: number; max: number } => {
      const xs = p.runs.map(f);
      return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
    };
    return {
      servers: p.servers,
      workers: p.workers,
      fd_bound: p.fd_bound,
      in_flight: m((r) => r.in_flight),
      cpu_us_per_job: m((r) => r.cpu_us_per_job),
      rss_kb_per_job: m((r) => r.rss_kb_per_job),
      heap_kb_per_job: m((r) => r.heap_kb_per_job),
      rss_peak_mb: m((r) => r.rss_peak_mb),
      admission_p99_ms: m((r) => r.admission_p99_ms),
      result_p99_ms: m((r) => r.result_p99_ms),
      handover_p99_ms: m((r) => (r.handover_ms.length ? Math.max(...r.handover_ms) : Number.NaN)),
      update_ms: m((r) => (r.update_ms.length ? Math.max(...r.update_ms) : Number.NaN)),
      loop_p99_ms: m((r) => r.loop_p99_ms),
      server_util: m((r) => r.server_util),
      load_avg: m((r) => r.load_avg),
    };
  });
  const base = summary[0]!;
  const fmt = (x: { median: number; min: number; max: number }, d = 0): string =>
    REPS > 1 ? `${x.median.toFixed(d)} (${x.min.toFixed(d)}–${x.max.toFixed(d)})` : x.median.toFixed(d);
  const rows = summary.map(
    (s) =>
      `| ${s.servers} × ${s.workers}${s.fd_bound ? ' (fd-bound)' : ''} | ${s.in_flight.median.toFixed(0)} | ${fmt(s.cpu_us_per_job)} | ${(s.cpu_us_per_job.median / base.cpu_us_per_job.median).toFixed(2)} | ${fmt(s.rss_kb_per_job, 1)} | ${fmt(s.heap_kb_per_job, 1)} | ${s.rss_peak_mb.median.toFixed(0)} | ${fmt(s.admission_p99_ms, 1)} | ${fmt(s.result_p99_ms, 1)} | ${fmt(s.handover_p99_ms, 1)} | ${fmt(s.update_ms)} | ${fmt(s.loop_p99_ms, 1)} | ${(s.server_util.median * 100).toFixed(1)}% | ${s.load_avg.median.toFixed(1)} |`,
  );
  const last = summary[summary.length - 1]!;
  const ratio = last.cpu_us_per_job.median / base.cpu_us_per_job.median;
  process.stdout.write(
    `\n| servers × slots | jobs in flight | CPU µs/job | × ${base.servers} servers | RSS KB/job in flight | heap KB/job | RSS MB | admission p99 ms | result p99 ms | handover max ms | weight update max ms | loop delay p99 ms | server util | load |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n${rows.join('\n')}\n\n` +
      `target: CPU per job at ${last.servers} servers ≤ 1.2 × ${base.servers} servers: ${ratio.toFixed(2)} (${ratio <= 1.2 ? 'met' : 'MISSED'}); memory linear in jobs in flight: RSS ${summary.map((s) => s.rss_kb_per_job.median.toFixed(1)).join(' → ')} KB/job\n` +
      `command: ${cmd}; ulimit -n ${limit}; load average at start ${load0.map((l) => l.toFixed(2)).join(' ')}\n`,
  );
  mkdirSync(path.join(here, 'results'), { recursive: true });
  writeFileSync(
    path.join(here, 'results', 'fleet-scale.json'),
    `${JSON.stringify({ bench: 'fleet-scale', date: new Date().toISOString(), command: cmd, ulimit_n: limit, load_avg_start: load0, core, summary, points }, null, 2)}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:fleet-scale failed: ${err instanceof Error ? err.stack : String(err)}\n`);
  process.exit(1);
});
