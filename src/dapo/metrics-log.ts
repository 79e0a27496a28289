import { existsSync } from 'node:fs';
import { appendFile, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { StepRecord } from './metrics.js';

/**
 * `runs/<name>/metrics.jsonl`: one JSON record per handed-over step (src/dapo/metrics.ts
 * `stepRecord`), appended as the step's files are written, so a dashboard can tail it.
 */
export class MetricsLog {
  readonly file: string;

  constructor(runDir: string) {
    this.file = path.join(runDir, 'metrics.jsonl');
  }

  async append(r: StepRecord): Promise<void> {
    await appendFile(this.file, JSON.stringify(r) + '\n');
  }

  /** A resumed run keeps the records of its finished steps (step < stepsDone) and drops the rest. */
  async keepSteps(stepsDone: number): Promise<void> {
    if (!existsSync(this.file)) return;
    const lines = (await readFile(this.file, 'utf8')).split('\n').filter((l) => {
      if (!l.trim()) return false;
      try {
        return (JSON.parse(l) as { step?: number }).step! < stepsDone;
      } catch {
        return false; // a line cut by a kill
      }
    });
    await writeFile(this.file, lines.map((l) => l + '\n').join(''));
  }

  /** Every record so far (tests, tools). */
  async read(): Promise<StepRecord[]> {
    if (!existsSync(this.file)) return [];
    return (await readFile(this.file, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as StepRecord);
  }
}
