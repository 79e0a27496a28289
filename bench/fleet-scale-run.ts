/**
 * One point of `bench:fleet-scale`: the simulated servers (bench/fleet-sim.ts) in child processes,
 * one real Coordinator (DapoCore + RolloutFleet) in this process, a consumer taking `steps` batches.
 * Everything measured here is this process's: CPU, memory, sockets, event-loop delay, and the
 * latencies the coordinator adds (admission, result handling, handover). The first step is the
 * warm-up (it holds the initial admission burst); the window runs from its handover to the last.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createInterface, type Interface } from 'node:readline';
import { writeHeapSnapshot } from 'node:v8';
import { Coordinator } from '../src/dapo/index.js';
import { DapoCore } from '../src/dapo/core.js';
import type { Result } from '../src/protocol/process.js';
import type { SimSpec, SimStats } from './fleet-sim.js';

const here = path.dirname(new URL(import.meta.url).pathname);
const epochMs = (): number => performance.timeOrigin + performance.now();

/** What one scale point is asked to do. */
export interface PointSpec {
  servers: number;
  /** RUN workers per simulated server, and so jobs in flight per server. */
  workers: number;
  n: number;
  /** Target rate of finished jobs (/s): the mean rollout lasts (jobs in flight ÷ rate). */
  rate: number;
  sigma: number;
  steps: number;
  train_ms: number;
  dataset: string;
  seed: number;
  /** Sockets one sim process may hold (its share of the fd limit). */
  sockets_per_sim: number;
  health_interval_ms?: number;
}

/** What one scale point measured. */
export interface PointResult {
  servers: number;
  workers: number;
  capacity: number;
  batch_size: number;
  /** Mean of the coordinator's running jobs over the window. */
  in_flight: number;
  jobs_window: number;
  window_s: number;
  jobs_per_s: number;
  /** Coordinator CPU (user + system) per job that ended in the window, µs. */
  cpu_us_per_job: number;
  /** Share of one core the coordinator used over the window. */
  cpu_share: number;
  rss_base_mb: number;
  rss_peak_mb: number;
  heap_peak_mb: number;
  /** (RSS − RSS before start) ÷ jobs in flight at the RSS peak, and the same for the V8 heap (KB). */
  rss_kb_per_job: number;
  heap_kb_per_job: number;
  fds_peak: number;
  /** Initial burst: admission to the server's receipt, p99 and the time until the last of it arrived. */
  burst_admission_p99_ms: number;
  burst_s: number;
  /** Window: a job's admission to its arrival at a server (ms). */
  admission_p50_ms: number;
  admission_p99_ms: number;
  /** Window: the server's answer to the result entering DapoCore (ms). */
  result_p50_ms: number;
  result_p99_ms: number;
  /** Per step: the last result before the batch entering DapoCore → the consumer holding the batch (ms), and the server's answer of that result → the batch. */
  handover_ms: number[];
  handover_from_answer_ms: number[];
  /** Per measured step: how long updateWeights held admission (registration on every server), ms. */
  update_ms: number[];
  /** Event-loop delay over the window (ms). */
  loop_p99_ms: number;
  loop_max_ms: number;
  /** Busy RUN slots ÷ slots over the window, from the sims. */
  server_util: number;
  cancels: number;
  close_s: number;
  errors: number;
  load_avg: number;
}

interface Sim {
  child: ChildProcess;
  urls: string[];
  lines: Interface;
}

async function startSims(spec: PointSpec, median_s: number): Promise<Sim[]> {
  const perProc = Math.max(1, Math.floor(spec.sockets_per_sim / (spec.workers + 16)));
  const procs = Math.ceil(spec.servers / perProc);
  const sims: Sim[] = [];
  for (let p = 0; p < procs; p++) {
    const count = Math.min(perProc, spec.servers - p * perProc);
    const s: SimSpec = {
      count,
      workers: spec.workers,
      median_s,
      sigma: spec.sigma,
      tokens: { median: 200, sigma: 0.5, max: 2048 },
      seed: spec.seed,
      host: `127.0.${1 + (p >> 8)}.${1 + (p & 255)}`,
    };
    const child = spawn(process.execPath, [...process.execArgv, path.join(here, 'fleet-sim.ts'), JSON.stringify(s)], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout! });
    const first = await new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      child.once('exit', (c) => reject(new Error(`fleet-sim exited with ${c}`)));
    });
    sims.push({ child, lines, urls: (JSON.parse(first) as { urls: string[] }).urls });
  }
  return sims;
}

async function simStats(sims: Sim[]): Promise<SimStats> {
  const all = await Promise.all(
    sims.map(
      (s) =>
        new Promise<SimStats>((resolve) => {
          s.lines.once('line', (l) => resolve(JSON.parse(l) as SimStats));
          s.child.stdin!.write('stats\n');
        }),
    ),
  );
  const out: SimStats = { started: 0, finished: 0, cancelled: 0, attached: 0, busy_s: 0, slots_s: 0, sockets: 0 };
  for (const a of all) for (const k of Object.keys(out) as Array<keyof SimStats>) out[k] += a[k];
  return out;
}

async function stopSims(sims: Sim[]): Promise<void> {
  await Promise.all(
    sims.map(
      (s) =>
        new Promise((r) => {
          if (s.child.exitCode !== null) return r(null);
          s.child.once('exit', r);
          s.child.stdin!.end();
        }),
    ),
  );
}

function fdCount(): number {
  try {
    return readdirSync('/proc/self/fd').length;
  } catch {
    return 0;
  }
}

/** The peak resident set of this process (VmHWM), in bytes. */
function vmHwm(): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Resets VmHWM to the current RSS (Linux clear_refs 5), so each point reads its own peak. */
function resetHwm(): void {
  try {
    writeFileSync('/proc/self/clear_refs', '5');
  } catch {
    // not Linux: the peak is the process's
  }
}

/** The soft limit on open files of this process (Linux), or Infinity. */
export function fdLimit(): number {
  try {
    const m = /Max open files\s+(\d+)/.exec(readFileSync('/proc/self/limits', 'utf8'));
    return m ? Number(m[1]) : Number.POSITIVE_INFINITY;
  } catch {
    return Number.POSITIVE_INFINITY;
  }
}

/** Nearest-rank percentile of a numeric list. */
export function pct(xs: ArrayLike<number>, p: number): number {
  if (xs.length === 0) return Number.NaN;
  const s = Float64Array.from(xs).sort();
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/**
 * Stamps admissions and results on every DapoCore of this process (the bench only; the coordinator
 * code is unchanged). Installed on the prototype because the first admission happens inside start().
 */
class Probe {
  readonly admittedAt = new Map<string, number>();
  burst = true;
  windowOpen = false;
  burstAdmission: number[] = [];
  burstLastArrival = 0;
  firstAdmission = 0;
  admission: number[] = [];
  result: number[] = [];
  lastResultAt = 0;
  lastAnsweredAt = 0;
  ended = 0;
  errors = 0;
  cancels = 0;
  private readonly restore: Array<() => void> = [];

  install(): void {
    const probe = this;
    const proto = DapoCore.prototype;
    const admit = proto.admit;
    const onResult = proto.onResult;
    proto.admit = function (this: DapoCore) {
      const gs = admit.call(this);
      if (gs.length) {
        const t = epochMs();
        if (!probe.firstAdmission) probe.firstAdmission = t;
        for (const g of gs) for (const r of g.requests) probe.admittedAt.set(r.job_id!, t);
      }
      return gs;
    };
    proto.onResult = function (this: DapoCore, jobId: string, r: Result) {
      const now = epochMs();
      const sim = (r as Result & { sim?: { arrived_at: number; answered_at: number } }).sim;
      const at = probe.admittedAt.get(jobId);
      probe.admittedAt.delete(jobId);
      probe.ended++;
      if (r.critical_error === 'cancelled') probe.cancels++;
      else if (r.critical_error !== null) probe.errors++;
      if (sim && at !== undefined) {
        if (probe.burst) {
          probe.burstAdmission.push(sim.arrived_at - at);
          probe.burstLastArrival = Math.max(probe.burstLastArrival, sim.arrived_at);
        } else if (probe.windowOpen) probe.admission.push(sim.arrived_at - at);
      }
      if (sim && probe.windowOpen) probe.result.push(now - sim.answered_at);
      if (sim) probe.lastAnsweredAt = sim.answered_at;
      probe.lastResultAt = now;
      onResult.call(this, jobId, r);
    };
    this.restore.push(() => {
      proto.admit = admit;
      proto.onResult = onResult;
    });
  }

  uninstall(): void {
    for (const f of this.restore.splice(0)) f();
  }
}

/** Runs one scale point. */
export async function runPoint(spec: PointSpec): Promise<PointResult> {
  const capacity = spec.servers * spec.workers;
  // Mean rollout = in flight ÷ rate; lognormal median = mean ÷ e^(σ²/2).
  const median_s = capacity / spec.rate / Math.exp((spec.sigma * spec.sigma) / 2);
  const sims = await startSims(spec, median_s);
  const urls = sims.flatMap((s) => s.urls);
  // A batch is every group in flight: the staleness bound (2 batches) then never holds admission
  // back, the capacity does, so every server stays full.
  const B = Math.max(1, Math.floor(capacity / spec.n));
  global.gc?.();
  resetHwm();
  const base = process.memoryUsage();
  const probe = new Probe();
  probe.install();
  const loop = monitorEventLoopDelay({ resolution: 5 });
  let peak = { heap: base.heapUsed, fds: 0, jobs: 0 };
  // Live memory and open files are read after a full GC at each handover; the CPU this takes is left out of the window.
  let gcCpuUs = 0;
  const liveSample = (): void => {
    const t = process.cpuUsage();
    global.gc?.();
    const m = process.memoryUsage();
    peak.fds = Math.max(peak.fds, fdCount());
    const d = process.cpuUsage(t);
    if (probe.windowOpen) gcCpuUs += d.user + d.system;
    const jobs = core?.runningJobs ?? 0;
    if (m.heapUsed > peak.heap) peak = { ...peak, heap: m.heapUsed, jobs };
  };
  let core: DapoCore | undefined;
  let runningIntegral = 0;
  let runningSpan = 0;
  let lastSample = performance.now();
  const sampler = setInterval(() => {
    const now = performance.now();
    const jobs = core?.runningJobs ?? 0;
    if (probe.windowOpen) {
      runningIntegral += jobs * (now - lastSample);
      runningSpan += now - lastSample;
    }
    lastSample = now;
  }, 250);
  const c = new Coordinator(
    {
      name: `scale${spec.servers}`,
      seed: spec.seed,
      servers: urls.map((url) => ({ url })),
      // One LLM backend per server on its node, as a fleet of GPU nodes has; each weight update
      // places them again (the sims take /add_llm_server and never call the address).
      backends: urls.map((address) => ({ address, api: 'vllm' as const })),
      dataset: { path: spec.dataset },
      n: spec.n,
      batch_size: B,
      steps: spec.steps + 1,
      mode: 'async',
      carry_over: true,
      max_staleness: 1,
      ...(spec.health_interval_ms ? { health_interval_ms: spec.health_interval_ms } : {}),
    },
    { onWarning: (m) => process.stderr.write(`  warning: ${m}\n`) },
  );
  const handover: number[] = [];
  const update: number[] = [];
  const handoverAnswer: number[] = [];
  let cpu0: NodeJS.CpuUsage | undefined;
  let t0 = 0;
  let ended0 = 0;
  let stats0: SimStats | undefined;
  let out: PointResult | undefined;
  try {
    await c.start();
    core = (c as unknown as { core: DapoCore }).core;
    for (let s = 0; s <= spec.steps; s++) {
      const waiting = !core.ready();
      await c.nextBatch();
      const now = epochMs();
      liveSample();
      if (s === 1 && process.env.RAAS_BENCH_HEAPSNAPSHOT)
        process.stderr.write(`  heap snapshot: ${writeHeapSnapshot(process.env.RAAS_BENCH_HEAPSNAPSHOT)}\n`);
      if (s > 0 && waiting) {
        handover.push(now - probe.lastResultAt);
        handoverAnswer.push(now - probe.lastAnsweredAt);
      }
      if (s === 0) {
        // The window opens at the warm-up step's handover.
        probe.burst = false;
        probe.windowOpen = true;
        loop.enable();
        stats0 = await simStats(sims);
        cpu0 = process.cpuUsage();
        t0 = performance.now();
        ended0 = probe.ended;
        lastSample = t0;
      }
      await new Promise((r) => setTimeout(r, spec.train_ms));
      const u0 = performance.now();
      await c.updateWeights({});
      if (s > 0) update.push(performance.now() - u0);
    }
    const cpu = process.cpuUsage(cpu0);
    const cpuUs = cpu.user + cpu.system - gcCpuUs;
    const rssPeak = vmHwm();
    const wall = (performance.now() - t0) / 1000;
    loop.disable();
    probe.windowOpen = false;
    const stats1 = await simStats(sims);
    const jobs = probe.ended - ended0;
    const inFlight = runningSpan > 0 ? runningIntegral / runningSpan : 0;
    const c0 = performance.now();
    await c.close();
    const closeS = (performance.now() - c0) / 1000;
    out = {
      servers: spec.servers,
      workers: spec.workers,
      capacity,
      batch_size: B,
      in_flight: inFlight,
      jobs_window: jobs,
      window_s: wall,
      jobs_per_s: jobs / wall,
      cpu_us_per_job: cpuUs / Math.max(1, jobs),
      cpu_share: cpuUs / 1e6 / wall,
      rss_base_mb: base.rss / 2 ** 20,
      rss_peak_mb: rssPeak / 2 ** 20,
      heap_peak_mb: peak.heap / 2 ** 20,
      rss_kb_per_job: (rssPeak - base.rss) / 1024 / Math.max(1, peak.jobs),
      heap_kb_per_job: (peak.heap - base.heapUsed) / 1024 / Math.max(1, peak.jobs),
      fds_peak: peak.fds,
      burst_admission_p99_ms: pct(probe.burstAdmission, 99),
      burst_s: (probe.burstLastArrival - probe.firstAdmission) / 1000,
      admission_p50_ms: pct(probe.admission, 50),
      admission_p99_ms: pct(probe.admission, 99),
      result_p50_ms: pct(probe.result, 50),
      result_p99_ms: pct(probe.result, 99),
      handover_ms: handover,
      handover_from_answer_ms: handoverAnswer,
      update_ms: update,
      loop_p99_ms: loop.percentile(99) / 1e6,
      loop_max_ms: loop.max / 1e6,
      server_util: (stats1.busy_s - stats0!.busy_s) / Math.max(1e-9, stats1.slots_s - stats0!.slots_s),
      cancels: probe.cancels,
      close_s: closeS,
      errors: probe.errors,
      load_avg: loadavg()[0]!,
    };
  } finally {
    clearInterval(sampler);
    probe.uninstall();
    await c.close().catch(() => {});
    await stopSims(sims);
  }
  return out;
}
