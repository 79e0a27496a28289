import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import { CancelledError, RaasError } from '../protocol/errors.js';
import type { Result } from '../protocol/process.js';
import { systemClock, type Clock } from '../util/clock.js';
import { resolveToken } from '../util/secret.js';
import { RolloutClient, type ProcessInput } from './client.js';
import type { Attempt, FleetServerInfo, FleetStats, GroupRec, JobRec, RolloutFleetOptions, ServerState } from './fleet-types.js';

export type { FleetServerInfo, FleetStats, RolloutFleetOptions } from './fleet-types.js';
import { abortReason } from './transport.js';

/** How many times a job refused with 5xx (after the client's own retries) is tried again before its promise rejects. */
const MAX_REFUSALS = 5;

/**
 * Many rollout servers behind one submission API. A group goes as a whole to the healthy server
 * with the fewest in-flight jobs (so group affinity works inside that server); when a server stops
 * answering, its groups move elsewhere with the same job ids; when it comes back, results it
 * finished meanwhile are recovered through GET /jobs/:id. The first terminal result of a job id
 * counts; later ones are ignored.
 */
export class RolloutFleet {
  private readonly list: ServerState[];
  private readonly jobs = new Map<string, JobRec>();
  /** Groups waiting for a healthy server, oldest first. */
  private readonly pending: GroupRec[] = [];
  private readonly background = new Set<Promise<unknown>>();
  private readonly clock: Clock;
  private readonly intervalMs: number;
  private readonly unhealthyAfter: number;
  private readonly healthTimeoutMs: number;
  private timer: unknown;
  private rotate = 0;
  private closing: Promise<void> | undefined;
  private readonly counters: FleetStats = { submitted: 0, failed_over: 0, recovered: 0, duplicates: 0 };
  private readonly onChange: (() => void) | undefined;

  constructor(opts: RolloutFleetOptions) {
    if (opts.servers.length === 0) throw new RaasError('config_invalid', 'servers: give at least one rollout server {url}');
    this.clock = opts.clock ?? systemClock;
    this.intervalMs = opts.health_interval_ms ?? 2000;
    this.unhealthyAfter = Math.max(1, opts.unhealthy_after ?? 2);
    this.healthTimeoutMs = opts.health_timeout_ms ?? 2000;
    this.onChange = opts.on_change;
    const clientOpts = { retries: 2, backoff: { base_ms: 100, max_ms: 1000 }, ...opts.client, clock: this.clock };
    const seen = new Set<string>();
    this.list = opts.servers.map((s, i) => {
      const client = new RolloutClient({ ...clientOpts, url: s.url, token: resolveToken(s, `servers[${i}]`) });
      if (seen.has(client.url)) throw new RaasError('config_invalid', `servers[${i}].url: ${s.url} is listed twice`);
      seen.add(client.url);
      return { url: client.url, client, healthy: true, inFlight: 0, checking: false, failedChecks: 0 };
    });
    this.schedule();
  }

  /**
   * Sends a whole group to the server with the fewest in-flight jobs; one promise per job (first
   * terminal result wins). A job without `job_id` gets a random one. Every job is sent with
   * `attach: true`: failovers, refusals and resumes resend the same id and must find the job the
   * server already runs or finished, not start another. `opts.server` pins the group
   * to one server while it is healthy (re-attaching to jobs it already runs, e.g. after a resume).
   * When `opts.signal` aborts, the group's unsettled jobs are cancelled and their promises reject
   * with the signal's reason.
   */
  submitGroup(reqs: ProcessInput[], opts: { signal?: AbortSignal; server?: string } = {}): Array<Promise<Result>> {
    if (this.closing) return reqs.map(() => Promise.reject(new RaasError('not_ready', 'RolloutFleet is closed')));
    const group: GroupRec = { jobs: [] };
    const out: Array<Promise<Result>> = [];
    for (const r of reqs) {
      const id = r.job_id || randomUUID();
      const existing = this.jobs.get(id);
      if (existing) {
        out.push(existing.promise); // the same job id submitted twice is one job
        continue;
      }
      let resolve!: (r: Result) => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<Result>((res, rej) => ((resolve = res), (reject = rej)));
      const job: JobRec = {
        id,
        req: { ...r, job_id: id, attach: true },
        group,
        attempt: undefined,
        former: new Set(),
        cancelRequested: false,
        refusals: 0,
        settled: false,
        promise,
        resolve,
        reject,
      };
      this.jobs.set(id, job);
      group.jobs.push(job);
      out.push(promise);
      this.counters.submitted++;
    }
    if (group.jobs.length === 0) return out;
    if (opts.signal?.aborted) {
      for (const job of group.jobs) this.settle(job, { error: abortReason(opts.signal) });
      return out;
    }
    if (opts.signal) this.bindSignal(group, opts.signal);
    const pinned = opts.server === undefined ? undefined : this.list.find((s) => s.url === opts.server!.replace(/\/+$/, ''));
    this.place(group, pinned?.healthy ? pinned : undefined);
    return out;
  }

  /**
   * Cancels a job and resolves once the server acknowledged (its promise then settles with the
   * `critical_error:"cancelled"` result, or the finished result if it ended first). A job waiting
   * for a healthy server, or whose server is unreachable, is cancelled locally: its promise rejects
   * with CancelledError. Unknown or settled ids resolve at once.
   */
  async cancel(jobId: string): Promise<void> {
    const job = this.jobs.get(jobId);
    if (!job || job.settled) return;
    job.cancelRequested = true;
    for (const s of job.former) if (s.healthy) this.track(s.client.cancel(jobId, { retries: 0 }).catch(() => {}));
    const server = job.attempt?.server;
    if (!server) return this.settle(job, { error: new CancelledError(`job ${jobId} cancelled before a server held it`) });
    try {
      await server.client.cancel(jobId); // an id that ended meanwhile answers too: its result is on the way
    } catch (err) {
      this.settle(job, {
        error: new CancelledError(`job ${jobId} cancelled locally: ${server.url} did not acknowledge (${(err as Error).message})`),
      });
    }
  }

  /** Jobs submitted and not settled. */
  inFlight(): number {
    return this.jobs.size;
  }

  /** Each server's health and in-flight jobs. */
  servers(): FleetServerInfo[] {
    return this.list.map((s) => ({ url: s.url, healthy: s.healthy, in_flight: s.inFlight, run_workers: s.runSize ?? null }));
  }

  /**
   * Reads every server's workers.run.size (its max for a self-sizing pool) (GET /status). A server that cannot be reached is marked
   * down (its size is read when it answers again); other errors (a refused token) reject, and so does
   * a fleet where no server answers.
   */
  async readCapacity(opts: { signal?: AbortSignal } = {}): Promise<void> {
    const errors = await Promise.all(this.list.map((s) => this.readSize(s, opts.signal)));
    const other = errors.find((e) => e !== undefined && !(e instanceof RaasError && e.code === 'server_unreachable'));
    if (other) throw other;
    if (this.list.every((s) => s.runSize === undefined)) {
      throw new RaasError(
        'server_unreachable',
        `no rollout server answers GET /status (${this.list.map((s) => s.url).join(', ')}); start \`raas serve\` or check the servers' URLs`,
      );
    }
  }

  /**
   * The admission cap over the servers that are up now. Without `configured`: the sum of their
   * workers.run.size. With it (max_inflight_jobs, meant for the whole fleet): its share for the live
   * servers, in proportion to their workers. So when a server goes down its share leaves with it
   * instead of piling onto the others, and comes back with it. A server whose size is not known yet
   * counts as the mean of the known ones.
   */
  liveCapacity(configured?: number): number {
    const known = this.list.filter((s) => s.runSize !== undefined);
    const mean = known.length ? known.reduce((a, s) => a + s.runSize!, 0) / known.length : 0;
    let live = 0;
    let total = 0;
    for (const s of this.list) {
      const size = s.runSize ?? mean;
      total += size;
      if (s.healthy) live += size;
    }
    if (configured === undefined) return Math.round(live);
    return total > 0 ? Math.round((configured * live) / total) : configured;
  }

  /** Counters of submissions, failovers, recoveries and ignored duplicates. */
  stats(): FleetStats {
    return { ...this.counters };
  }

  /** The server currently holding a job (for checkpoints: resubmit with `{server}` to re-attach). */
  serverOf(jobId: string): string | undefined {
    return this.jobs.get(jobId)?.attempt?.server.url;
  }

  /** The per-server clients, for status and LLM-server routes (placement, weight updates). */
  clients(): RolloutClient[] {
    return this.list.map((s) => s.client);
  }

  /**
   * Hints every healthy server at the instances it may run soon (POST /prefetch), so whichever gets
   * them finds their images unpacked. Best effort: a server that does not answer, or predates the
   * route, is skipped. Resolves with the number of servers that took the hint.
   */
  async prefetch(instances: Array<Record<string, unknown>>, opts: { signal?: AbortSignal } = {}): Promise<number> {
    if (instances.length === 0 || this.closing) return 0;
    const answers = await Promise.all(
      this.list
        .filter((s) => s.healthy)
        .map((s) =>
          s.client.prefetch(instances, { retries: 0, timeout_ms: 10_000, signal: opts.signal }).then(
            () => 1,
            () => 0,
          ),
        ),
    );
    return answers.reduce<number>((a, b) => a + b, 0);
  }

  /** Checks every server now (the periodic check also runs on its own). */
  async checkHealth(): Promise<void> {
    await Promise.all(this.list.map((s) => this.check(s)));
  }

  /**
   * Stops health checks, ends the local wait of every unsettled job (rejecting with CancelledError;
   * jobs keep running on their servers: cancel them first if they must stop), frees sockets. Safe twice.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
      for (const job of [...this.jobs.values()]) this.settle(job, { error: new CancelledError('RolloutFleet closed') });
      this.pending.length = 0;
      await Promise.allSettled([...this.background]);
      for (const s of this.list) s.client.close();
    })();
    return this.closing;
  }

  private place(group: GroupRec, preferred?: ServerState): void {
    const jobs = group.jobs.filter((j) => !j.settled && !j.attempt);
    if (jobs.length === 0) return;
    const server = preferred ?? this.leastLoaded();
    if (!server) {
      if (!this.pending.includes(group)) this.pending.push(group);
      return;
    }
    for (const j of jobs) this.launch(j, server);
  }

  /** The healthy server with the fewest in-flight jobs; ties rotate so an idle fleet fills evenly. */
  private leastLoaded(exclude?: ReadonlySet<ServerState>): ServerState | undefined {
    let best: ServerState | undefined;
    const n = this.list.length;
    for (let k = 0; k < n; k++) {
      const s = this.list[(this.rotate + k) % n];
      if (s.healthy && !exclude?.has(s) && (best === undefined || s.inFlight < best.inFlight)) best = s;
    }
    this.rotate = (this.rotate + 1) % n;
    return best;
  }

  private launch(job: JobRec, server: ServerState): void {
    const attempt: Attempt = { server, ac: new AbortController(), released: false };
    job.attempt = attempt;
    server.inFlight++;
    server.client.process(job.req, { signal: attempt.ac.signal, cancelOnAbort: false }).then(
      (result) => {
        this.release(attempt);
        if (job.settled)
          this.counters.duplicates++; // e.g. the cancelled copy after a recovery
        else if (job.attempt !== attempt) return;
        else if (result.critical_error === 'cancelled' && !job.cancelRequested && this.relocate(job, server)) return;
        else this.settle(job, { result });
      },
      (err: unknown) => {
        this.release(attempt);
        if (job.settled || job.attempt !== attempt) return; // superseded by a failover, a cancel or close
        if (err instanceof RaasError && err.code === 'server_unreachable') this.markDown(server, err);
        else if (err instanceof RaasError && err.retryable && job.refusals++ < MAX_REFUSALS) this.retryElsewhere(job, server);
        else this.settle(job, { error: err });
      },
    );
  }

  private release(attempt: Attempt): void {
    if (attempt.released) return;
    attempt.released = true;
    attempt.server.inFlight--;
  }

  /** Stops waiting on an attempt without cancelling on its server (it is unreachable, or we are closing). */
  private abandon(attempt: Attempt | undefined): void {
    if (!attempt) return;
    this.release(attempt);
    attempt.ac.abort();
  }

  /**
   * Settles a job once. `keepAttempt` leaves its current attempt running so that the answer to the
   * cancel we send it arrives (and is counted as an ignored duplicate) and its slot stays counted.
   */
  private settle(job: JobRec, outcome: { result?: Result; error?: unknown }, keepAttempt = false): void {
    if (job.settled) {
      this.counters.duplicates++;
      return;
    }
    job.settled = true;
    if (this.jobs.get(job.id) === job) this.jobs.delete(job.id);
    if (!keepAttempt) this.abandon(job.attempt);
    if (outcome.result) job.resolve(outcome.result);
    else job.reject(outcome.error);
  }

  /** A server stopped answering: move every group it holds to another server, same job ids. */
  private markDown(server: ServerState, _why: unknown): void {
    if (!server.healthy) return;
    server.healthy = false;
    this.changed();
    const groups = new Set<GroupRec>();
    for (const job of this.jobs.values()) if (job.attempt?.server === server) groups.add(job.group);
    for (const group of groups) {
      for (const job of group.jobs) {
        if (job.settled || job.attempt?.server !== server) continue;
        if (job.cancelRequested) {
          this.settle(job, { error: new CancelledError(`job ${job.id} cancelled; ${server.url} stopped answering before confirming`) });
          continue;
        }
        this.abandon(job.attempt);
        job.attempt = undefined;
        job.former.add(server);
        this.counters.failed_over++;
      }
      this.place(group);
    }
  }

  /**
   * The server cancelled a job nobody here asked to cancel: it is shutting down or was told to
   * /stop. Run the job on another server that never held it (the group's other moved jobs go to
   * the same one); false when there is none, and the cancelled result stands.
   */
  private relocate(job: JobRec, server: ServerState): boolean {
    const exclude = new Set([...job.former, server]);
    const g = job.group;
    const target = g.moveTarget?.healthy && !exclude.has(g.moveTarget) ? g.moveTarget : this.leastLoaded(exclude);
    if (!target) return false;
    g.moveTarget = target;
    job.attempt = undefined;
    job.former.add(server);
    this.counters.failed_over++;
    this.launch(job, target);
    return true;
  }

  /**
   * A live server refused the job past the client's retries (503 queue_full / server_stopped /
   * no_llm_backends, or another 5xx): it is not down, so it keeps its other jobs; this one goes to
   * another server (where the group's refused jobs gather), or back to the same one if it is alone.
   */
  private retryElsewhere(job: JobRec, server: ServerState): void {
    const g = job.group;
    const target = g.moveTarget?.healthy && g.moveTarget !== server ? g.moveTarget : (this.leastLoaded(new Set([server])) ?? server);
    if (target !== server) g.moveTarget = target;
    job.attempt = undefined;
    this.launch(job, target);
  }

  /** A server answers again: recover what it finished meanwhile, then place waiting groups. */
  private markUp(server: ServerState): void {
    server.healthy = true;
    this.changed();
    // It may have restarted with another number of workers.
    this.track(this.readSize(server));
    // A server back after a long outage may owe thousands of results: ask for them a few at a time.
    const limit = pLimit(16);
    for (const job of this.jobs.values()) if (job.former.has(server)) this.track(limit(() => this.recover(job, server)));
    const waiting = this.pending.splice(0);
    for (const g of waiting) this.place(g);
  }

  private async recover(job: JobRec, server: ServerState): Promise<void> {
    let res: Awaited<ReturnType<typeof server.client.job>>;
    try {
      res = await server.client.job(job.id, { retries: 1 });
    } catch {
      return; // it went away again; the copy elsewhere continues
    }
    if (job.settled) return;
    if (res?.result && res.result.critical_error !== 'cancelled') {
      const copy = job.attempt?.server;
      this.counters.recovered++;
      this.settle(job, { result: res.result }, true);
      // The copy we started elsewhere is now a duplicate: stop it so it does not burn rollout time.
      if (copy && copy !== server) this.track(copy.client.cancel(job.id, { retries: 1 }).catch(() => {}));
    } else if (res && !res.result && job.attempt?.server !== server) {
      // Still running there: a stale duplicate of the moved job. It stays in `former`, since that
      // server's copy of this id is now cancelled and must not be attached to again.
      this.track(server.client.cancel(job.id, { retries: 1 }).catch(() => {}));
    } else if (!res) {
      job.former.delete(server); // lost in a crash or expired: the moved copy is the only one
    }
  }

  /** Reads one server's workers.run.size; answers the error instead of throwing (marking it down when unreachable). */
  private async readSize(server: ServerState, signal?: AbortSignal): Promise<unknown> {
    try {
      const st = await server.client.status({ signal });
      if (this.closing) return undefined;
      // A self-sizing RUN pool (workers: auto) grows with its queue: offer it up to its bound.
      const run = st.workers.run;
      const size = run.mode === 'auto' ? (run.max ?? run.size) : run.size;
      if (server.runSize !== size) {
        server.runSize = size;
        this.changed();
      }
      return undefined;
    } catch (err) {
      if (err instanceof RaasError && err.code === 'server_unreachable' && !signal?.aborted) this.markDown(server, err);
      return err;
    }
  }

  /** Tells the owner (on a later microtask, outside whatever handler changed it) that the live capacity may differ. */
  private changed(): void {
    const fn = this.onChange;
    if (fn && !this.closing)
      queueMicrotask(() => {
        if (!this.closing) fn();
      });
  }

  private async check(server: ServerState): Promise<void> {
    if (server.checking || this.closing) return;
    server.checking = true;
    try {
      const ok = await server.client.health({ timeout_ms: this.healthTimeoutMs });
      if (this.closing) return;
      server.failedChecks = ok ? 0 : server.failedChecks + 1;
      if (ok && !server.healthy) this.markUp(server);
      else if (ok && server.runSize === undefined) this.track(this.readSize(server));
      else if (server.healthy && server.failedChecks >= this.unhealthyAfter) {
        this.markDown(server, new RaasError('server_unreachable', `${server.url}: ${server.failedChecks} health checks failed`));
      }
    } finally {
      server.checking = false;
    }
  }

  private schedule(): void {
    if (this.closing) return;
    this.timer = this.clock.setTimeout(() => {
      this.track(this.checkHealth().finally(() => this.schedule()));
    }, this.intervalMs);
    (this.timer as { unref?: () => void } | undefined)?.unref?.();
  }

  private bindSignal(group: GroupRec, signal: AbortSignal): void {
    const onAbort = (): void => {
      const i = this.pending.indexOf(group);
      if (i >= 0) this.pending.splice(i, 1);
      for (const job of group.jobs) {
        if (job.settled) continue;
        const server = job.attempt?.server;
        job.cancelRequested = true;
        this.settle(job, { error: abortReason(signal) });
        if (server?.healthy) this.track(server.client.cancel(job.id, { retries: 1 }).catch(() => {}));
      }
    };
    signal.addEventListener('abort', onAbort, { once: true });
    void Promise.allSettled(group.jobs.map((j) => j.promise)).then(() => signal.removeEventListener('abort', onAbort));
  }

  private track(p: Promise<unknown>): void {
    const q = p.catch(() => {}).finally(() => this.background.delete(q));
    this.background.add(q);
  }
}
