import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { JobState, Result } from '../../protocol/process.js';

/** One line of the journal. */
export interface JournalEntry {
  job_id: string;
  state: JobState;
  /** Wall-clock ms when the job ended (ttl counts from here, across restarts). */
  ended_at: number;
  result: Result;
  /** Fingerprint of the submitted instance, so a resubmission under the same id with another instance is refused. */
  instance_hash?: string;
}

/**
 * The results journal: finished results appended as JSON lines (`<dir>/results.jsonl`) and
 * reloaded at start, so GET /jobs/:id answers across a restart within `result_ttl_s`. A job in
 * flight at a crash has no line: the client resubmits it with the same id.
 */
export class ResultsJournal {
  private stream: WriteStream | undefined;
  private closing: Promise<void> | undefined;
  readonly file: string;

  constructor(dir: string) {
    this.file = path.join(dir, 'results.jsonl');
  }

  /**
   * Reads the entries still within `ttlMs` (the last line per job id wins), rewrites the file with
   * only those (so it does not grow across restarts), and opens it for appending.
   */
  async open(ttlMs: number, wallNow: number): Promise<JournalEntry[]> {
    await mkdir(path.dirname(this.file), { recursive: true });
    let text = '';
    try {
      text = await readFile(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    const live = new Map<string, JournalEntry>();
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      try {
        const e = JSON.parse(line) as JournalEntry;
        // A torn last line (crash mid-write) or a foreign line is skipped.
        if (typeof e?.job_id === 'string' && typeof e.ended_at === 'number' && e.result && wallNow - e.ended_at <= ttlMs) live.set(e.job_id, e);
      } catch {
        /* skip */
      }
    }
    const entries = [...live.values()];
    const tmp = `${this.file}.tmp`;
    await writeFile(tmp, entries.map((e) => JSON.stringify(e) + '\n').join(''));
    await rename(tmp, this.file);
    this.stream = createWriteStream(this.file, { flags: 'a' });
    this.stream.on('error', () => undefined);
    return entries;
  }

  /** Appends one finished result, given as JSON text (buffered; never blocks the answer). */
  append(jobId: string, state: JobState, endedAt: number, instanceHash: string, resultJson: string): void {
    if (!this.stream || this.closing) return;
    this.stream.write(`{"job_id":${JSON.stringify(jobId)},"state":"${state}","ended_at":${endedAt},"instance_hash":"${instanceHash}","result":${resultJson}}\n`);
  }

  /** Flushes and closes. Safe twice. */
  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      if (!this.stream) return resolve();
      this.stream.end(() => resolve());
    });
    return this.closing;
  }
}
