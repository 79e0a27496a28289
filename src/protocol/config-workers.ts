import { z } from 'zod';

/** Bounds of a self-sizing stage pool: it never has fewer than `min` or more than `max` slots. */
const AutoBounds = z
  .strictObject({
    min: z.number().int().positive().max(100_000).default(1),
    max: z.number().int().positive().max(100_000),
  })
  .refine((b) => b.min <= b.max, { message: 'min must not exceed max', path: ['min'] });
type AutoBounds = z.infer<typeof AutoBounds>;

const fixed = (d: number) => z.number().int().positive().max(100_000).default(d);

/**
 * One stage's pool: a number of slots, `auto` (sized from its queue and service time within the
 * default bounds), or `{min, max}` (auto within those bounds).
 */
const StageSize = (d: number) => z.union([fixed(d), z.literal('auto'), AutoBounds]);
export type StageSize = number | 'auto' | AutoBounds;

/** POST /workers: new sizing for some stages (admin), answered with the pools in force. */
export const WorkersUpdate = z.strictObject({
  init: z.union([z.number().int().positive().max(100_000), z.literal('auto'), AutoBounds]).optional(),
  run: z.union([z.number().int().positive().max(100_000), z.literal('auto'), AutoBounds]).optional(),
  eval: z.union([z.number().int().positive().max(100_000), z.literal('auto'), AutoBounds]).optional(),
});

/** Worker pool sizes of the three stages; `workers: auto` makes all three self-sizing. */
const StageWorkers = z.strictObject({ init: StageSize(16), run: StageSize(64), eval: StageSize(16) });
export const WorkersConfig = z
  .union([StageWorkers, z.literal('auto')])
  .transform((w) => (w === 'auto' ? { init: 'auto' as const, run: 'auto' as const, eval: 'auto' as const } : w));
export type WorkersConfig = z.infer<typeof WorkersConfig>;

/** Default slots of each stage: the static sizes, and where an `auto` pool starts. */
export const DEFAULT_WORKERS = { init: 16, run: 64, eval: 16 } as const;
/** Default upper bound of an `auto` stage. */
export const DEFAULT_AUTO_MAX = { init: 256, run: 1024, eval: 256 } as const;

/** How `auto` stages are sized (`autosize:` section). */
export const AutosizeConfig = z.strictObject({
  /** Seconds between two sizing decisions. */
  interval_s: z.number().min(0.05).max(3600).default(2),
  /** The most a stage grows per decision, as a fraction of its size (at least one slot): 1 may double it. */
  max_step: z.number().gt(0).max(4).default(1),
  /** The most a stage shrinks per decision, as a fraction of its size (at least one slot). */
  shrink_step: z.number().gt(0).max(1).default(0.25),
  /**
   * A stage shrinks only to the largest size it wanted over this many seconds (Kubernetes' HPA
   * scale-down stabilization): the bursts of a DAPO step (a window refilled after a handover) find
   * the slots they had a minute ago.
   */
  stabilization_s: z.number().nonnegative().max(86_400).default(60),
  /**
   * With the CPU budget used: the slowdown a stage's jobs may show from concurrency (service time
   * at the concurrency reached over that at low concurrency, per handler) before the stage shrinks.
   */
  tolerance: z.number().min(1).max(10).default(1.5),
  /**
   * CPU budget, in cores: stages stop growing while this server and its processes (sandboxes and
   * what runs in them) keep 90 % of it busy, or while the server's own event loop is 90 % busy
   * (more jobs would only wait for it). Other programs on the host do not count. Default: all cores.
   */
  cpus: z.number().positive().optional(),
  /** Memory budget, in MiB in use on the host (all programs: memory runs out for everyone): stages stop growing above it, and shrink a step at a time above it by 10 %. Default: 85 % of the host's memory. */
  memory_mb: z.number().positive().optional(),
});
export type AutosizeConfig = z.infer<typeof AutosizeConfig>;
