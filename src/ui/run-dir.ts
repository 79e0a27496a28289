import { existsSync } from 'node:fs';
import { readFile, readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Batch, Group, Rollout } from '../protocol/batch.js';
import { RaasError } from '../protocol/errors.js';
import type { GroupRow, RolloutRow, RunView, StepRow, StepView } from './model.js';

/** A group of a step that did not reach its batch, as `groups.jsonl` records it (raas train writes one line per such group). */
export interface RejectedGroup {
  step: number;
  group_id: string;
  instance_id: string | number | null;
  data_source: string;
  verdict: 'filtered' | 'dropped_error' | 'dropped_stale' | 'cancelled';
  rewards: number[];
  errors?: number;
  /** The group's rollouts that ended (a cancelled group may have fewer than n). */
  rollouts: Array<Partial<Rollout> & { job_id: string; reward: number; critical_error?: string | null; error?: string | null }>;
}

/** Parses JSON lines, skipping a line cut by a kill (the last one of a file still being written). */
function jsonLines(text: string): unknown[] {
  const out: unknown[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // a torn line: the writer is mid-append, or was killed there
    }
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A rollout's row for a step's group table. */
function rolloutRow(r: Partial<Rollout> & { job_id: string; critical_error?: string | null }, openable: boolean): RolloutRow {
  const mask = r.tokens?.response_mask;
  return {
    job_id: r.job_id,
    trajectory_id: r.trajectory_id ?? null,
    reward: typeof r.reward === 'number' ? r.reward : null,
    ...(r.shaped_reward !== undefined ? { shaped_reward: r.shaped_reward } : {}),
    ...(r.advantage !== undefined ? { advantage: r.advantage } : {}),
    ...(r.staleness !== undefined ? { staleness: r.staleness } : {}),
    ...(r.finish_reason !== undefined ? { finish_reason: r.finish_reason } : {}),
    ...(r.num_turns !== undefined ? { num_turns: r.num_turns } : {}),
    ...(Array.isArray(mask) ? { response_tokens: mask.reduce((a: number, b) => a + b, 0) } : {}),
    ...(r.critical_error ? { critical_error: r.critical_error } : {}),
    openable,
  };
}

/**
 * Reads the outputs of a `raas train` run directory (docs/batch-format.md): the per-step records
 * (`metrics.jsonl`, else `summary.json`), the batch of a step (`batches/step-<k>.json`, else its
 * line of `batches.jsonl`), the groups outside the batch (`groups.jsonl`, else `prompts.jsonl`) and
 * one rollout. Every read goes to the files, so a run still being written is read as it stands; a
 * torn last line is skipped. The console's run view serves it, and a text printer can use it as is.
 */
export class RunDir {
  readonly dir: string;
  /** The last batches read (step files can be large: a trajectory page and its step table share one). */
  private readonly cache = new Map<number, { mtimeMs: number; batch: Batch }>();

  constructor(dir: string) {
    this.dir = path.resolve(dir);
  }

  get name(): string {
    return path.basename(this.dir);
  }

  /** Refuses a path that is not a run directory, naming what was looked for. */
  async check(): Promise<void> {
    let s: Awaited<ReturnType<typeof stat>>;
    try {
      s = await stat(this.dir);
    } catch {
      throw new RaasError('config_invalid', `${this.dir} does not exist: give a run directory (raas train writes runs/<name>/)`);
    }
    if (!s.isDirectory()) throw new RaasError('config_invalid', `${this.dir} is not a directory: give a run directory such as runs/demo`);
    const known = ['metrics.jsonl', 'summary.json', 'batches.jsonl', 'batches', 'config.json', 'checkpoint.json'];
    if (!known.some((f) => existsSync(path.join(this.dir, f))))
      throw new RaasError(
        'config_invalid',
        `${this.dir} has none of ${known.join(', ')}: it is not (yet) a run directory; raas train writes them once the run starts`,
      );
  }

  private realDir: Promise<string> | undefined;

  /**
   * Where a file of the run really is, refused when a symbolic link leads it out of the run
   * directory: the view serves what it reads to whoever reaches its port, and a run directory on a
   * shared filesystem may be written by others (a link to the viewer's own files would be served).
   * Throws ENOENT as the filesystem does.
   */
  private async inside(rel: string): Promise<string> {
    const root = await (this.realDir ??= realpath(this.dir).catch((err: unknown) => {
      this.realDir = undefined;
      throw err;
    }));
    const real = await realpath(path.join(this.dir, rel));
    if (real !== root && !real.startsWith(root + path.sep))
      throw new RaasError(
        'forbidden',
        `${rel} in ${this.dir} is a link that leads outside the run directory: the run view reads only the run's own files`,
      );
    return real;
  }

  private async text(file: string): Promise<string | undefined> {
    try {
      return await readFile(await this.inside(file), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  /** summary.json as written (undefined before the first step). */
  async summary(): Promise<Record<string, unknown> | undefined> {
    const t = await this.text('summary.json');
    if (t === undefined) return undefined;
    try {
      const v = JSON.parse(t) as unknown;
      return isObject(v) ? v : undefined;
    } catch {
      return undefined;
    }
  }

  /** One row per finished step: metrics.jsonl's records, else summary.json's steps. */
  async steps(): Promise<StepRow[]> {
    const t = await this.text('metrics.jsonl');
    const rows = t === undefined ? [] : jsonLines(t).filter((r): r is StepRow => isObject(r) && typeof r.step === 'number');
    if (rows.length > 0) return rows;
    const s = await this.summary();
    return Array.isArray(s?.steps) ? (s.steps as unknown[]).filter((r): r is StepRow => isObject(r) && typeof r.step === 'number') : [];
  }

  /** Steps that have a batch file. */
  async stepFiles(): Promise<number[]> {
    let names: string[];
    try {
      names = await readdir(await this.inside('batches'));
    } catch (err) {
      if (err instanceof RaasError) throw err;
      return [];
    }
    return names
      .map((f) => /^step-(\d+)\.json$/.exec(f))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
  }

  /** The batch of a step: its step file, else its line of batches.jsonl. */
  async batch(step: number): Promise<Batch> {
    if (!Number.isInteger(step) || step < 0) throw new RaasError('bad_request', `step: send a step number (0, 1, …), got ${step}`);
    let file = '';
    let mtimeMs = -1;
    try {
      file = await this.inside(path.join('batches', `step-${step}.json`));
      mtimeMs = (await stat(file)).mtimeMs;
    } catch (err) {
      if (err instanceof RaasError) throw err;
      // no step file: batches.jsonl below
    }
    const hit = this.cache.get(step);
    if (hit && hit.mtimeMs === mtimeMs && mtimeMs >= 0) return hit.batch;
    let batch: Batch | undefined;
    if (mtimeMs >= 0) batch = JSON.parse(await readFile(file, 'utf8')) as Batch;
    else {
      const t = await this.text('batches.jsonl');
      batch = t === undefined ? undefined : (jsonLines(t).find((b) => isObject(b) && b.step === step) as Batch | undefined);
    }
    if (!batch)
      throw new RaasError(
        'route_not_found',
        `step ${step} has no batch in ${this.dir} (no batches/step-${step}.json, no line of batches.jsonl)`,
      );
    this.cache.set(step, { mtimeMs, batch });
    while (this.cache.size > 2) this.cache.delete(this.cache.keys().next().value!);
    return batch;
  }

  /** Groups of a step outside its batch: groups.jsonl's (with their rollouts), else prompts.jsonl's (rewards only). */
  async rejected(step: number): Promise<{ source: string | null; groups: RejectedGroup[] }> {
    const g = await this.text('groups.jsonl');
    if (g !== undefined)
      return {
        source: 'groups.jsonl',
        groups: jsonLines(g).filter((r): r is RejectedGroup => isObject(r) && r.step === step) as RejectedGroup[],
      };
    const p = await this.text('prompts.jsonl');
    if (p === undefined) return { source: null, groups: [] };
    const out: RejectedGroup[] = [];
    for (const rec of jsonLines(p)) {
      if (!isObject(rec) || !Array.isArray(rec.groups)) continue;
      for (const h of rec.groups as Array<Record<string, unknown>>)
        if (h.step === step && h.verdict !== 'accepted')
          out.push({
            step,
            group_id: '',
            instance_id: (rec.instance_id as string | number) ?? null,
            data_source: String(rec.data_source ?? ''),
            verdict: h.verdict as RejectedGroup['verdict'],
            rewards: Array.isArray(h.rewards) ? (h.rewards as number[]) : [],
            errors: typeof h.errors === 'number' ? h.errors : 0,
            rollouts: [],
          });
    }
    return { source: 'prompts.jsonl', groups: out };
  }

  /** One rollout of a step: from its batch, else from the step's groups outside the batch. */
  async rollout(
    step: number,
    jobId: string,
  ): Promise<{ rollout: RejectedGroup['rollouts'][number]; group: Group | RejectedGroup; batch?: Batch }> {
    const batch = await this.batch(step).catch(() => undefined);
    for (const group of batch?.groups ?? []) {
      const rollout = group.rollouts.find((r) => r.job_id === jobId);
      if (rollout) return { rollout, group, batch };
    }
    for (const group of (await this.rejected(step)).groups) {
      const rollout = group.rollouts.find((r) => r.job_id === jobId);
      if (rollout) return { rollout, group };
    }
    throw new RaasError('job_not_found', `no rollout ${JSON.stringify(jobId)} in step ${step} of ${this.dir}`);
  }

  /** The run view's overview. `activeSince` is the wall-clock ms after which a change counts as recent. */
  async view(updatedAt: number | null, now: number): Promise<RunView> {
    const summary = await this.summary();
    const { steps: _s, ...rest } = summary ?? {};
    return {
      dir: this.dir,
      name: this.name,
      steps: await this.steps(),
      summary: summary ? rest : null,
      step_files: await this.stepFiles(),
      active: updatedAt !== null && now - updatedAt < 60_000,
      updated_at: updatedAt,
    };
  }

  /** A step's groups: the batch's (accepted) and the others the run recorded. */
  async stepView(step: number): Promise<StepView> {
    const batch = await this.batch(step);
    const rejected = await this.rejected(step);
    const groups: GroupRow[] = batch.groups.map((g) => ({
      group_id: g.group_id,
      instance_id: g.instance_id,
      data_source: g.data_source,
      verdict: 'accepted',
      rewards: g.rollouts.map((r) => r.reward),
      rollouts: g.rollouts.map((r) => rolloutRow(r, true)),
    }));
    for (const g of rejected.groups)
      groups.push({
        group_id: g.group_id || null,
        instance_id: g.instance_id,
        data_source: g.data_source,
        verdict: g.verdict,
        rewards: g.rewards,
        ...(g.errors ? { errors: g.errors } : {}),
        rollouts: g.rollouts.map((r) => rolloutRow(r, true)),
      });
    return { step, policy_version: batch.policy_version, stats: batch.stats, groups, rejected_source: rejected.source };
  }
}
