import type { JobState } from '../../protocol/process.js';
import { instanceHash } from './intake.js';
import type { JournalLocation, ResultsJournal } from './journal.js';
import { scopedKey } from './scope.js';

/** A finished job as the store keeps it. */
export interface FinishedRecord {
  state: JobState;
  /** Wall-clock ms when the job ended. */
  endedAt: number;
  /** Fingerprint of the submitted instance (with a journal), or the instance itself (hashed only on an attach). */
  hash?: string;
  instance?: unknown;
  /** The result as JSON text while it is kept in memory. */
  json?: string;
  /** Its journal line, once appended (with the id and tenant the line names). */
  at?: JournalLocation;
  jobId?: string;
  tenant?: string;
}

export interface ResultStoreOptions {
  /** `result_ttl_s` in ms: how long a result answers. */
  ttlMs: number;
  /** `max_kept_results`: results kept in memory, the newest. */
  max: number;
  journal?: ResultsJournal;
  wallNow: () => number;
}

/**
 * Finished results by key (the job id, scoped by tenant: scope.ts), for GET /jobs/:id, attach and /cancel, for `result_ttl_s`. The newest
 * `max_kept_results` are kept in memory as JSON text; an older one keeps only its state and the place
 * of its journal line, and is read back from the journal when asked for (without a journal it is
 * forgotten). Memory stays flat however long the server runs.
 */
export class ResultStore {
  /** Results in memory, oldest first. */
  private readonly kept = new Map<string, FinishedRecord>();
  /** Results answered from the journal, oldest first. */
  private readonly spilled = new Map<string, FinishedRecord>();
  /**
   * The order results entered memory, oldest first (an entry whose id was stored again since is
   * stale and skipped). trim() takes the oldest from here, not from the Map: finding a Map's first
   * entry walks the holes its deletions left, thousands of them at `max_kept_results` 4096.
   */
  private order: Array<[string, FinishedRecord]> = [];
  private head = 0;

  constructor(private readonly o: ResultStoreOptions) {}

  /** Results that answer (in memory or in the journal). */
  get size(): number {
    return this.kept.size + this.spilled.size;
  }

  /** Results held in memory as JSON. */
  /** Entries of the memory order list, stale ones included (bounded: it is compacted as results leave). */
  get orderLength(): number {
    return this.order.length;
  }

  get inMemory(): number {
    return this.kept.size;
  }

  /** Reloads the journal (call once before serving): the newest `max` results into memory, the rest as journal pointers. */
  async open(): Promise<void> {
    if (!this.o.journal) return;
    for (const e of await this.o.journal.open(this.o.ttlMs, this.o.wallNow(), this.o.max)) {
      const r: FinishedRecord = { state: e.state, endedAt: e.ended_at, hash: e.instance_hash, at: e.at, jobId: e.job_id, tenant: e.tenant };
      const key = scopedKey(e.tenant, e.job_id);
      if (e.json === undefined) this.spilled.set(key, r);
      else this.keep(key, { ...r, json: e.json });
    }
  }

  /**
   * Stores a job's result (and journals it with its job id and tenant scope); the last job to
   * finish under a key is the one that answers. Returns true when `written` will be called once the
   * journal line is written; false when nothing is journaled (the caller answers at once).
   */
  put(jobId: string, state: JobState, json: string, endedAt: number, instance: unknown, scope = '', written?: () => void): boolean {
    const journal = this.o.journal;
    const id = scopedKey(scope, jobId);
    let r: FinishedRecord;
    let pending = false;
    if (journal) {
      const hash = instanceHash(instance);
      const at = journal.append(jobId, state, endedAt, hash, json, scope, written);
      pending = at !== undefined;
      r = { state, endedAt, hash, json, at, jobId, tenant: scope };
    } else {
      r = { state, endedAt, instance, json };
    }
    this.spilled.delete(id);
    // Deleted first, so the id moves to the newest end.
    this.kept.delete(id);
    this.keep(id, r);
    this.trim();
    return pending;
  }

  private keep(id: string, r: FinishedRecord): void {
    this.kept.set(id, r);
    this.order.push([id, r]);
  }

  /** The record of `id` while within the ttl (state and fingerprint; the JSON via `json()`). */
  record(id: string): FinishedRecord | undefined {
    const r = this.kept.get(id) ?? this.spilled.get(id);
    if (r && this.expired(r)) {
      this.kept.delete(id);
      this.spilled.delete(id);
      return undefined;
    }
    return r;
  }

  /** The result JSON of a record: from memory, else its journal line; undefined when neither has it. */
  async json(id: string, r: FinishedRecord): Promise<string | undefined> {
    if (r.json !== undefined) return r.json;
    if (!r.at || !this.o.journal) return undefined;
    return this.o.journal.read(r.jobId ?? id, r.at, r.tenant ?? '');
  }

  /** Drops results past the ttl. */
  sweep(): void {
    for (const map of [this.kept, this.spilled]) for (const [id, r] of map) if (this.expired(r)) map.delete(id);
  }

  private expired(r: FinishedRecord): boolean {
    return this.o.wallNow() - r.endedAt > this.o.ttlMs;
  }

  /** Moves the oldest results out of memory past `max` (to a journal pointer, or out entirely). */
  private trim(): void {
    while (this.kept.size > this.o.max && this.head < this.order.length) {
      const [id, r] = this.order[this.head++]!;
      // Stale: the id was stored again (a newer entry follows), or it expired.
      if (this.kept.get(id) !== r) continue;
      this.kept.delete(id);
      if (r.at) this.spilled.set(id, { state: r.state, endedAt: r.endedAt, hash: r.hash, at: r.at, jobId: r.jobId, tenant: r.tenant });
    }
    // Now and then drop what was taken and what is stale (ids stored again, expired results), so
    // the order list stays about as long as the Map.
    if (this.order.length - this.head > 2 * this.kept.size + 1024) {
      this.order = this.order.slice(this.head).filter(([id, r]) => this.kept.get(id) === r);
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }
}
