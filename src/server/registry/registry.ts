import type { NodeHeartbeat, NodeInfo, NodeRegistration } from '../../protocol/nodes.js';
import type { Clock } from '../../util/clock.js';

/** How the registry judges its nodes (`registry:` section). */
export interface RegistrySettings {
  /** Heartbeats a node may miss in a row before it counts as dead. */
  missed_heartbeats: number;
  /** A dead node is forgotten after this many seconds without a heartbeat. */
  forget_after_s: number;
}

interface NodeRecord {
  reg: NodeRegistration;
  metrics: NodeInfo['metrics'];
  draining: boolean;
  /** Monotonic ms (the clock) and wall ms of the last sign of life. */
  lastBeat: number;
  lastBeatWall: number;
  registeredWall: number;
}

/**
 * The node registry rollout servers join (`raas serve --join <url>`) and trainers read
 * (`servers: {registry: <url>}`), after Polar's NodeScheduler: a node registers with its URL and
 * stage sizes, heartbeats its occupancy, and is drained by DELETE. A node that missed
 * `missed_heartbeats` heartbeats in a row is reported `healthy: false` (trainers treat it as a dead
 * server), and one silent for `forget_after_s` is forgotten (its next heartbeat gets 404, and it
 * registers again).
 */
export class NodeRegistry {
  private readonly nodes = new Map<string, NodeRecord>();

  constructor(
    private readonly settings: RegistrySettings,
    private readonly clock: Clock,
    private readonly wallNow: () => number = Date.now,
  ) {}

  /** Registers a node, or replaces its record (a restarted server registers again under its id). */
  register(reg: NodeRegistration): NodeInfo {
    const known = this.nodes.get(reg.node_id);
    const rec: NodeRecord = {
      reg,
      metrics: known?.metrics ?? emptyMetrics(),
      draining: reg.draining,
      lastBeat: this.clock.now(),
      lastBeatWall: this.wallNow(),
      registeredWall: this.wallNow(),
    };
    this.nodes.set(reg.node_id, rec);
    return this.info(rec);
  }

  /** Records a heartbeat; undefined for a node it does not know (the node registers again). */
  heartbeat(id: string, beat: NodeHeartbeat): NodeInfo | undefined {
    const rec = this.live(id);
    if (!rec) return undefined;
    rec.metrics = beat.metrics;
    rec.lastBeat = this.clock.now();
    rec.lastBeatWall = this.wallNow();
    rec.reg = {
      ...rec.reg,
      max_init_workers: beat.max_init_workers ?? rec.reg.max_init_workers,
      max_run_workers: beat.max_run_workers ?? rec.reg.max_run_workers,
      max_postrun_workers: beat.max_postrun_workers ?? rec.reg.max_postrun_workers,
    };
    // A drain is one-way: a node that was drained here stays draining whatever it says.
    if (beat.draining) rec.draining = true;
    return this.info(rec);
  }

  /** DELETE /nodes/{id}: the node takes no new work (it learns so from its next heartbeat's answer). */
  drain(id: string): NodeInfo | undefined {
    const rec = this.live(id);
    if (!rec) return undefined;
    rec.draining = true;
    return this.info(rec);
  }

  /** DELETE /nodes/{id}?leave=true: a drained node is gone for good. */
  remove(id: string): NodeInfo | undefined {
    const rec = this.live(id);
    if (!rec) return undefined;
    this.nodes.delete(id);
    return { ...this.info(rec), draining: true };
  }

  get(id: string): NodeInfo | undefined {
    const rec = this.live(id);
    return rec && this.info(rec);
  }

  /** Every node not forgotten, in the order they registered. */
  list(): NodeInfo[] {
    const out: NodeInfo[] = [];
    for (const id of [...this.nodes.keys()]) {
      const rec = this.live(id);
      if (rec) out.push(this.info(rec));
    }
    return out;
  }

  /** The record, unless it was silent past forget_after_s (then it is dropped). */
  private live(id: string): NodeRecord | undefined {
    const rec = this.nodes.get(id);
    if (rec && this.clock.now() - rec.lastBeat > this.settings.forget_after_s * 1000) {
      this.nodes.delete(id);
      return undefined;
    }
    return rec;
  }

  private info(rec: NodeRecord): NodeInfo {
    const r = rec.reg;
    const silentMs = this.clock.now() - rec.lastBeat;
    return {
      node_id: r.node_id,
      gateway_url: r.gateway_url,
      max_init_workers: r.max_init_workers,
      max_run_workers: r.max_run_workers,
      max_postrun_workers: r.max_postrun_workers,
      metrics: rec.metrics,
      dispatch_reservations: 0,
      healthy: silentMs <= this.settings.missed_heartbeats * r.heartbeat_interval_seconds * 1000,
      draining: rec.draining,
      heartbeat_interval_seconds: r.heartbeat_interval_seconds,
      last_heartbeat: new Date(rec.lastBeatWall).toISOString(),
      backends: r.backends,
      registered_at: new Date(rec.registeredWall).toISOString(),
    };
  }
}

function emptyMetrics(): NodeInfo['metrics'] {
  return { init_queue_depth: 0, init_inflight: 0, ready_depth: 0, run_inflight: 0, postrun_queue_depth: 0, postrun_inflight: 0 };
}
