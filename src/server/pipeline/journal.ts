import { createReadStream, createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, open, rename, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { JobState, Result } from '../../protocol/process.js';
import { scopedKey } from './scope.js';

/** One line of the journal. */
interface JournalEntry {
  job_id: string;
  state: JobState;
  /** Wall-clock ms when the job ended (ttl counts from here, across restarts). */
  ended_at: number;
  result: Result;
  /** Fingerprint of the submitted instance, so a resubmission under the same id with another instance is refused. */
  instance_hash?: string;
  /** The tenant that ran it (absent on a server without tenants). */
  tenant?: string;
}

/** Where one line sits in the journal file (without its newline). */
export interface JournalLocation {
  offset: number;
  length: number;
}

/** An entry as `open()` reloads it: its header, its place in the file, and its result's JSON for the newest ones. */
export interface ReloadedEntry {
  job_id: string;
  /** The tenant that ran it, '' on a server without tenants. */
  tenant: string;
  state: JobState;
  ended_at: number;
  instance_hash?: string;
  at: JournalLocation;
  /** The result as JSON text (only for the newest `keep` entries). */
  json?: string;
}

/**
 * The results journal: finished results appended as JSON lines (`<dir>/results.jsonl`) and
 * reloaded at start, so GET /jobs/:id answers across a restart within `result_ttl_s`. A result
 * no longer kept in memory is read back from its line (`read`). A job in flight at a crash has no
 * line: the client resubmits it with the same id.
 */
export class ResultsJournal {
  private stream: WriteStream | undefined;
  private closing: Promise<void> | undefined;
  private reader: Promise<FileHandle> | undefined;
  /** Bytes handed to the stream, and bytes the stream confirmed written. */
  private size = 0;
  private flushed = 0;
  private broken = false;
  private readonly waiters = new Set<{ upTo: number; wake: () => void }>();
  readonly file: string;

  constructor(dir: string) {
    this.file = path.join(dir, 'results.jsonl');
  }

  /**
   * Reads the entries still within `ttlMs` (the last line per job id wins), rewrites the file with
   * only those (so it does not grow across restarts), and opens it for appending. The file is
   * streamed twice, never held whole; the results of the newest `keep` entries come back as JSON.
   */
  async open(ttlMs: number, wallNow: number, keep = Number.POSITIVE_INFINITY): Promise<ReloadedEntry[]> {
    await mkdir(path.dirname(this.file), { recursive: true });
    const winners = new Map<string, { src: number; entry: ReloadedEntry }>();
    let exists = true;
    try {
      await eachLine(this.file, (line, offset) => {
        const e = parseLine(line);
        // A torn last line (crash mid-write), a foreign line or an expired result is skipped.
        if (!e || wallNow - e.ended_at > ttlMs) return;
        const id = scopedKey(e.tenant ?? '', e.job_id);
        winners.delete(id); // re-inserted: the map stays in file order of each id's last line
        winners.set(id, {
          src: offset,
          entry: {
            job_id: e.job_id,
            tenant: e.tenant ?? '',
            state: e.state,
            ended_at: e.ended_at,
            instance_hash: e.instance_hash,
            at: { offset: 0, length: 0 },
          },
        });
      });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      exists = false;
    }
    const bySrc = new Map<number, { index: number; entry: ReloadedEntry }>();
    let index = 0;
    for (const w of winners.values()) bySrc.set(w.src, { index: index++, entry: w.entry });
    const firstKept = winners.size - Math.min(keep, winners.size);
    const tmp = `${this.file}.tmp`;
    const out = createWriteStream(tmp);
    let written = 0;
    if (exists) {
      await eachLine(this.file, async (line, offset) => {
        const w = bySrc.get(offset);
        if (!w) return;
        w.entry.at = { offset: written, length: line.length };
        if (w.index >= firstKept) w.entry.json = JSON.stringify(parseLine(line)!.result);
        written += line.length + 1;
        out.write(line);
        if (!out.write('\n')) await new Promise<void>((r) => out.once('drain', () => r()));
      });
    }
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    await rename(tmp, this.file);
    this.size = this.flushed = written;
    this.stream = createWriteStream(this.file, { flags: 'a' });
    this.stream.on('error', () => this.fail());
    return [...winners.values()].map((w) => w.entry);
  }

  /**
   * Appends one finished result, given as JSON text, with its tenant ('' without tenants). Returns
   * where its line sits; `written` is called once the line reached the kernel (or the write failed),
   * so a caller can answer only then and a result a client has seen survives a crash of the server.
   */
  append(
    jobId: string,
    state: JobState,
    endedAt: number,
    instanceHash: string,
    resultJson: string,
    tenant = '',
    written?: () => void,
  ): JournalLocation | undefined {
    if (!this.stream || this.closing) return undefined;
    const who = tenant === '' ? '' : `"tenant":${JSON.stringify(tenant)},`;
    const line = Buffer.from(
      `{"job_id":${JSON.stringify(jobId)},${who}"state":"${state}","ended_at":${endedAt},"instance_hash":"${instanceHash}","result":${resultJson}}\n`,
    );
    const at = { offset: this.size, length: line.length - 1 };
    this.size += line.length;
    this.stream.write(line, (err) => {
      written?.();
      if (err) return this.fail();
      this.flushed = at.offset + line.length;
      for (const w of this.waiters) if (w.upTo <= this.flushed) w.wake();
    });
    return at;
  }

  /** The result JSON of `jobId`'s line at `at` (of `tenant`), or undefined when the line is not there (a broken or replaced file). */
  async read(jobId: string, at: JournalLocation, tenant = ''): Promise<string | undefined> {
    if (this.closing || this.broken) return undefined;
    await this.flushedTo(at.offset + at.length);
    if (this.closing || this.broken) return undefined;
    try {
      this.reader ??= open(this.file, 'r');
      const fh = await this.reader;
      const buf = Buffer.alloc(at.length);
      const { bytesRead } = await fh.read(buf, 0, at.length, at.offset);
      const e = bytesRead === at.length ? parseLine(buf) : undefined;
      return e?.job_id === jobId && (e.tenant ?? '') === tenant ? JSON.stringify(e.result) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Flushes and closes. Safe twice. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const w of this.waiters) w.wake();
      await new Promise<void>((resolve) => (this.stream ? this.stream.end(() => resolve()) : resolve()));
      await (await this.reader?.catch(() => undefined))?.close();
    })();
    return this.closing;
  }

  private flushedTo(upTo: number): Promise<void> {
    if (this.flushed >= upTo || this.broken || this.closing) return Promise.resolve();
    return new Promise((resolve) => {
      const w = {
        upTo,
        wake: () => {
          this.waiters.delete(w);
          resolve();
        },
      };
      this.waiters.add(w);
    });
  }

  /** A write failed (disk full, file gone): appends stop counting and reads answer "not there". */
  private fail(): void {
    this.broken = true;
    for (const w of this.waiters) w.wake();
  }
}

/** A journal line, or undefined when it is torn or foreign. */
function parseLine(line: Buffer): JournalEntry | undefined {
  try {
    const e = JSON.parse(line.toString('utf8')) as JournalEntry;
    return typeof e?.job_id === 'string' && typeof e.ended_at === 'number' && e.result && typeof e.result === 'object' ? e : undefined;
  } catch {
    return undefined;
  }
}

/** Streams a file line by line (newline-separated), with each line's byte offset; a last line without newline counts too. */
async function eachLine(file: string, fn: (line: Buffer, offset: number) => void | Promise<void>): Promise<void> {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  let offset = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const part = chunk.subarray(start, nl);
      const line = pendingBytes ? Buffer.concat([...pending, part]) : part;
      pending = [];
      pendingBytes = 0;
      if (line.length) await fn(line, offset);
      offset += line.length + 1;
      start = nl + 1;
    }
    if (start < chunk.length) {
      pending.push(chunk.subarray(start));
      pendingBytes += chunk.length - start;
    }
  }
  if (pendingBytes) await fn(Buffer.concat(pending), offset);
}
