import { Heap } from 'heap-js';
import type { z } from 'zod';
import type { LlmApi, BackendInfo } from '../../protocol/llm.js';
import type { LlmPoolConfig } from '../../protocol/config-server.js';
import type { BackendClient } from './types.js';
import { normalizeAddress } from './http.js';
import { VllmClient, type ClientOptions } from './vllm.js';
import { SglangClient } from './sglang.js';

type PoolConfig = z.infer<typeof LlmPoolConfig>;

/** One registered backend and its load counters. Jobs keep their Backend even after it is removed. */
export class Backend {
  /** Jobs in RUN bound to it (requests in flight under round_robin). */
  active = 0;
  /** Assignments since registration (the paper's key). */
  assigned = 0;
  /** Random tie-break, redrawn at each heap update so equal loads spread at random. */
  tie = 0;
  removed = false;
  constructor(
    readonly address: string,
    readonly api: LlmApi,
    public weightVersion: string,
    readonly client: BackendClient,
  ) {}
  info(): BackendInfo {
    return { address: this.address, api: this.api, weight_version: this.weightVersion, active: this.active, assigned: this.assigned };
  }
}

/** Makes the client for an address; tests and the bench may swap it. */
export type ClientFactory = (address: string, api: LlmApi) => BackendClient;

export function defaultClientFactory(opts: ClientOptions): ClientFactory {
  return (address, api) => (api === 'sglang' ? new SglangClient(address, opts) : new VllmClient(address, opts));
}

/**
 * The LLM backend pool: a heap-js min-heap keyed by live load (`active`, default) or assignments
 * since registration (`assigned`), ties at random; group affinity keeps a group on one backend while
 * that backend is within `affinity_margin` of the least loaded; `round_robin` picks per request.
 */
export class BackendPool {
  private readonly heap: Heap<Backend>;
  private readonly byAddress = new Map<string, Backend>();
  private readonly groups = new Map<string, { backend: Backend; jobs: number }>();
  private rr = 0;
  /** Jobs moved off a backend that stopped answering. */
  moves = 0;

  constructor(
    readonly config: PoolConfig,
    private readonly makeClient: ClientFactory,
    private readonly random: () => number = Math.random,
  ) {
    this.heap = new Heap<Backend>((a, b) => this.key(a) - this.key(b) || a.tie - b.tie);
  }

  get size(): number {
    return this.byAddress.size;
  }

  /** The routing key of a backend. */
  key(b: Backend): number {
    return this.config.routing === 'assigned' ? b.assigned : b.active;
  }

  /** Registers a backend, usable at once. Re-adding an address updates its weight_version (and api). */
  add(address: string, api: LlmApi = 'vllm', weightVersion?: string): Backend {
    const addr = normalizeAddress(address);
    const existing = this.byAddress.get(addr);
    if (existing && existing.api === api) {
      if (weightVersion !== undefined) existing.weightVersion = weightVersion;
      return existing;
    }
    if (existing) this.remove(addr);
    const b = new Backend(addr, api, weightVersion ?? 'default', this.makeClient(addr, api));
    b.tie = this.random();
    this.byAddress.set(addr, b);
    this.heap.push(b);
    return b;
  }

  /** Removes a backend for new jobs; jobs holding it keep using it. */
  remove(address: string): boolean {
    const b = this.byAddress.get(normalizeAddress(address));
    if (!b) return false;
    b.removed = true;
    this.byAddress.delete(b.address);
    this.heap.remove(b);
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

  /**
   * Binds a job entering RUN to a backend: the least loaded (ties at random), or its group's backend
   * when that one is within the affinity margin. `exclude` skips backends that stopped answering.
   */
  acquire(groupId?: string, exclude?: ReadonlySet<Backend>): Backend | undefined {
    const least = this.leastLoaded(exclude);
    if (!least) return undefined;
    let chosen = least;
    const group = groupId !== undefined && this.config.group_affinity ? this.groups.get(groupId) : undefined;
    if (group && !group.backend.removed && !exclude?.has(group.backend) && this.key(group.backend) - this.key(least) <= this.config.affinity_margin) {
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
    if (groupId === undefined) return;
    const g = this.groups.get(groupId);
    if (g && --g.jobs <= 0) this.groups.delete(groupId);
  }

  /** round_robin: the next live backend for one request (counted active while the request runs). */
  nextRoundRobin(exclude?: ReadonlySet<Backend>): Backend | undefined {
    const live = [...this.byAddress.values()].filter((b) => !exclude?.has(b));
    if (live.length === 0) return undefined;
    const b = live[this.rr++ % live.length];
    this.bump(b, +1, true);
    return b;
  }

  /** The backend a group is currently bound to, if any. */
  groupBackend(groupId: string): Backend | undefined {
    return this.groups.get(groupId)?.backend;
  }

  private leastLoaded(exclude?: ReadonlySet<Backend>): Backend | undefined {
    const top = this.heap.peek();
    if (!top || !exclude?.has(top)) return top;
    let best: Backend | undefined;
    for (const b of this.byAddress.values()) {
      if (exclude.has(b)) continue;
      if (!best || this.key(b) - this.key(best) < 0 || (this.key(b) === this.key(best) && b.tie < best.tie)) best = b;
    }
    return best;
  }

  private bump(b: Backend, delta: number, assign: boolean): void {
    const inHeap = !b.removed && this.heap.remove(b);
    b.active = Math.max(0, b.active + delta);
    if (assign) b.assigned++;
    b.tie = this.random();
    if (inHeap) this.heap.push(b);
  }
}
