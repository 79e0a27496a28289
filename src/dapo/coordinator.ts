import { RolloutFleet } from '../client/fleet.js';
import type { z } from 'zod';
import type { Batch, UpdateWeightsRequest as UWR } from '../protocol/batch.js';
import { UpdateWeightsRequest } from '../protocol/batch.js';
import type { TrainConfig, TrainConfigInput, BackendRef } from '../protocol/config-train.js';
import { CancelledError, RaasError, TimeoutError, fieldPath } from '../protocol/errors.js';
import { PauseRequest, type PauseMode, type PauseResponse } from '../protocol/pause.js';
import type { Result } from '../protocol/process.js';
import { systemClock, type Clock } from '../util/clock.js';
import { CoordinatorState } from './checkpoint.js';
import { parseTrainConfig } from './config.js';
import { DapoCore } from './core.js';
import { loadDataset } from './dataset.js';
import { startEnvironment, type Environment } from './environment.js';
import { type EndedGroupLine, type GroupRecord, endedGroupLine } from './group.js';
import { coordinatorState, restoreCore } from './coordinator-state.js';
import { PromptHistory, type PromptRecord } from './history.js';
import { syntheticResult } from './synthetic.js';
import { registerBackends } from './backends.js';
import type { MembershipChange } from '../client/fleet-types.js';

const addressOf = (b: BackendRef): string => (typeof b === 'string' ? b : b.address).replace(/\/+$/, '');

/** `RAAS_DEBUG=dapo` traces the coordinator's lifecycle on stderr. */
const DEBUG = /\bdapo\b/.test(process.env.RAAS_DEBUG ?? '');
const debug = (msg: string): void => {
  if (DEBUG) process.stderr.write(`[dapo] ${msg}\n`);
};

/** Options beside the config (tests inject a clock). */
export interface CoordinatorOptions {
  clock?: Clock;
  /** Where warnings go (a step with too few informative groups); default stderr as `raas: warning: …`. */
  onWarning?: (message: string) => void;
}

/** What pause() answers. */
export interface PauseReport {
  paused: true;
  mode: PauseMode;
  policy_version: number;
  /** Jobs submitted and not ended: they wait on their servers before their next model call. */
  running_jobs: number;
  /** What each rollout server's POST /pause answered. */
  servers: Array<PauseResponse & { url: string }>;
}

/** What resume() answers. */
export interface ResumeReport {
  resumed: true;
  policy_version: number;
  /** Jobs that were waiting on their servers and go on now. */
  released: number;
}

interface Waiter {
  resolve: (b: Batch) => void;
  reject: (e: unknown) => void;
}

/** What `status()` reports. */
export interface CoordinatorStatus {
  name: string;
  mode: 'async' | 'sync';
  policy_version: number;
  step: number;
  running_groups: number;
  running_jobs: number;
  buffered_groups: number;
  max_inflight_jobs: number;
  totals: DapoCore['totals'];
  servers: Array<{ url: string; healthy: boolean; in_flight: number }>;
  /** The pause mode while generation is paused (pause()), else false. */
  paused: PauseMode | false;
  /** The current step window (since the last handover). */
  window: {
    submitted: number;
    accepted: number;
    filtered: number;
    cancelled: number;
    skipped: number;
    dropped_error: number;
    elapsed_s: number;
  };
  closed: boolean;
}

/**
 * The DAPO coordinator: keeps the rollout servers busy with asynchronous replenishment, hands a step
 * over as soon as `batch_size` informative groups exist, and carries running groups over within
 * `max_staleness` (docs/training.md). `embedded: true` starts its own rollout server and
 * simulated backends.
 */
export class Coordinator {
  readonly config: TrainConfig;
  private readonly clock: Clock;
  private readonly onWarning: (message: string) => void;
  private core: DapoCore | undefined;
  private groupEnd: ((line: EndedGroupLine) => void) | undefined;
  private fleet: RolloutFleet | undefined;
  private env: Environment | undefined;
  private backends: BackendRef[] = [];
  private readonly waiters: Waiter[] = [];
  private readonly background = new Set<Promise<unknown>>();
  private starting: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  private restore: CoordinatorState | undefined;
  private pausedMode: PauseMode | undefined;

  constructor(config: TrainConfig | TrainConfigInput, opts: CoordinatorOptions = {}) {
    this.config = parseTrainConfig(config, 'Coordinator config');
    this.clock = opts.clock ?? systemClock;
    this.onWarning = opts.onWarning ?? ((m) => process.stderr.write(`raas: warning: ${m}\n`));
  }

  /** Starts (embedded servers, fleet, backends registration, dataset) and begins admission. Idempotent. */
  start(): Promise<void> {
    this.starting ??= this.doStart();
    return this.starting;
  }

  private async doStart(): Promise<void> {
    const cfg = this.config;
    const st = this.restore;
    const dataset = await loadDataset(cfg.dataset, cfg.seed, st?.cursor);
    this.env = await startEnvironment(cfg);
    if (this.closing) return;
    this.backends = this.env.backends;
    // A server going down or coming back changes the admission cap (pump() reads it again).
    this.fleet = new RolloutFleet({
      servers: this.env.servers,
      registry: this.env.registry,
      clock: this.clock,
      on_change: () => this.pump(),
      on_membership: (c) => this.membershipChanged(c),
      ...(cfg.health_interval_ms ? { health_interval_ms: cfg.health_interval_ms } : {}),
    });
    await this.fleet.readCapacity();
    const history = new PromptHistory();
    if (st?.prompts) history.load(st.prompts);
    const core = new DapoCore(cfg, dataset, this.clock, this.fleet.liveCapacity(cfg.max_inflight_jobs), {
      history,
      selector: st?.selector,
    });
    if (st) {
      restoreCore(core, st, cfg);
      // The earlier coordinator may have sent groups it had not checkpointed: at most an admission
      // burst past the last one found can be missing (admitted, not yet sent when it stopped).
      this.lookup = {
        from: st.next_group_index,
        found: st.next_group_index - 1,
        pending: 0,
        window: (cfg.max_staleness + 1) * cfg.batch_size + 1,
      };
    }
    this.core = core;
    this.wireGroupEnd();
    this.weightVersion = String(core.version);
    await this.place();
    if (st) for (const g of core.groups.values()) if (g.state === 'running') this.submit(g);
    this.pump();
  }

  /**
   * Submits a group's unfinished jobs (all of them when new; the rest after a resume). After a
   * resume, the restored groups and those the earlier coordinator may have sent after its checkpoint
   * are first looked up by job id on the servers (GET /jobs/:id): results that ended meanwhile are
   * taken as they are (a job cancelled by the earlier coordinator is not run again elsewhere), the
   * jobs still running are re-attached on the server that holds them, and only ids no server knows
   * start anew.
   */
  private submit(g: GroupRecord): void {
    const look = this.lookup;
    if (look && g.index >= look.from && look.pending === 0 && g.index > look.found + look.window) this.lookup = undefined;
    else if (look) {
      look.pending++;
      this.track(
        this.collect(g).then((server) => {
          look.pending--;
          if (server) {
            g.server = server;
            look.found = Math.max(look.found, g.index);
          } else if (g.index < look.from) g.server = undefined; // its server no longer knows it: place it anew
          if (this.closing) return;
          this.send(g);
          // Cancelled while we looked (handover, staleness): its jobs must still end for the group to finish.
          if (g.state === 'cancelling') this.sendCancels(g.requests.filter((_, k) => g.results[k] === undefined).map((r) => r.job_id!));
          this.pump();
        }),
      );
      return;
    }
    this.send(g);
  }

  /**
   * After a resume: restored groups, and new ones from `from` on while lookups are pending or the
   * group is within `window` indices of the highest one `found` on a server, are looked up first.
   */
  private lookup: { from: number; found: number; pending: number; window: number } | undefined;

  /**
   * Asks the servers (the group's own first) for its unfinished job ids; on the first server that
   * knows some, feeds the results that ended to the core and returns that server's URL.
   */
  private async collect(g: GroupRecord): Promise<string | undefined> {
    const ids = g.requests.filter((_, k) => g.results[k] === undefined).map((r) => r.job_id!);
    const clients = this.fleet!.clients();
    const own = clients.find((c) => c.url === g.server?.replace(/\/+$/, ''));
    for (const c of own ? [own, ...clients.filter((x) => x !== own)] : clients) {
      const answers = await Promise.all(ids.map((id) => c.job(id, { retries: 0, timeout_ms: 5000 }).catch(() => undefined)));
      const known = answers.filter((a) => a !== undefined);
      if (known.length === 0) continue;
      let ended = 0;
      for (const a of known) {
        if (!a.result) continue;
        ended++;
        this.core?.onResult(a.job_id, a.result);
      }
      debug(`resume: group ${g.index} found on ${c.url} (${known.length} of ${ids.length} jobs, ${ended} ended)`);
      return c.url;
    }
    debug(`resume: group ${g.index} is on no server`);
    return undefined;
  }

  private send(g: GroupRecord): void {
    const fleet = this.fleet!;
    const pending = g.requests.filter((_, k) => g.results[k] === undefined);
    const promises = fleet.submitGroup(pending, g.server ? { server: g.server } : {});
    const placed = fleet.serverOf(pending[0]?.job_id ?? '');
    if (this.lookup || (g.server && placed !== g.server))
      debug(`group ${g.index}: ${pending.length} jobs asked for ${g.server ?? 'any server'}, placed on ${placed ?? 'none yet'}`);
    g.server = placed ?? g.server;
    pending.forEach((req, i) => {
      const p = promises[i]
        .then(
          (r: Result) => this.core?.onResult(req.job_id!, r),
          (err: unknown) => {
            if (!this.closing) this.core?.onResult(req.job_id!, syntheticResult(req, err));
          },
        )
        .finally(() => this.pump());
      this.track(p);
    });
  }

  /** Prompts already named to the servers (POST /prefetch), oldest first: each is named once while it is remembered. */
  private readonly hinted = new Set<string>();

  /** Names the prompts admission takes next to the servers, whose images then unpack ahead of their groups. */
  private hintUpcoming(): void {
    const ahead = this.config.prefetch_ahead ?? this.config.batch_size;
    if (ahead === 0 || !this.core || this.closing) return;
    const next = this.core.dataset.upcoming(ahead).filter((p) => !this.hinted.has(`${p.data_source}\0${p.instance_id}`));
    if (next.length === 0) return;
    for (const p of next) this.hinted.add(`${p.data_source}\0${p.instance_id}`);
    for (const k of this.hinted) {
      if (this.hinted.size <= 4 * ahead) break;
      this.hinted.delete(k);
    }
    this.track(this.fleet!.prefetch(next));
  }

  private track(p: Promise<unknown>): void {
    const q = p.catch(() => {}).finally(() => this.background.delete(q));
    this.background.add(q);
  }

  private sendCancels(ids: string[]): void {
    for (const id of ids) this.track(this.fleet!.cancel(id));
  }

  /** Runs after every event: admission, then handover to a waiting consumer. */
  private pump(): void {
    const core = this.core;
    if (!core || this.closing) return;
    // The cap follows the live servers: max_inflight_jobs (default Σ workers.run.size) times their share.
    core.setCapacity(this.fleet!.liveCapacity(this.config.max_inflight_jobs));
    core.demand = this.waiters.length > 0;
    // During a weight update nothing is admitted: a group tagged with the new version must not start
    // on backends still serving the old one (admission resumes once every server has them).
    const admit = (): void => {
      if (this.updating === 0) for (const g of core.admit()) this.submit(g);
      this.hintUpcoming();
    };
    admit();
    while (this.waiters.length > 0 && core.ready()) {
      const { batch, cancels } = core.handover();
      const mode = this.logprobsMode();
      if (mode) batch.logprobs_mode = mode;
      this.sendCancels(cancels);
      this.waiters.shift()!.resolve(batch);
      core.demand = this.waiters.length > 0;
      admit();
    }
    for (const m of core.warnings.splice(0)) this.onWarning(m);
    if (this.waiters.length > 0 && core.stalled) {
      for (const w of this.waiters.splice(0)) w.reject(core.stalled);
    }
    if (this.waiters.length > 0 && core.exhausted()) {
      const skipped = core.totals.skipped ? ` (selection skipped ${core.totals.skipped} prompt turns; they count as visited)` : '';
      const err = new RaasError(
        'dataset_exhausted',
        `dataset ${this.config.dataset.path}: all ${this.config.dataset.epochs ?? '∞'} epochs served${skipped} and fewer than batch_size=${this.config.batch_size} accepted groups remain; raise dataset.epochs`,
        { retryable: false },
      );
      for (const w of this.waiters.splice(0)) w.reject(err);
    }
  }

  /** The logprobs mode batches record: declared, else the embedded simulators' own. */
  private logprobsMode(): Batch['logprobs_mode'] {
    const c = this.config;
    if (c.logprobs_mode) return c.logprobs_mode;
    if (c.embedded === false) return undefined;
    const sim = c.embedded === true ? {} : c.embedded.sim;
    const m = (sim as { logprobs_mode?: unknown }).logprobs_mode;
    return m === 'processed_logprobs' ? 'processed_logprobs' : 'raw_logprobs';
  }

  /** The next step's batch: resolves as soon as `batch_size` accepted groups are buffered. */
  async nextBatch(opts: { signal?: AbortSignal; timeout_s?: number } = {}): Promise<Batch> {
    if (this.closing) throw new RaasError('not_ready', 'Coordinator is closed');
    await this.start();
    opts.signal?.throwIfAborted();
    const core = this.core;
    // Waiting would never end while nothing is generated (and would block a sidecar's resume behind it).
    if (core?.paused && !core.ready()) {
      throw new RaasError(
        'generation_paused',
        `nextBatch: generation is paused and ${core.bufferedCount} of batch_size=${this.config.batch_size} groups are buffered; call resume() first`,
        { retryable: false },
      );
    }
    return new Promise<Batch>((resolve, reject) => {
      let timer: unknown;
      const cleanup = (): void => {
        if (timer !== undefined) this.clock.clearTimeout(timer);
        opts.signal?.removeEventListener('abort', onAbort);
      };
      const w: Waiter = {
        resolve: (b) => {
          cleanup();
          resolve(b);
        },
        reject: (e) => {
          cleanup();
          reject(e);
        },
      };
      const drop = (err: unknown): void => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1);
        w.reject(err);
      };
      const onAbort = (): void => drop(opts.signal!.reason ?? new CancelledError('nextBatch aborted'));
      opts.signal?.addEventListener('abort', onAbort, { once: true });
      if (opts.timeout_s !== undefined)
        timer = this.clock.setTimeout(
          () => drop(new TimeoutError(`nextBatch: no batch within timeout_s=${opts.timeout_s}`)),
          opts.timeout_s * 1000,
        );
      this.waiters.push(w);
      this.pump();
    });
  }

  /** Yields `config.steps` batches (fewer if the dataset runs out). The consumer calls updateWeights between them. */
  async *batches(): AsyncIterable<Batch> {
    while (!this.closing && (this.core?.step ?? this.restore?.step ?? 0) < this.config.steps) {
      try {
        yield await this.nextBatch();
      } catch (err) {
        if (err instanceof RaasError && (err.code === 'dataset_exhausted' || err.code === 'not_ready')) return;
        throw err;
      }
    }
  }

  /**
   * A weight update. Call it after the new weights are served (the trainer's weight sync has
   * finished; co-located: after the engines woke up with them, before resume()): every model call
   * that starts afterwards is labelled with the new version. policy_version rises by one (or to
   * `version`); backends are re-registered on every rollout server through the placement with
   * weight_version = String(policy_version) unless given. Embedded simulators are told too (standing
   * in for the trainer's own weight sync), so their success probability rises.
   */
  /** Weight updates in progress: admission holds until the backends serve the new version. */
  private updating = 0;

  async updateWeights(req: UWR = {}): Promise<{ policy_version: number }> {
    const parsed = UpdateWeightsRequest.safeParse(req);
    if (!parsed.success) {
      const i = parsed.error.issues[0]!;
      throw new RaasError('bad_request', `updateWeights: ${fieldPath(i.path)}: ${i.message}`, { retryable: false });
    }
    const r = parsed.data;
    await this.start();
    const core = this.core;
    if (!core || this.closing) throw new RaasError('not_ready', 'Coordinator is closed');
    const version = r.version ?? core.version + 1;
    if (version < core.version)
      throw new RaasError(
        'bad_request',
        `updateWeights: version ${version} is below the current policy_version ${core.version}; versions only rise`,
        { retryable: false },
      );
    const weightVersion = r.weight_version ?? String(version);
    if (r.backends) this.backends = r.backends;
    this.updating++;
    try {
      this.sendCancels(core.setVersion(version));
      await this.env!.bumpSims(weightVersion);
      this.weightVersion = weightVersion;
      await this.place();
    } finally {
      this.updating--;
      this.pump();
    }
    return { policy_version: version };
  }

  /**
   * Pauses generation for a co-located trainer's step: admission stops and every rollout server
   * holds its jobs before their next model call. `mode: 'drain'` (default) lets the calls in flight
   * finish; `'abort'` has the backends cut them (their turns continue after resume(), under the
   * weights served then). Answers once no call is in flight on any server, so the engines may sleep.
   * Pausing again while paused may turn a drain into an abort.
   */
  async pause(req: z.input<typeof PauseRequest> = {}, opts: { signal?: AbortSignal } = {}): Promise<PauseReport> {
    const parsed = PauseRequest.safeParse(req);
    if (!parsed.success) {
      const i = parsed.error.issues[0]!;
      throw new RaasError('bad_request', `pause: ${fieldPath(i.path)}: ${i.message}`, { retryable: false });
    }
    await this.start();
    const core = this.core;
    if (!core || this.closing) throw new RaasError('not_ready', 'Coordinator is closed');
    core.paused = true;
    this.pausedMode = parsed.data.mode;
    const clients = this.fleet!.clients();
    const answers = await Promise.all(clients.map((c) => c.pause(parsed.data, { signal: opts.signal })));
    debug(`pause (${parsed.data.mode}): ${answers.map((a) => `${a.in_flight} in flight, ${a.held} held`).join('; ')}`);
    return {
      paused: true,
      mode: parsed.data.mode,
      policy_version: core.version,
      running_jobs: core.runningJobs,
      servers: answers.map((a, i) => ({ ...a, url: clients[i]!.url })),
    };
  }

  /** Ends a pause: the servers let their held jobs go on, then admission resumes. Safe when not paused. */
  async resume(): Promise<ResumeReport> {
    await this.start();
    const core = this.core;
    if (!core || this.closing) throw new RaasError('not_ready', 'Coordinator is closed');
    const answers = await Promise.all(this.fleet!.clients().map((c) => c.resume()));
    core.paused = false;
    this.pausedMode = undefined;
    this.pump();
    return { resumed: true, policy_version: core.version, released: answers.reduce((n, a) => n + a.released, 0) };
  }

  /** The weight_version the backends are registered with now. */
  private weightVersion = '0';
  /** LLM servers the registry's nodes offer (for this tenant), placed beside the configured ones. */
  private offered: BackendRef[] = [];
  /** Placements run one after another (a node joining during a weight update waits for it). */
  private placing: Promise<unknown> = Promise.resolve();

  /** Places the backends (configured and offered) onto the live servers with the current weight version. */
  private place(): Promise<void> {
    const run = this.placing.then(async () => {
      if (this.closing || !this.fleet) return;
      const all = [...this.backends, ...this.offered.filter((o) => !this.backends.some((b) => addressOf(b) === addressOf(o)))];
      await registerBackends(this.fleet.clients({ taking: true }), all, this.weightVersion, this.config.placement_mode);
      // A server that joined takes groups once it holds backends.
      await this.fleet.refresh();
    });
    this.placing = run.catch(() => undefined);
    return run;
  }

  /**
   * The registry's fleet changed: a server that joined gets backends placed onto it (node-affine,
   * with the LLM servers its node offers) and work from the next admission on.
   */
  private membershipChanged(c: MembershipChange): void {
    const tenant = this.fleet?.tenant;
    this.offered = c.backends
      .filter((b) => b.tenant === undefined || b.tenant === tenant)
      .map((b) => (b.api ? { address: b.address, api: b.api } : b.address));
    debug(`registry: joined ${c.joined.join(' ') || '-'}, left ${c.left.join(' ') || '-'}, draining ${c.draining.join(' ') || '-'}`);
    if (!this.core || (c.joined.length === 0 && c.left.length === 0 && c.draining.length === 0 && this.offered.length === 0)) return;
    this.track(
      this.place()
        .catch((err: unknown) => this.onWarning(`placing backends after a membership change failed: ${(err as Error).message}`))
        .finally(() => this.pump()),
    );
  }

  /** Counters and where things are. */
  status(): CoordinatorStatus {
    const core = this.core;
    return {
      name: this.config.name,
      mode: this.config.mode,
      policy_version: core?.version ?? 0,
      step: core?.step ?? 0,
      running_groups: core?.runningGroups ?? 0,
      running_jobs: core?.runningJobs ?? 0,
      buffered_groups: core?.bufferedCount ?? 0,
      max_inflight_jobs: core?.capacity ?? 0,
      totals: core ? { ...core.totals } : ({} as DapoCore['totals']),
      servers: this.fleet?.servers() ?? [],
      paused: this.pausedMode ?? false,
      closed: this.closing !== undefined,
      window: core
        ? {
            submitted: core.window.submitted,
            accepted: core.window.accepted,
            filtered: core.window.filtered,
            cancelled: core.window.cancelled,
            skipped: core.window.skipped,
            dropped_error: core.window.droppedError,
            elapsed_s: (this.clock.now() - core.window.startedAt) / 1000,
          }
        : { submitted: 0, accepted: 0, filtered: 0, cancelled: 0, skipped: 0, dropped_error: 0, elapsed_s: 0 },
    };
  }

  /** What is running or buffered now (reported apart from waste at the end of a run). */
  leftovers(): ReturnType<DapoCore['leftovers']> | undefined {
    return this.core?.leftovers();
  }

  /** JSON state: dataset cursor, buffered groups, in-flight job ids with their versions. */
  checkpoint(): CoordinatorState {
    const core = this.core;
    if (!core) throw new RaasError('not_ready', 'checkpoint(): call start() first');
    // Where the group's jobs are now (the fleet may have moved them since the submission).
    const where = (g: GroupRecord): string | undefined => {
      const k = g.results.indexOf(undefined);
      return (k >= 0 ? this.fleet?.serverOf(g.requests[k]!.job_id!) : undefined) ?? g.server;
    };
    return coordinatorState(core, this.config, where);
  }

  /** Counts over the prompt history (visited, seen, by how their latest group ended, skipped). */
  promptSummary(): ReturnType<PromptHistory['summary']> & { dataset_size: number } {
    const h = this.core?.history ?? new PromptHistory();
    if (!this.core && this.restore?.prompts) h.load(this.restore.prompts);
    return { ...h.summary(), dataset_size: this.core?.dataset.rows.length ?? 0 };
  }

  /** Per prompt: every group's rewards (step, policy version, verdict), submissions and skips (`prompts.jsonl`). */
  /**
   * Hands `fn` the `groups.jsonl` line of every group that leaves without a batch (filtered,
   * dropped, cancelled), per the config's `groups_log`; raas train writes them.
   */
  onGroupEnd(fn: (line: EndedGroupLine) => void): void {
    this.groupEnd = fn;
    this.wireGroupEnd();
  }

  private wireGroupEnd(): void {
    const fn = this.groupEnd;
    const cfg = this.config;
    if (!this.core || !fn || cfg.groups_log === 'off') return;
    const messages = cfg.return_messages || cfg.sampling_params.return_messages === true;
    this.core.onGroupEnd = (g, verdict, step) => fn(endedGroupLine(g, verdict, step, cfg.groups_log === 'full', messages));
  }

  promptHistory(): PromptRecord[] {
    return this.core?.history.all() ?? this.restore?.prompts ?? [];
  }

  /** A coordinator that continues from `state`: it re-attaches to in-flight jobs by id at start(). */
  static resume(config: TrainConfig | TrainConfigInput, state: unknown, opts: CoordinatorOptions = {}): Coordinator {
    const parsed = CoordinatorState.safeParse(state);
    if (!parsed.success) {
      const i = parsed.error.issues[0]!;
      throw new RaasError('config_invalid', `resume state: ${fieldPath(i.path)}: ${i.message}`, { retryable: false });
    }
    const c = new Coordinator(config, opts);
    if (parsed.data.name !== c.config.name)
      throw new RaasError(
        'config_invalid',
        `resume state: name "${parsed.data.name}" differs from config name "${c.config.name}"; job ids derive from it`,
        { retryable: false },
      );
    c.restore = parsed.data;
    return c;
  }

  /**
   * Cancels in-flight jobs (confirmed; `{cancel: false}` leaves them running for a resume), stops
   * embedded servers and simulators, rejects waiting nextBatch calls. Safe twice.
   */
  close(opts: { cancel?: boolean } = {}): Promise<void> {
    this.closing ??= (async () => {
      for (const w of this.waiters.splice(0)) w.reject(new RaasError('not_ready', 'Coordinator closed'));
      try {
        await this.starting;
      } catch {
        // a failed start still closes what it opened
      }
      if (this.core && this.fleet && opts.cancel !== false) {
        const ids = this.core.cancelAll();
        debug(`close: cancelling ${ids.length} jobs`);
        await Promise.allSettled(
          ids.map((id) => this.fleet!.cancel(id).catch((e: unknown) => debug(`cancel ${id}: ${(e as Error).message}`))),
        );
      }
      // A server left paused would hold the next coordinator's jobs.
      if (this.pausedMode && this.fleet)
        await Promise.allSettled(this.fleet.clients().map((c) => c.resume({ retries: 0, timeout_ms: 5000 })));
      debug('close: cancels acknowledged; closing fleet');
      await this.fleet?.close();
      debug('close: fleet closed');
      await Promise.allSettled([...this.background]);
      debug('close: background settled; stopping embedded servers');
      await this.env?.close();
      debug('close: done');
    })();
    return this.closing;
  }
}
