import type { JobEvent } from '../../protocol/events.js';
import type { JobState } from '../../protocol/process.js';
import type { JobList, JobRow } from '../../ui/model.js';

const TERMINAL: ReadonlySet<JobState> = new Set(['done', 'failed', 'cancelled', 'timed_out']);

/** Named groups of states the console's filter offers besides single states. */
const STATE_GROUPS: Record<string, ReadonlySet<JobState>> = {
  live: new Set(['queued_init', 'init', 'queued_run', 'run', 'queued_eval', 'eval']),
  queued: new Set(['queued_init', 'queued_run', 'queued_eval']),
  running: new Set(['init', 'run', 'eval']),
  ended: TERMINAL,
};

/** The console's filters (GET /ui/api/jobs query). */
export interface JobQuery {
  /** A state, or `live`, `queued`, `running`, `ended`. */
  state?: string;
  data_source?: string;
  /** A critical_error value, `any` (some error) or `none`. */
  critical_error?: string;
  /** Substring of the job id, group id or instance id. */
  q?: string;
  limit?: number;
  /** `view` decides what a viewer may see (the tenant scope). */
  view?: (row: JobRow) => boolean;
}

/**
 * The jobs the console lists, kept from the job events: every live job and the newest `keep`
 * finished ones (older finished jobs still open by id from the result store). A job id that runs
 * twice keeps one row, the newest.
 */
export class JobIndex {
  private readonly live = new Map<string, JobRow>();
  /** Finished rows, oldest first (re-inserted when an id ends again). */
  private readonly ended = new Map<string, JobRow>();
  /**
   * A live iterator over `ended`, kept across calls: its next key is the oldest row. Asking a new
   * iterator for the first key walks every hole earlier deletions left in the Map (thousands at
   * `recent_jobs` 10,000: the largest cost of a job's events); a kept one has passed them already.
   */
  private oldest: MapIterator<string> | undefined;

  constructor(private readonly keep: number) {}

  /** Applies one job event. */
  apply(e: JobEvent): void {
    const prev = this.live.get(e.job_id);
    const row: JobRow = prev ?? {
      job_id: e.job_id,
      state: e.state,
      data_source: e.data_source,
      instance_id: e.instance_id,
      created_at: e.at,
      updated_at: e.at,
    };
    row.state = e.state;
    row.updated_at = e.at;
    if (e.group_id !== undefined) row.group_id = e.group_id;
    if (e.tenant !== undefined) row.tenant = e.tenant;
    if (!TERMINAL.has(e.state)) {
      if (!prev) {
        // A new run of an id that had ended: the live row replaces the finished one.
        this.ended.delete(e.job_id);
        this.live.set(e.job_id, row);
      }
      return;
    }
    row.ended_at = e.at;
    row.reward = e.reward;
    row.critical_error = e.critical_error;
    row.finish_reason = e.finish_reason;
    row.num_turns = e.num_turns;
    row.filter = e.filter;
    row.error = e.error;
    row.timing = e.timing;
    this.live.delete(e.job_id);
    this.ended.delete(e.job_id);
    if (this.keep === 0) return;
    this.ended.set(e.job_id, row);
    while (this.ended.size > this.keep) this.ended.delete(this.oldestKey()!);
  }

  /** The key of the oldest finished row (undefined when none is kept). */
  private oldestKey(): string | undefined {
    let k = this.oldest?.next();
    // A finished iterator stays finished: rows added since need a new one.
    if (!k || k.done) k = (this.oldest = this.ended.keys()).next();
    return k.done ? undefined : k.value;
  }

  /** The row of a job id, if kept. */
  get(id: string): JobRow | undefined {
    return this.live.get(id) ?? this.ended.get(id);
  }

  /** Live rows (admitted, not ended). */
  get liveCount(): number {
    return this.live.size;
  }

  /** Rows by state over what `view` lets the viewer see. */
  counts(view?: (row: JobRow) => boolean): Partial<Record<JobState, number>> {
    const out: Partial<Record<JobState, number>> = {};
    for (const m of [this.live, this.ended]) for (const r of m.values()) if (!view || view(r)) out[r.state] = (out[r.state] ?? 0) + 1;
    return out;
  }

  /** The rows matching `q`, newest change first. */
  query(q: JobQuery): JobList {
    const group = q.state ? STATE_GROUPS[q.state] : undefined;
    const needle = q.q?.toLowerCase();
    const sources = new Set<string>();
    const errors = new Set<string>();
    const match: JobRow[] = [];
    for (const m of [this.live, this.ended])
      for (const r of m.values()) {
        if (q.view && !q.view(r)) continue;
        sources.add(r.data_source);
        if (r.critical_error) errors.add(r.critical_error);
        if (q.state && (group ? !group.has(r.state) : r.state !== q.state)) continue;
        if (q.data_source && r.data_source !== q.data_source) continue;
        if (q.critical_error === 'any' && !r.critical_error) continue;
        if (q.critical_error === 'none' && r.critical_error) continue;
        if (q.critical_error && q.critical_error !== 'any' && q.critical_error !== 'none' && r.critical_error !== q.critical_error)
          continue;
        if (needle && !`${r.job_id}\n${r.group_id ?? ''}\n${r.instance_id ?? ''}`.toLowerCase().includes(needle)) continue;
        match.push(r);
      }
    match.sort((a, b) => b.updated_at - a.updated_at);
    return {
      jobs: match.slice(0, q.limit ?? 200),
      matched: match.length,
      by_state: this.counts(q.view),
      data_sources: [...sources].sort(),
      critical_errors: [...errors].sort(),
    };
  }
}
