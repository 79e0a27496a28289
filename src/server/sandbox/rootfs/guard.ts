// A watch over one conversion's disk use: an image is hostile input, and one that unpacks to more
// than the cache's whole budget (or would fill the disk) is stopped while it unpacks, not after.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { RaasError } from '../../../protocol/errors.js';
import { systemClock, type Clock } from '../../../util/clock.js';

const POLL_MS = 500;
/** Free space a conversion never takes: 5% of the filesystem, at most 2 GiB. */
const RESERVE_FRACTION = 0.05;
const RESERVE_MAX = 2 * 2 ** 30;

/** Options of one watch. */
export interface DiskGuardOptions {
  /** The tree being written. */
  dir: string;
  /** Bytes it may grow to. */
  limitBytes: number;
  /** What the error says the tree is (e.g. "image /x/y.sif"). */
  what: string;
  /** Called once with the reason when the conversion must stop. */
  stop: (reason: RaasError) => void;
  clock?: Clock;
}

function freeBytes(dir: string): { free: number; total: number } {
  const s = fs.statfsSync(dir);
  return { free: Number(s.bavail) * Number(s.bsize), total: Number(s.blocks) * Number(s.bsize) };
}

/** Bytes under `dir` on its filesystem (du), or 0 when du cannot tell. */
function usedBytes(dir: string): number {
  const r = spawnSync('du', ['-sxb', dir], { encoding: 'utf8', timeout: 60_000 });
  return Number(r.stdout?.split('\t')[0]) || 0;
}

/**
 * Polls the filesystem of `dir`: when its free space falls under the reserve, or the space taken
 * since the start exceeds `limitBytes` and `du` confirms the tree is that large, calls `stop` once.
 * Returns the function that ends the watch.
 */
export function watchDisk(o: DiskGuardOptions): () => void {
  const clock = o.clock ?? systemClock;
  const start = freeBytes(o.dir);
  const reserve = Math.min(RESERVE_MAX, start.total * RESERVE_FRACTION);
  let handle: unknown;
  let over = false;
  const tick = (): void => {
    let now: { free: number };
    try {
      now = freeBytes(o.dir);
    } catch {
      return void (handle = clock.setTimeout(tick, POLL_MS));
    }
    if (now.free < reserve) {
      over = true;
      return o.stop(
        new RaasError(
          'sandbox_unavailable',
          `${o.what}: stopped unpacking, the disk of ${o.dir} has ${Math.round(now.free / 2 ** 20)} MiB left (a conversion keeps ${Math.round(reserve / 2 ** 20)} MiB free); free space or move sandbox.image_roots.cache_dir`,
        ),
      );
    }
    if (start.free - now.free > o.limitBytes) {
      const used = usedBytes(o.dir);
      if (used > o.limitBytes) {
        over = true;
        return o.stop(
          new RaasError(
            'invalid_instance',
            `${o.what} unpacks to more than ${Math.round(o.limitBytes / 2 ** 20)} MiB, more than the image cache's whole budget (sandbox.image_roots.budget_gb): raise it, or use a smaller image`,
            { retryable: false },
          ),
        );
      }
    }
    handle = clock.setTimeout(tick, POLL_MS);
  };
  handle = clock.setTimeout(tick, POLL_MS);
  return () => {
    if (!over) clock.clearTimeout(handle);
  };
}
