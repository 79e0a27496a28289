import { createReadStream, existsSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Batch } from '../protocol/batch.js';
import { RaasError } from '../protocol/errors.js';

/**
 * Reads what a run wrote (`raas train`, or `raas sidecar --keep-batches`): its batches, by step,
 * from `batches/step-<k>.json` or, without step files, from `batches.jsonl`; and its saved config.
 * Errors name the directory and what is missing.
 */
export class RunDir {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = path.resolve(dir);
  }

  /** The steps whose batch the run wrote, ascending. */
  async steps(): Promise<number[]> {
    this.mustExist();
    const files = existsSync(path.join(this.dir, 'batches')) ? await readdir(path.join(this.dir, 'batches')) : [];
    const fromFiles = files.map((f) => /^step-(\d+)\.json$/.exec(f)).flatMap((m) => (m ? [Number(m[1])] : []));
    if (fromFiles.length) return fromFiles.sort((a, b) => a - b);
    const steps: number[] = [];
    await this.eachLine((line) => {
      const s = stepOf(line);
      if (s !== undefined) steps.push(s);
      return false;
    });
    return [...new Set(steps)].sort((a, b) => a - b);
  }

  /** The batch of `step` (default: the last one written). */
  async batch(step?: number): Promise<Batch> {
    const steps = await this.steps();
    if (!steps.length)
      throw new RaasError(
        'config_invalid',
        `${this.dir}: no batches: raas train writes batches.jsonl after its first step; raas sidecar only with --keep-batches`,
        { retryable: false },
      );
    const k = step ?? steps.at(-1)!;
    if (!steps.includes(k))
      throw new RaasError('config_invalid', `${this.dir}: no batch of step ${k}; the run has steps ${range(steps)}`, { retryable: false });
    const file = path.join(this.dir, 'batches', `step-${k}.json`);
    if (existsSync(file)) return JSON.parse(await readFile(file, 'utf8')) as Batch;
    let found: Batch | undefined;
    // A resumed run may have written a step twice: the last line of it counts.
    await this.eachLine((line) => {
      if (stepOf(line) === k) found = JSON.parse(line) as Batch;
      return false;
    });
    return found!;
  }

  /** The run's resolved config (`config.json`), if it wrote one. */
  async config(): Promise<Record<string, unknown> | undefined> {
    try {
      return JSON.parse(await readFile(path.join(this.dir, 'config.json'), 'utf8')) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  }

  private mustExist(): void {
    if (!existsSync(this.dir))
      throw new RaasError('config_invalid', `${this.dir}: no such run directory (raas train writes runs/<name>/)`, { retryable: false });
  }

  /** Calls `f` on each line of batches.jsonl until it returns true. */
  private async eachLine(f: (line: string) => boolean): Promise<void> {
    const file = path.join(this.dir, 'batches.jsonl');
    if (!existsSync(file)) return;
    const lines = createInterface({ input: createReadStream(file), crlfDelay: Number.POSITIVE_INFINITY });
    try {
      for await (const line of lines) if (line.trim() && f(line)) break;
    } finally {
      lines.close();
    }
  }
}

/** The `step` of a batch line (batches are written with `step` first). */
function stepOf(line: string): number | undefined {
  const m = /^\{"step":(\d+)/.exec(line);
  return m ? Number(m[1]) : undefined;
}

/** "0–3" or "0, 2, 5". */
function range(steps: number[]): string {
  const contiguous = steps.every((s, i) => i === 0 || s === steps[i - 1]! + 1);
  return contiguous && steps.length > 2 ? `${steps[0]}–${steps.at(-1)}` : steps.join(', ');
}
