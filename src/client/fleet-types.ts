import type { Result } from '../protocol/process.js';
import type { LimitFunction } from 'p-limit';
import type { Clock } from '../util/clock.js';
import type { NodeBackend } from '../protocol/nodes.js';
import type { ProcessInput, RolloutClient, RolloutClientOptions } from './client.js';

/** A registry the fleet reads its servers from (`servers: {registry: url}`): any raas serve others joined. */
export interface FleetRegistry {
  registry: string;
  token?: string;
  token_file?: string;
  token_env?: string;
  /** How often the node list is read (default 2000 ms). */
  poll_interval_ms?: number;
}

/** What changed in a registry's fleet: servers that joined or left, and the LLM servers their nodes offer. */
export interface MembershipChange {
  joined: string[];
  left: string[];
  draining: string[];
  /** Every LLM server the registry's nodes offer now. */
  backends: NodeBackend[];
}

/** Options of {@link RolloutFleet}. */
export interface RolloutFleetOptions {
  /** The servers; may be empty with `registry`, which adds and removes servers as they join and leave. */
  servers: Array<{ url: string; token?: string; token_file?: string; token_env?: string }>;
  registry?: FleetRegistry;
  /** Called (on a later microtask) when servers joined, left or began draining in the registry. */
  on_membership?: (change: MembershipChange) => void;
  /** Period of GET /health per server (default 2000 ms). */
  health_interval_ms?: number;
  /**
   * Consecutive failed health checks before a server counts as down (default 2): one slow answer
   * from a loaded server must not move all its groups. A /process call that fails past its retries
   * marks the server down at once.
   */
  unhealthy_after?: number;
  /** Timeout of one health check (default 2000 ms), independent of the period: a loaded server answers late, not never. */
  health_timeout_ms?: number;
  /**
   * Health checks per second over the whole fleet (default 64). Servers that are down are checked
   * every interval regardless, servers that delivered a result within the interval are not checked;
   * the others are checked in turn within this budget. A crashed server is noticed at once anyway
   * (its held answers fail); a hung one within ⌈servers ÷ (this × interval)⌉ intervals.
   */
  health_probes_per_s?: number;
  clock?: Clock;
  /**
   * Options for each server's client. The fleet's defaults retry less than a lone client
   * (2 retries, 100 ms → 1 s) because a dead server is better handled by failing over.
   */
  client?: Omit<RolloutClientOptions, 'url' | 'token'>;
  /**
   * Called (on a later microtask) when the live capacity may have changed: a server went down, came
   * back, or reported its workers. The coordinator re-reads {@link RolloutFleet.liveCapacity} then.
   */
  on_change?: () => void;
}

/** A server as {@link RolloutFleet.servers} reports it. */
export interface FleetServerInfo {
  url: string;
  healthy: boolean;
  in_flight: number;
  /** Its workers.run.size from GET /status, null until it answered one. */
  run_workers: number | null;
  /** Taking no new work (it is draining): its groups finish there, new ones go elsewhere. */
  draining: boolean;
}

/** Counters for logs and tests. */
export interface FleetStats {
  submitted: number;
  /** Jobs moved to another server because theirs stopped answering. */
  failed_over: number;
  /** Results fetched through GET /jobs/:id from a server that came back. */
  recovered: number;
  /** Terminal results that arrived for a job id already settled, and were ignored. */
  duplicates: number;
}

export interface ServerState {
  url: string;
  client: RolloutClient;
  healthy: boolean;
  inFlight: number;
  checking: boolean;
  failedChecks: number;
  /** workers.run.size from its last GET /status; undefined until it answered one. */
  runSize?: number;
  /** Draining (its registry says so, or it answered server_draining): no new groups. */
  draining: boolean;
  /** Added by the registry: it gets groups only once it reports an LLM backend (the trainer places them after it joined). */
  joined?: boolean;
  /** Its last GET /status (or a 503 no_llm_backends) said it has no LLM backend for us. */
  noBackends?: boolean;
  /** When (clock ms) a /process answer last arrived from it: a server that answers needs no probe. */
  lastAnswer: number;
  /** Runs cancels and recoveries on it a few at a time. */
  control: LimitFunction;
}

/** One /process call of a job on one server; it occupies an in-flight slot there until it ends or is abandoned. */
export interface Attempt {
  server: ServerState;
  ac: AbortController;
  released: boolean;
}

export interface JobRec {
  id: string;
  req: ProcessInput;
  group: GroupRec;
  /** The current attempt; after settling it may still run (a duplicate being cancelled). */
  attempt: Attempt | undefined;
  /** Servers that held the job before a failover: one of them may still finish it. */
  former: Set<ServerState>;
  cancelRequested: boolean;
  /** Times a server answered 5xx past the client's retries (queue full, stopped, no backends). */
  refusals: number;
  settled: boolean;
  promise: Promise<Result>;
  resolve: (r: Result) => void;
  reject: (e: unknown) => void;
}

export interface GroupRec {
  jobs: JobRec[];
  /** Where jobs of this group went when their server cancelled them unasked (kept together there). */
  moveTarget?: ServerState;
}
