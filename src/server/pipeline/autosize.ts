import type { AutosizeConfig, StageSize } from '../../protocol/config-workers.js';
import type { Clock } from '../../util/clock.js';
import type { Logger } from '../../util/logger.js';
import type { HostLoad, HostSampler } from './host-load.js';
import { STAGES, type Stage } from './job.js';
import type { StageLimiter } from './limiter.js';
import { type Sizing, sizingOf } from './sizing.js';
import { ServiceTimes } from './service-times.js';

/** Cores in use past this fraction of the CPU budget count as the budget used (a saturated host never reads exactly 100 %). */
const CPU_FULL = 0.9;

/** What one sizing decision looks at for one stage. */
export interface StageSignal {
  size: number;
  min: number;
  max: number;
  /** Where the stage started (the static default within its bounds): idle slots are given back down to it, not below. */
  start: number;
  /** Jobs waiting for the stage now. */
  queued: number;
  /** The most slots busy at once since the previous decision. */
  peakBusy: number;
  /** Jobs that came to the stage per second over the interval (granted, plus the growth of its queue). */
  arrivalsPerS: number;
  /** The stage's recent mean service time (s). */
  serviceS: number;
  /**
   * tolerance × (service time at low concurrency) / (service time now), per handler, in [0.5, 1]:
   * below 1 the stage's jobs slow each other down more than the tolerance allows.
   */
  gradient: number;
  /** Fraction of the size one decision may grow it, and shrink it (each at least one slot). */
  maxStep: number;
  shrinkStep: number;
  /** The largest size this stage wanted over the stabilization window: it shrinks no further than that. */
  recentHigh: number;
  /** This server's processes keep its CPU budget busy, or its event loop is saturated. */
  cpuOver: boolean;
  /** The host's memory in use: within the budget, at it (`full`), or over it by 10 % (`over`). */
  memory: 'ok' | 'full' | 'over';
}

/**
 * One stage's next size, the size it wants, and why. The slots the load needs are Little's law's:
 * arrivals per second × service time, with a quarter more as headroom. A queue grows the stage to
 * absorb what waits (and at least to that need) while the CPU and memory budgets allow. With the
 * CPU budget used, a stage whose jobs slow each other down past the tolerance shrinks in proportion
 * (more slots would only share the same cores); memory over budget by 10 % shrinks every auto stage
 * a step. Without a queue, slots beyond the need and 1.5 × the busiest moment are given back, down
 * to where the stage started — but no lower than the most it wanted over the stabilization window
 * (the budgets excepted). Growth is at most `maxStep`, shrinking at most `shrinkStep` of the size per
 * decision, within the bounds; a smaller size never takes a running job's slot, it only grants none
 * until enough are released.
 */
export function decide(s: StageSignal): { size: number; wanted: number; reason: string } {
  const up = Math.max(1, Math.floor(s.maxStep * s.size));
  const down = Math.max(1, Math.floor(s.shrinkStep * s.size));
  const clamp = (n: number): number => Math.min(s.max, Math.max(s.min, Math.max(s.size - down, Math.min(s.size + up, n))));
  const need = Math.ceil(s.arrivalsPerS * s.serviceS * 1.25);
  let target = s.size;
  let reason = 'steady';
  let forced = false;
  if (s.memory === 'over') [target, reason, forced] = [s.size - down, 'memory over budget', true];
  else if (s.cpuOver && s.gradient < 1)
    [target, reason, forced] = [
      Math.floor(s.size * s.gradient),
      `CPU budget used and jobs slow each other down (gradient ${s.gradient.toFixed(2)})`,
      true,
    ];
  else if (s.queued > 0) {
    if (s.cpuOver) reason = 'queue, but the CPU budget is used';
    else if (s.memory === 'full') reason = 'queue, but the memory budget is used';
    else [target, reason] = [Math.max(s.size + s.queued, need), 'queue'];
  } else {
    const keep = Math.max(s.start, need, Math.ceil(s.peakBusy * 1.5));
    if (keep < s.size) [target, reason] = [keep, 'idle slots'];
  }
  const wanted = target;
  // A wish to shrink waits out the window: the stage keeps what it wanted lately (budgets excepted).
  if (!forced && target < s.size) {
    target = Math.min(s.size, Math.max(target, s.recentHigh));
    if (target === s.size) reason = 'idle slots, kept for the stabilization window';
  }
  const size = clamp(target);
  if (size === s.size && target !== s.size && reason !== 'steady') reason += ' (at a bound)';
  return { size, wanted, reason };
}

/** The sizes the autosizer keeps, for /status. */
export interface AutoState {
  mode: 'auto';
  min: number;
  max: number;
  reason: string;
}

/**
 * Sizes the `auto` stage pools (`workers: auto`): every `autosize.interval_s` it reads each
 * stage's queue, its busiest moment, how its service time (per handler) at the concurrency reached
 * compares with low concurrency, and the host's CPU and memory, and resizes the stage's limiter
 * (decide()). Fixed stages are left alone; `set()` changes a stage's sizing at run time.
 */
export class Autosizer {
  private readonly sizing: Record<Stage, Sizing>;
  private readonly times: Record<Stage, ServiceTimes>;
  private readonly peak: Record<Stage, number> = { init: 0, run: 0, eval: 0 };
  /** Grants since the previous decision, the queue then, and the mean service time (ms). */
  private readonly granted: Record<Stage, number> = { init: 0, run: 0, eval: 0 };
  private readonly queuedBefore: Record<Stage, number> = { init: 0, run: 0, eval: 0 };
  private readonly meanMs: Record<Stage, number> = { init: 0, run: 0, eval: 0 };
  /** What each stage wanted at each decision of the stabilization window: [time, size]. */
  private readonly wishes: Record<Stage, Array<[number, number]>> = { init: [], run: [], eval: [] };
  private lastTick: number;
  private readonly reasons: Record<Stage, string> = { init: 'start', run: 'start', eval: 'start' };
  private timer: unknown;
  private closed = false;
  /** The last host sample (for /status and tests). */
  lastHost: HostLoad | undefined;

  constructor(
    private readonly pools: Record<Stage, StageLimiter>,
    workers: Record<Stage, StageSize>,
    private readonly cfg: AutosizeConfig,
    private readonly clock: Clock,
    private readonly host: HostSampler,
    private readonly log?: Pick<Logger, 'debug'>,
  ) {
    this.sizing = { init: sizingOf('init', workers.init), run: sizingOf('run', workers.run), eval: sizingOf('eval', workers.eval) };
    this.times = { init: new ServiceTimes(), run: new ServiceTimes(), eval: new ServiceTimes() };
    this.lastTick = clock.now();
    this.arm();
  }

  /** True when at least one stage sizes itself. */
  get active(): boolean {
    return STAGES.some((s) => this.sizing[s].mode === 'auto');
  }

  /** A slot of `stage` was granted (the job came to the stage, or left its queue). */
  grant(stage: Stage): void {
    this.granted[stage]++;
  }

  /** A slot of `stage` ran `ms` for work of `kind`, granted when `concurrency` slots were busy. */
  observe(stage: Stage, ms: number, kind: string | undefined, concurrency: number): void {
    this.peak[stage] = Math.max(this.peak[stage], concurrency);
    const m = this.meanMs[stage];
    this.meanMs[stage] = m === 0 ? ms : m + 0.1 * (ms - m);
    if (this.sizing[stage].mode === 'auto') this.times[stage].add(kind ?? '', concurrency, ms);
  }

  /** A stage's bounds and the reason of its last decision; undefined for a fixed stage. */
  state(stage: Stage): AutoState | undefined {
    const z = this.sizing[stage];
    return z.mode === 'auto' ? { mode: 'auto', min: z.min, max: z.max, reason: this.reasons[stage] } : undefined;
  }

  /** Changes a stage's sizing at run time (POST /workers): a number fixes it, `auto` or bounds let it size itself. */
  set(stage: Stage, size: StageSize): void {
    const z = sizingOf(stage, size);
    this.sizing[stage] = z;
    if (z.mode === 'fixed') this.pools[stage].resize(z.size);
    else {
      const now = this.pools[stage].size;
      this.pools[stage].resize(Math.min(z.max, Math.max(z.min, now)));
      this.reasons[stage] = 'set';
    }
    this.arm();
  }

  /** One decision for every auto stage (the timer calls it; tests call it directly). */
  tick(): void {
    const h = this.host();
    this.lastHost = h;
    const now = this.clock.now();
    const seconds = Math.max(0.001, (now - this.lastTick) / 1000);
    this.lastTick = now;
    const cpus = this.cfg.cpus ?? h.cores;
    const memBudget = this.cfg.memory_mb ?? 0.85 * h.totalMb;
    const memory = h.usedMb > 1.1 * memBudget ? 'over' : h.usedMb > memBudget ? 'full' : 'ok';
    for (const s of STAGES) {
      const z = this.sizing[s];
      const pool = this.pools[s];
      const peakBusy = Math.max(this.peak[s], pool.busy);
      this.peak[s] = pool.busy;
      const arrivals = (this.granted[s] + pool.depth - this.queuedBefore[s]) / seconds;
      this.granted[s] = 0;
      this.queuedBefore[s] = pool.depth;
      if (z.mode !== 'auto') continue;
      const window = this.wishes[s];
      while (window.length && window[0]![0] < now - this.cfg.stabilization_s * 1000) window.shift();
      const d = decide({
        size: pool.size,
        min: z.min,
        max: z.max,
        start: z.start,
        queued: pool.depth,
        peakBusy,
        arrivalsPerS: Math.max(0, arrivals),
        serviceS: this.meanMs[s] / 1000,
        gradient: this.times[s].gradient(this.cfg.tolerance, peakBusy),
        maxStep: this.cfg.max_step,
        shrinkStep: this.cfg.shrink_step,
        recentHigh: window.reduce((m, [, w]) => Math.max(m, w), 0),
        cpuOver: h.ownCores >= CPU_FULL * cpus || h.eventLoop >= CPU_FULL,
        memory,
      });
      this.times[s].roll();
      window.push([now, d.wanted]);
      this.reasons[s] = d.reason;
      if (d.size !== pool.size) {
        this.log?.debug({ stage: s, from: pool.size, to: d.size, reason: d.reason }, 'autosize');
        pool.resize(d.size);
      }
    }
  }

  /** Stops the timer. Safe twice. */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(): void {
    if (this.closed || this.timer !== undefined || !this.active) return;
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      this.tick();
      this.arm();
    }, this.cfg.interval_s * 1000);
    (this.timer as { unref?: () => void }).unref?.();
  }
}
