import type { Job } from './job.js';

/**
 * The unfinished jobs by key (the job id, scoped by tenant: scope.ts), oldest first; several under
 * one key when clients reuse an id, as ProRL allows. Each tenant's count of live jobs follows.
 */
export class LiveJobIndex {
  private readonly byKey = new Map<string, Job[]>();
  private count = 0;

  /** Live jobs in all. */
  get total(): number {
    return this.count;
  }

  /** Keys with a live job (for leak checks). */
  get keys(): number {
    return this.byKey.size;
  }

  get(key: string): Job[] | undefined {
    return this.byKey.get(key);
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  add(key: string, job: Job): void {
    const same = this.byKey.get(key);
    if (same) same.push(job);
    else this.byKey.set(key, [job]);
    this.count++;
    if (job.tenant) job.tenant.live++;
  }

  /** Removes an ended job (once). */
  remove(job: Job): void {
    const key = job.tenant ? job.tenant.key(job.id) : job.id;
    const jobs = this.byKey.get(key);
    const i = jobs?.indexOf(job) ?? -1;
    if (i < 0) return;
    this.count--;
    if (job.tenant) job.tenant.live--;
    if (jobs!.length === 1) this.byKey.delete(key);
    else jobs!.splice(i, 1);
  }

  *all(): Iterable<Job> {
    for (const jobs of this.byKey.values()) yield* jobs;
  }
}
