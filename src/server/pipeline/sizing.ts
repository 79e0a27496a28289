import { DEFAULT_AUTO_MAX, DEFAULT_WORKERS, type StageSize } from '../../protocol/config-workers.js';
import type { Stage } from './job.js';

/** A stage's pool as configured: a fixed number of slots, or self-sizing within bounds. */
export type Sizing = { mode: 'fixed'; size: number } | { mode: 'auto'; min: number; max: number; start: number };

/** Reads `workers.<stage>`: a number, `auto` (default bounds), or `{min, max}`. */
export function sizingOf(stage: Stage, w: StageSize): Sizing {
  if (typeof w === 'number') return { mode: 'fixed', size: w };
  const min = w === 'auto' ? 1 : w.min;
  const max = w === 'auto' ? DEFAULT_AUTO_MAX[stage] : w.max;
  // An auto pool starts at the static default, within its bounds.
  return { mode: 'auto', min, max, start: Math.min(max, Math.max(min, DEFAULT_WORKERS[stage])) };
}

/** The slots a stage starts with. */
export function initialSize(stage: Stage, w: StageSize): number {
  const s = sizingOf(stage, w);
  return s.mode === 'fixed' ? s.size : s.start;
}
