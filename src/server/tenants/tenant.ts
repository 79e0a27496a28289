import type { BackendPool } from '../llm/pool.js';
import type { ShareHolder } from '../pipeline/fair-queue.js';
import { scopedKey } from '../pipeline/scope.js';

/** What a tenant is configured with (the server's implicit tenant has the defaults). */
export interface TenantSettings {
  name: string;
  weight: number;
  priority: number;
  maxPriority: number;
  /** Jobs inside stages at once (Infinity: no cap). */
  maxRunning: number;
  /** Jobs waiting for a stage at once (Infinity: no cap). */
  maxQueued: number;
  /** `allowed_backends`: the only backend addresses it may register (undefined: any). */
  allowedBackends?: readonly string[];
}

/**
 * One tenant of a rollout server: its share of every stage (it is the fair queue's holder), its
 * quotas, its own LLM backend pool, and the counters its /status and the metrics report. A server
 * without a `tenants:` section has one, `default`, whose job ids are not namespaced, so everything
 * behaves as on a single-trainer server.
 */
export class Tenant implements ShareHolder {
  readonly name: string;
  readonly weight: number;
  /** The class of its jobs unless a /process `priority` asks for another (up to maxPriority). */
  readonly priority: number;
  readonly maxPriority: number;
  readonly maxInStage: number;
  readonly maxQueued: number;
  /** Backend identities (backendIdentity) or `host:*` it may register; undefined: any. */
  readonly allowedBackends: readonly string[] | undefined;
  /** Jobs inside a stage now (kept by the stage limiters). */
  inStage = 0;
  /** Jobs admitted and not ended. */
  live = 0;
  /** Jobs by terminal state since start. */
  readonly ended: Record<string, number> = {};
  /** Lookups (GET /jobs/:id, /cancel, attach) of an id only another tenant has: answered as unknown, counted. */
  foreignLookups = 0;

  constructor(
    s: TenantSettings,
    /** Its LLM backends: its jobs use only these. */
    readonly pool: BackendPool,
    /** Prefix of its job ids in the server's maps and journal ('' for the implicit tenant). */
    readonly scope: string,
  ) {
    this.name = s.name;
    this.weight = s.weight;
    this.priority = s.priority;
    this.maxPriority = s.maxPriority;
    this.maxInStage = s.maxRunning;
    this.maxQueued = s.maxQueued;
    this.allowedBackends = s.allowedBackends;
  }

  /** Jobs admitted and waiting for a stage (in a queue, or between stages). */
  get queued(): number {
    return this.live - this.inStage;
  }

  /** The key of one of its job ids in the server's maps: job ids of different tenants never meet. */
  key(jobId: string): string {
    return scopedKey(this.scope, jobId);
  }
}

/** The name of the implicit tenant of a server without `tenants:`. */
export const DEFAULT_TENANT = 'default';
