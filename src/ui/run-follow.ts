import { stat } from 'node:fs/promises';
import path from 'node:path';
import type { Clock } from '../util/clock.js';

/** The files whose change means the run moved on. */
const WATCHED = ['metrics.jsonl', 'summary.json', 'batches.jsonl', 'groups.jsonl', 'prompts.jsonl', 'checkpoint.json', 'batches'];

/** A change the follower saw: which files, and when (wall-clock ms). */
export interface RunChange {
  changed: string[];
  at: number;
}

/**
 * Follows a run directory that `raas train` may still be writing: every `everyMs` it compares each
 * output's size and modification time with the last look and reports what changed. It polls
 * (a stat per file), since inotify does not see writes made on another node of a shared
 * filesystem, where HPC runs keep their outputs.
 */
export class RunFollower {
  private last = new Map<string, string>();
  private timer: unknown;
  private closed = false;
  /** Wall-clock ms of the newest change seen (the files' own mtime on the first look). */
  updatedAt: number | null = null;

  constructor(
    private readonly dir: string,
    private readonly o: { clock: Clock; wallNow: () => number; everyMs?: number; onChange: (c: RunChange) => void },
  ) {}

  /** Takes the first look (no change reported) and starts following. */
  async start(): Promise<void> {
    const now = await this.look();
    this.last = now.sig;
    this.updatedAt = now.newest;
    this.arm();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== undefined) this.o.clock.clearTimeout(this.timer);
  }

  private arm(): void {
    if (this.closed) return;
    this.timer = this.o.clock.setTimeout(() => void this.tick(), this.o.everyMs ?? 1000);
    (this.timer as { unref?: () => void }).unref?.();
  }

  private async tick(): Promise<void> {
    try {
      const now = await this.look();
      const changed = [...new Set([...now.sig.keys(), ...this.last.keys()])].filter((f) => now.sig.get(f) !== this.last.get(f));
      this.last = now.sig;
      if (changed.length > 0 && !this.closed) {
        this.updatedAt = this.o.wallNow();
        this.o.onChange({ changed, at: this.updatedAt });
      }
    } finally {
      this.arm();
    }
  }

  private async look(): Promise<{ sig: Map<string, string>; newest: number | null }> {
    const sig = new Map<string, string>();
    let newest: number | null = null;
    await Promise.all(
      WATCHED.map(async (f) => {
        try {
          const s = await stat(path.join(this.dir, f));
          sig.set(f, `${s.size}:${s.mtimeMs}`);
          newest = Math.max(newest ?? 0, s.mtimeMs);
        } catch {
          // not written yet
        }
      }),
    );
    return { sig, newest };
  }
}
