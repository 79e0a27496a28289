import { randomUUID } from 'node:crypto';
import pLimit from 'p-limit';
import { CancelledError, RaasError } from '../protocol/errors.js';
import type { Result } from '../protocol/process.js';
import { systemClock, type Clock } from '../util/clock.js';
import { resolveToken } from '../util/secret.js';
import { RolloutClient, type ProcessInput, type RolloutClientOptions } from './client.js';
import { Membership } from './membership.js';
import { FleetServers } from './fleet-servers.js';
import type { Attempt, FleetServerInfo, FleetStats, GroupRec, JobRec, RolloutFleetOptions, ServerState } from './fleet-types.js';

export type { FleetServerInfo, FleetStats, RolloutFleetOptions } from './fleet-types.js';
import { abortReason } from './transport.js';

/** How many times a job refused with 5xx (after the client's own retries) is tried again before its promise rejects. */
const MAX_REFUSALS = 5;

/**
 * Cancels and job look-ups in flight per server. Every held /process answer already occupies a
 * socket; a burst of cancels (a handover's stale groups, a close with thousands of jobs) must not
 * open as many more sockets again.
 */
const CONTROL_CONCURRENCY = 4;

/**
 * Many rollout servers behind one submission API. A group goes as a whole to the healthy server
 * with the fewest in-flight jobs (so group affinity works inside that server); when a server stops
 * answering, its groups move elsewhere with the same job ids; when it comes back, results it
 * finished meanwhile are recovered through GET /jobs/:id. The first terminal result of a job id
 * counts; later ones are ignored.
 */
export class RolloutFleet {
  private readonly fleet = new FleetServers();
  private readonly jobs = new Map<string, JobRec>();
  /** Groups waiting for a healthy server, oldest first. */
  private readonly pending: GroupRec[] = [];
  private readonly background = new Set<Promise<unknown>>();
  private readonly clock: Clock;
  private readonly intervalMs: number;
  private readonly unhealthyAfter: number;
  private readonly healthTimeoutMs: number;
  private timer: unknown;
  /** Where the next periodic round of health checks starts. */
  private probeFrom = 0;
  private readonly probesPerS: number;
  /** liveCapacity's answer per `configured`, until a server's health, size or membership changes. */
  private capacityCache: { configured: number | undefined; value: number } | undefined;
  private closing: Promise<void> | undefined;
  private readonly counters: FleetStats = { submitted: 0, failed_over: 0, recovered: 0, duplicates: 0 };
  private readonly onChange: (() => void) | undefined;
  private readonly clientOpts: Omit<RolloutClientOptions, 'url' | 'token'>;
  private readonly membership: Membership | undefined;

  constructor(opts: RolloutFleetOptions) {
    if (opts.servers.length === 0 && !opts.registry)
      throw new RaasError('config_invalid', 'servers: give at least one rollout server {url}, or a registry');
    this.clock = opts.clock ?? systemClock;
    this.intervalMs = opts.health_interval_ms ?? 2000;
    this.unhealthyAfter = Math.max(1, opts.unhealthy_after ?? 2);
    this.healthTimeoutMs = opts.health_timeout_ms ?? 2000;
    this.probesPerS = opts.health_probes_per_s ?? 64;
    this.onChange = opts.on_change;
    this.clientOpts = { retries: 2, backoff: { base_ms: 100, max_ms: 1000 }, ...opts.client, clock: this.clock };
    opts.servers.forEach((s, i) => {
      const url = this.addServer(s.url, resolveToken(s, `servers[${i}]`));
      if (!url) throw new RaasError('config_invalid', `servers[${i}].url: ${s.url} is listed twice`);
    });
    if (opts.registry) this.membership = new Membership(this, opts.registry, this.clock, this.clientOpts, opts.on_membership);
    this.schedule();
  }

  /**
   * Adds a rollout server (a registry's new node, or one given by hand): it gets groups from the
   * next placement on. Answers its URL, or undefined when the fleet already has it.
   */
  addServer(url: string, token?: string): string | undefined {
    const client = new RolloutClient({ ...this.clientOpts, url, token });
    if (this.fleet.find(client.url)) {
      client.close();
      return undefined;
    }
    const joined = this.membership !== undefined;
    this.fleet.list.push({
      url: client.url,
      client,
      healthy: true,
      inFlight: 0,
      checking: false,
      failedChecks: 0,
      draining: false,
      joined,
      noBackends: joined,
      lastAnswer: Number.NEGATIVE_INFINITY,
      control: pLimit(CONTROL_CONCURRENCY),
    });
    if (joined) this.track(this.readSize(this.fleet.list.at(-1)!));
    this.changed();
    // Groups that waited for a server go there now.
    for (const g of this.pending.splice(0)) this.place(g);
    return client.url;
  }

  /** A server takes no new groups (it drains): the groups it holds finish there. */
  drainServer(url: string): void {
    const s = this.byUrl(url);
    if (!s || s.draining) return;
    s.draining = true;
    this.changed();
  }

  /**
   * Removes a server that left: anything it still held moves to the others (as when a server
   * dies); its client is closed once nothing waits on it.
   */
  removeServer(url: string): void {
    const s = this.byUrl(url);
    if (!s) return;
    this.markDown(s, new RaasError('server_unreachable', `${url} left the fleet`));
    this.fleet.list.splice(this.fleet.list.indexOf(s), 1);
    this.changed();
    if (s.inFlight === 0) s.client.close();
  }

  /** A server its registry reports dead (missed heartbeats): handled as one whose health checks failed. */
  serverLost(url: string): void {
    const s = this.byUrl(url);
    if (s?.healthy) this.markDown(s, new RaasError('server_unreachable', `${url} missed its heartbeats`));
  }

  private byUrl(url: string): ServerState | undefined {
    return this.fleet.find(url);
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
    const pinned = opts.server === undefined ? undefined : this.byUrl(opts.server);
    this.place(group, pinned?.healthy && !pinned.draining ? pinned : undefined);
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
    for (const s of job.former) if (s.healthy) this.cancelOn(s, jobId, 0);
    const server = job.attempt?.server;
    if (!server) return this.settle(job, { error: new CancelledError(`job ${jobId} cancelled before a server held it`) });
    try {
      await server.control(() => server.client.cancel(jobId)); // an id that ended meanwhile answers too: its result is on the way
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
    return this.fleet.infos();
  }

  /**
   * Reads every server's workers.run.size (its max for a self-sizing pool) (GET /status). A server that cannot be reached is marked
   * down (its size is read when it answers again); other errors (a refused token) reject, and so does
   * a fleet where no server answers.
   */
  async readCapacity(opts: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.membership) await this.membership.ready(opts.signal);
    const errors = await Promise.all(this.fleet.list.map((s) => this.readSize(s, opts.signal)));
    const other = errors.find((e) => e !== undefined && !(e instanceof RaasError && e.code === 'server_unreachable'));
    if (other) throw other;
    if (this.fleet.list.every((s) => s.runSize === undefined)) {
      throw new RaasError(
        'server_unreachable',
        `no rollout server answers GET /status (${this.fleet.list.map((s) => s.url).join(', ') || 'the registry lists none'}); start \`raas serve\` or check the servers' URLs`,
      );
    }
  }

  /** The admission cap over the servers that take groups now (fleet-servers.ts). */
  liveCapacity(configured?: number): number {
    // Read after every result by the coordinator: computed once per change, not per call.
    const c = this.capacityCache;
    if (c && c.configured === configured) return c.value;
    const value = this.fleet.liveCapacity(configured);
    this.capacityCache = { configured, value };
    return value;
  }

  /** Counters of submissions, failovers, recoveries and ignored duplicates. */
  stats(): FleetStats {
    return { ...this.counters };
  }

  /** The server currently holding a job (for checkpoints: resubmit with `{server}` to re-attach). */
  serverOf(jobId: string): string | undefined {
    return this.jobs.get(jobId)?.attempt?.server.url;
  }

  /**
   * The per-server clients, for status and LLM-server routes (placement, weight updates);
   * `{taking: true}` leaves out servers that drain (they get no new groups, so no new backends).
   */
  clients(opts: { taking?: boolean } = {}): RolloutClient[] {
    return this.fleet.clients(opts);
  }

  /**
   * Hints every healthy server at the instances it may run soon (POST /prefetch), so whichever gets
   * them finds their images unpacked. Best effort: a server that does not answer, or predates the
   * route, is skipped. Resolves with the number of servers that took the hint.
   */
  async prefetch(instances: Array<Record<string, unknown>>, opts: { signal?: AbortSignal } = {}): Promise<number> {
    if (instances.length === 0 || this.closing) return 0;
    const answers = await Promise.all(
      this.fleet.list
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
  /** On a multi-tenant server, the tenant this fleet's token names (from GET /status); else undefined. */
  tenant: string | undefined;

  /** Checks every server now (the periodic check also runs on its own). */
  async checkHealth(): Promise<void> {
    await Promise.all(this.fleet.list.map((s) => this.check(s)));
  }

  /**
   * Stops health checks, ends the local wait of every unsettled job (rejecting with CancelledError;
   * jobs keep running on their servers: cancel them first if they must stop), frees sockets. Safe twice.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
      this.membership?.close();
      for (const job of [...this.jobs.values()]) this.settle(job, { error: new CancelledError('RolloutFleet closed') });
      this.pending.length = 0;
      await Promise.allSettled([...this.background]);
      for (const s of this.fleet.list) s.client.close();
    })();
    return this.closing;
  }

  private place(group: GroupRec, preferred?: ServerState): void {
    const jobs = group.jobs.filter((j) => !j.settled && !j.attempt);
    if (jobs.length === 0) return;
    const server = preferred ?? this.fleet.leastLoaded();
    if (!server) {
      if (!this.pending.includes(group)) this.pending.push(group);
      return;
    }
    for (const j of jobs) this.launch(j, server);
  }

  /** Reads /status again of the servers that joined without a backend (after a placement: they may take groups now). */
  async refresh(): Promise<void> {
    const waiting = this.fleet.list.filter((s) => s.joined && s.noBackends);
    if (waiting.length === 0) return;
    await Promise.all(waiting.map((s) => this.readSize(s)));
    for (const g of this.pending.splice(0)) this.place(g);
  }

  private launch(job: JobRec, server: ServerState): void {
    const attempt: Attempt = { server, ac: new AbortController(), released: false };
    job.attempt = attempt;
    server.inFlight++;
    server.client.process(job.req, { signal: attempt.ac.signal, cancelOnAbort: false }).then(
      (result) => {
        this.release(attempt);
        server.lastAnswer = this.clock.now();
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
        else if (err instanceof RaasError && err.code === 'server_draining' && !server.draining) {
          // It drains: nothing new goes there, and this job goes elsewhere (not counted as a refusal).
          this.drainServer(server.url);
          this.retryElsewhere(job, server);
        } else if (err instanceof RaasError && err.code === 'no_llm_backends' && server.joined && !server.noBackends) {
          // A server that joined before its backends were placed: wait for them, run the job elsewhere.
          server.noBackends = true;
          this.changed();
          this.retryElsewhere(job, server);
        } else if (err instanceof RaasError && err.retryable && job.refusals++ < MAX_REFUSALS) this.retryElsewhere(job, server);
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
    // An attempt whose answer arrived has nothing left to stop (aborting would only build an
    // AbortError per job, a stack trace included).
    if (!attempt || attempt.released) return;
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
    const target = g.moveTarget?.healthy && !exclude.has(g.moveTarget) ? g.moveTarget : this.fleet.leastLoaded(exclude);
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
    const target = g.moveTarget?.healthy && g.moveTarget !== server ? g.moveTarget : (this.fleet.leastLoaded(new Set([server])) ?? server);
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
    for (const job of this.jobs.values()) if (job.former.has(server)) this.track(server.control(() => this.recover(job, server)));
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
      if (copy && copy !== server) this.cancelOn(copy, job.id, 1);
    } else if (res && !res.result && job.attempt?.server !== server) {
      // Still running there: a stale duplicate of the moved job. It stays in `former`, since that
      // server's copy of this id is now cancelled and must not be attached to again.
      this.cancelOn(server, job.id, 1);
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
      if (st.tenant) this.tenant = st.tenant.name;
      const had = server.noBackends;
      server.noBackends = st.backends.length === 0;
      if (had && !server.noBackends) {
        this.changed();
        for (const g of this.pending.splice(0)) this.place(g);
      }
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
    this.capacityCache = undefined;
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
      else if (ok && (server.runSize === undefined || (server.joined && server.noBackends))) this.track(this.readSize(server));
      else if (server.healthy && server.failedChecks >= this.unhealthyAfter) {
        this.markDown(server, new RaasError('server_unreachable', `${server.url}: ${server.failedChecks} health checks failed`));
      }
    } finally {
      server.checking = false;
    }
  }

  /**
   * The servers the periodic round checks: every server that is down (only a check brings it back),
   * then, in turn from where the last round stopped, servers that delivered no result within the
   * interval, at most health_probes_per_s × interval of them. A server whose held answers arrive
   * needs no probe, and a fleet of a thousand servers is not probed a thousand times a round.
   */
  private dueForCheck(): ServerState[] {
    const list = this.fleet.list;
    const now = this.clock.now();
    const n = list.length;
    let budget = Math.max(1, Math.ceil((this.probesPerS * this.intervalMs) / 1000));
    const due = list.filter((s) => !s.healthy);
    let k = 0;
    for (; k < n && budget > 0; k++) {
      const s = list[(this.probeFrom + k) % n]!;
      if (!s.healthy || now - s.lastAnswer < this.intervalMs) continue;
      due.push(s);
      budget--;
    }
    this.probeFrom = n ? (this.probeFrom + k) % n : 0;
    return due;
  }

  /** Cancels a job on a server in the background, within that server's control concurrency. */
  private cancelOn(server: ServerState, jobId: string, retries: number): void {
    this.track(server.control(() => server.client.cancel(jobId, { retries })));
  }

  private schedule(): void {
    if (this.closing) return;
    this.timer = this.clock.setTimeout(() => {
      this.track(Promise.all(this.dueForCheck().map((s) => this.check(s))).finally(() => this.schedule()));
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
        if (server?.healthy) this.cancelOn(server, job.id, 1);
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
