import { Heap } from 'heap-js';
import type { z } from 'zod';
import type { LlmApi, BackendInfo } from '../../protocol/llm.js';
import type { LlmPoolConfig } from '../../protocol/config-server.js';
import { systemClock, type Clock } from '../../util/clock.js';
import type { Logger } from '../../util/logger.js';
import type { BackendClient } from './types.js';
import { BackendUnreachableError, normalizeAddress } from './http.js';
import { BackendHealth, type Watched } from './health.js';
import { GenerationGate } from './gate.js';
import { VllmClient, type ClientOptions } from './vllm.js';
import { SglangClient } from './sglang.js';

type PoolConfig = z.infer<typeof LlmPoolConfig>;

/**
 * One backend address and its load counters and health. There is one Backend per address while it
 * is registered or bound to a job in flight, so a removal followed by a re-add (ProRL's
 * clear + add weight update) keeps the load of those jobs and gives their next turns the new
 * weight_version.
 */
export class Backend implements Watched {
  /** Jobs in RUN bound to it (requests in flight under round_robin). */
  active = 0;
  /** Assignments since registration (the paper's key). */
  assigned = 0;
  /** Random tie-break, redrawn at each heap update so equal loads spread at random. */
  tie = 0;
  removed = false;
  /** False while its circuit breaker is open: no new work. */
  healthy = true;
  failures = 0;
  lastError: string | null = null;
  /** In the routing heap: registered and healthy. */
  inHeap = false;
  /** Calls in flight; aborted when the breaker opens, so their jobs move. */
  readonly calls = new Set<AbortController>();
  constructor(
    readonly address: string,
    public api: LlmApi,
    public weightVersion: string,
    public client: BackendClient,
  ) {}
  info(): BackendInfo {
    return {
      address: this.address,
      api: this.api,
      weight_version: this.weightVersion,
      active: this.active,
      assigned: this.assigned,
      healthy: this.healthy,
    };
  }
}

/** Makes the client for an address; tests and the bench may swap it. */
export type ClientFactory = (address: string, api: LlmApi) => BackendClient;

export function defaultClientFactory(opts: ClientOptions): ClientFactory {
  return (address, api) => (api === 'sglang' ? new SglangClient(address, opts) : new VllmClient(address, opts));
}

/** What changed about a backend, for whoever follows the pool (the event stream). */
export type BackendChange = 'added' | 'removed' | 'unhealthy' | 'healthy' | 'weight_version';

/** Collaborators of the pool: the clock of its probes, the log of its breakers, and who hears of changes. */
export interface PoolOptions {
  clock?: Clock;
  log?: Pick<Logger, 'info' | 'warn'>;
  /** Called after a backend was added, removed, changed health or weight_version. Must not throw. */
  onChange?(b: Backend, change: BackendChange): void;
}

/**
 * The LLM backend pool: a heap-js min-heap keyed by live load (`active`, default) or assignments
 * since registration (`assigned`), ties at random; group affinity keeps a group on one backend while
 * that backend is within `affinity_margin` of the least loaded; `round_robin` picks per request.
 * Only healthy backends are routed to: a circuit breaker per backend (health.ts) takes one out after
 * consecutive connection failures or timeouts and a background probe brings it back.
 */
export class BackendPool {
  private readonly heap: Heap<Backend>;
  /** Registered backends. */
  private readonly byAddress = new Map<string, Backend>();
  /** Removed backends still bound to jobs in flight, by address (a re-add revives the same one). */
  private readonly held = new Map<string, Backend>();
  private readonly groups = new Map<string, { backend: Backend; jobs: number }>();

  /** Groups bound to a backend now (a group's binding goes when its last job ends). */
  get groupBindings(): number {
    return this.groups.size;
  }
  private readonly health: BackendHealth<Backend>;
  /** The pause gate of this pool's model calls (POST /pause, /resume), on the pool's clock. */
  readonly gate: GenerationGate;
  private readonly log: PoolOptions['log'];
  private readonly onChange: PoolOptions['onChange'];
  private rr = 0;
  /** Jobs moved off a backend that stopped answering. */
  moves = 0;

  constructor(
    readonly config: PoolConfig,
    private readonly makeClient: ClientFactory,
    private readonly random: () => number = Math.random,
    opts: PoolOptions = {},
  ) {
    this.heap = new Heap<Backend>((a, b) => this.key(a) - this.key(b) || a.tie - b.tie);
    this.log = opts.log;
    this.onChange = opts.onChange;
    this.gate = new GenerationGate(opts.clock ?? systemClock, { paused: () => this.suspendHealth(), resumed: () => this.resumeHealth() });
    this.health = new BackendHealth(config, opts.clock ?? systemClock, {
      opened: (b) => this.opened(b),
      closed: (b) => {
        this.place(b);
        this.log?.info({ backend: b.address }, 'LLM backend answers again: routed to');
        this.onChange?.(b, 'healthy');
      },
    });
  }

  get size(): number {
    return this.byAddress.size;
  }

  /** The routing key of a backend. */
  key(b: Backend): number {
    return this.config.routing === 'assigned' ? b.assigned : b.active;
  }

  /**
   * Registers a backend, usable at once. Re-adding an address updates its weight_version (and api);
   * re-adding a removed address that jobs still hold revives that Backend, load and health included.
   */
  add(address: string, api: LlmApi = 'vllm', weightVersion?: string): Backend {
    const addr = normalizeAddress(address);
    const known = this.byAddress.get(addr) ?? this.held.get(addr);
    if (known) {
      if (known.api !== api) {
        known.api = api;
        known.client = this.makeClient(addr, api);
      }
      const before = known.weightVersion;
      if (weightVersion !== undefined || known.removed) known.weightVersion = weightVersion ?? 'default';
      if (known.removed) {
        known.removed = false;
        this.held.delete(addr);
        this.byAddress.set(addr, known);
        this.place(known);
        this.health.watch(known);
        this.onChange?.(known, 'added');
      } else if (known.weightVersion !== before) this.onChange?.(known, 'weight_version');
      return known;
    }
    const b = new Backend(addr, api, weightVersion ?? 'default', this.makeClient(addr, api));
    b.tie = this.random();
    this.byAddress.set(addr, b);
    this.place(b);
    this.health.watch(b);
    this.onChange?.(b, 'added');
    return b;
  }

  /** Removes a backend for new jobs; jobs holding it keep using it. */
  remove(address: string): boolean {
    const b = this.byAddress.get(normalizeAddress(address));
    if (!b) return false;
    b.removed = true;
    this.byAddress.delete(b.address);
    this.place(b);
    this.health.unwatch(b);
    if (b.active > 0) this.held.set(b.address, b);
    this.onChange?.(b, 'removed');
    return true;
  }

  clear(): void {
    for (const b of [...this.byAddress.values()]) this.remove(b.address);
  }

  get(address: string): Backend | undefined {
    return this.byAddress.get(normalizeAddress(address));
  }

  list(): BackendInfo[] {
    return [...this.byAddress.values()].map((b) => b.info());
  }

  /** A healthy registered backend (for metadata when a job holds none), else undefined. */
  anyHealthy(): Backend | undefined {
    return this.heap.peek();
  }

  /** Registered backends whose breaker is open. */
  unhealthy(): Backend[] {
    return [...this.byAddress.values()].filter((b) => !b.healthy);
  }

  /**
   * Binds a job entering RUN to a healthy backend: the least loaded (ties at random), or its group's
   * backend when that one is within the affinity margin. `exclude` skips backends that stopped answering.
   */
  acquire(groupId?: string, exclude?: ReadonlySet<Backend>): Backend | undefined {
    const least = this.leastLoaded(exclude);
    if (!least) return undefined;
    let chosen = least;
    const group = groupId !== undefined && this.config.group_affinity ? this.groups.get(groupId) : undefined;
    if (group?.backend.inHeap && !exclude?.has(group.backend) && this.key(group.backend) - this.key(least) <= this.config.affinity_margin) {
      chosen = group.backend;
    }
    this.bump(chosen, +1, true);
    if (groupId !== undefined && this.config.group_affinity) {
      if (group && group.backend === chosen) group.jobs++;
      else this.groups.set(groupId, { backend: chosen, jobs: (group?.jobs ?? 0) + 1 });
    }
    return chosen;
  }

  /** Ends a binding made by acquire (safe on a removed backend). */
  release(b: Backend, groupId?: string): void {
    this.bump(b, -1, false);
    if (b.removed && b.active === 0 && this.held.get(b.address) === b) this.held.delete(b.address);
    if (groupId === undefined) return;
    const g = this.groups.get(groupId);
    if (g && --g.jobs <= 0) this.groups.delete(groupId);
  }

  /** round_robin: the next healthy backend for one request (counted active while the request runs). */
  nextRoundRobin(exclude?: ReadonlySet<Backend>): Backend | undefined {
    const live = [...this.byAddress.values()].filter((b) => b.healthy && !exclude?.has(b));
    if (live.length === 0) return undefined;
    const b = live[this.rr++ % live.length];
    this.bump(b, +1, true);
    return b;
  }

  /** The backend a group is currently bound to, if any. */
  groupBackend(groupId: string): Backend | undefined {
    return this.groups.get(groupId)?.backend;
  }

  /**
   * The deadline of one call: `deadline_base_s` + `max_tokens` × `deadline_per_token_ms`, capped by
   * `request_timeout_s`. Below a job's timeout, so a call to a hung backend ends while the job can still move.
   */
  deadlineMs(maxTokens: number): number {
    const c = this.config;
    return Math.min(c.request_timeout_s * 1000, c.deadline_base_s * 1000 + maxTokens * c.deadline_per_token_ms);
  }

  /** A call to `b` got no answer (refused, reset, past its deadline): counts toward its breaker. */
  failed(b: Backend, err: Error): void {
    this.health.failure(b, err.message);
  }

  /** A call to `b` succeeded: resets its breaker. */
  succeeded(b: Backend): void {
    if (b.failures > 0 || !b.healthy) this.health.success(b);
  }

  /** Generation paused (POST /pause): the breakers stop counting; sleeping engines are not failures. */
  suspendHealth(): void {
    this.health.suspend();
  }

  /** Generation resumed: breakers start afresh. */
  resumeHealth(): void {
    this.health.resume();
  }

  /** Stops the probes. Safe twice. */
  close(): void {
    this.health.close();
  }

  private opened(b: Backend): void {
    this.place(b);
    this.onChange?.(b, 'unhealthy');
    this.log?.warn(
      { backend: b.address, failures: b.failures, last: b.lastError },
      'LLM backend marked unhealthy: no new work until a probe answers',
    );
    const reason = new BackendUnreachableError(
      `LLM backend ${b.address} was marked unhealthy after ${b.failures} consecutive failures (last: ${b.lastError})`,
    );
    for (const c of [...b.calls]) c.abort(reason);
  }

  /** Puts a backend in the heap when registered and healthy, takes it out otherwise. */
  private place(b: Backend): void {
    const routable = !b.removed && b.healthy;
    if (routable && !b.inHeap) {
      b.inHeap = true;
      this.heap.push(b);
    } else if (!routable && b.inHeap) {
      b.inHeap = false;
      this.heap.remove(b);
    }
  }

  private leastLoaded(exclude?: ReadonlySet<Backend>): Backend | undefined {
    const top = this.heap.peek();
    if (!top || !exclude?.has(top)) return top;
    let best: Backend | undefined;
    for (const b of this.byAddress.values()) {
      if (!b.inHeap || exclude.has(b)) continue;
      if (!best || this.key(b) - this.key(best) < 0 || (this.key(b) === this.key(best) && b.tie < best.tie)) best = b;
    }
    return best;
  }

  private bump(b: Backend, delta: number, assign: boolean): void {
    if (b.inHeap) this.heap.remove(b);
    b.active = Math.max(0, b.active + delta);
    if (assign) b.assigned++;
    b.tie = this.random();
    if (b.inHeap) this.heap.push(b);
  }
}

/** The gate of a rollout server's backend pool: its routes and its jobs' sessions share it (the pool owns it, on the pool's clock). */
export function gateOf(pool: BackendPool): GenerationGate {
  return pool.gate;
}
