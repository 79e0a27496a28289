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
  /** Jobs waiting for the stage now. */
  queued: number;
  /** The most slots busy at once since the previous decision. */
  peakBusy: number;
  /**
   * tolerance × (service time at low concurrency) / (service time now), in [0.5, 1]: below 1 the
   * stage's jobs slow each other down more than the tolerance allows.
   */
  gradient: number;
  /** Fraction of the size one decision may change (at least one slot). */
  maxStep: number;
  /** The host is over its CPU budget, at its memory budget (`full`), or over it by 10 % (`over`). */
  cpuOver: boolean;
  memory: 'ok' | 'full' | 'over';
}

/**
 * One stage's next size, and why. A queue grows the stage (by what waits, at most one step) while
 * jobs do not slow each other down past the tolerance and the host is within its CPU and memory
 * budgets; contention shrinks it in proportion; slots idle for a whole interval are given back
 * down to 1.5 × the busiest moment; memory over budget shrinks every auto stage by one step. A
 * smaller size never takes a running job's slot: it only grants none until enough are released.
 */
export function decide(s: StageSignal): { size: number; reason: string } {
  const step = Math.max(1, Math.floor(s.maxStep * s.size));
  const clamp = (n: number): number => Math.min(s.max, Math.max(s.min, Math.max(s.size - step, Math.min(s.size + step, n))));
  const inflated = s.gradient < 1;
  let target = s.size;
  let reason = 'steady';
  if (s.memory === 'over') [target, reason] = [s.size - step, 'memory over budget'];
  else if (inflated) [target, reason] = [Math.floor(s.size * s.gradient), `jobs slow each other down (gradient ${s.gradient.toFixed(2)})`];
  else if (s.queued > 0) {
    if (s.cpuOver) reason = 'queue, but the CPU budget is used';
    else if (s.memory === 'full') reason = 'queue, but the memory budget is used';
    else [target, reason] = [s.size + s.queued, 'queue'];
  } else if (s.peakBusy < s.size / 2) [target, reason] = [Math.ceil(s.peakBusy * 1.5), 'idle slots'];
  const size = clamp(target);
  if (size === s.size && target !== s.size && reason !== 'steady') reason += ' (at a bound)';
  return { size, reason };
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
    this.arm();
  }

  /** True when at least one stage sizes itself. */
  get active(): boolean {
    return STAGES.some((s) => this.sizing[s].mode === 'auto');
  }

  /** A slot of `stage` ran `ms` for work of `kind`, granted when `concurrency` slots were busy. */
  observe(stage: Stage, ms: number, kind: string | undefined, concurrency: number): void {
    this.peak[stage] = Math.max(this.peak[stage], concurrency);
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
    const cpus = this.cfg.cpus ?? h.cores;
    const memBudget = this.cfg.memory_mb ?? 0.85 * h.totalMb;
    const memory = h.usedMb > 1.1 * memBudget ? 'over' : h.usedMb > memBudget ? 'full' : 'ok';
    for (const s of STAGES) {
      const z = this.sizing[s];
      const pool = this.pools[s];
      const peakBusy = Math.max(this.peak[s], pool.busy);
      this.peak[s] = pool.busy;
      if (z.mode !== 'auto') continue;
      const d = decide({
        size: pool.size,
        min: z.min,
        max: z.max,
        queued: pool.depth,
        peakBusy,
        gradient: this.times[s].gradient(this.cfg.tolerance, peakBusy),
        maxStep: this.cfg.max_step,
        cpuOver: h.ownCores >= CPU_FULL * cpus,
        memory,
      });
      this.times[s].roll();
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
