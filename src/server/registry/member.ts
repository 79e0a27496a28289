import got, { HTTPError } from 'got';
import { NodeInfo, type NodeBackend, type NodeStageMetrics } from '../../protocol/nodes.js';
import type { Clock } from '../../util/clock.js';
import type { Logger } from '../../util/logger.js';

/** What a joined server tells the registry, read at each heartbeat. */
interface MemberSource {
  sizes(): { init: number; run: number; eval: number };
  metrics(): NodeStageMetrics;
  draining(): boolean;
}

/** How `raas serve --join` reaches its registry. */
export interface MemberOptions {
  /** The registry's base URL. */
  registry: string;
  /** Bearer token for the registry (its admin token). */
  token: string | undefined;
  nodeId: string;
  /** This server's URL as trainers reach it. */
  url: string;
  intervalMs: number;
  /** LLM servers on this node, offered for placement. */
  backends: NodeBackend[];
  source: MemberSource;
  /** The registry answered that this node is draining (an operator ran DELETE /nodes/{id}). */
  onDrainRequested(): void;
  clock: Clock;
  log: Pick<Logger, 'info' | 'warn'>;
}

/** Deadline of one call to the registry. */
const CALL_MS = 10_000;

/**
 * A rollout server's membership of a registry (Polar's gateway-node loop, src/polar/gateway/node.py):
 * it registers, then heartbeats every interval with its stage occupancy and the sizes in force; a
 * heartbeat answered 404 (the registry restarted or forgot it) registers again. A registry that
 * cannot be reached is retried at the next beat: the server serves meanwhile. `leave()` removes it
 * for good after a drain.
 */
export class NodeMember {
  private timer: unknown;
  private stopped = false;
  private registered = false;
  private drainAsked = false;

  constructor(private readonly o: MemberOptions) {}

  /** Registers (once; a failure is logged and retried by the heartbeats) and starts beating. */
  async start(): Promise<void> {
    await this.register();
    this.arm();
  }

  /** Leaves the registry (after a drain): trainers stop listing this server. Stops the heartbeats. */
  async leave(): Promise<void> {
    this.close();
    try {
      await got.delete(`${this.o.registry}/nodes/${encodeURIComponent(this.o.nodeId)}`, {
        searchParams: { leave: 'true' },
        headers: this.headers(),
        timeout: { request: CALL_MS },
        retry: { limit: 2 },
      });
      this.o.log.info({ registry: this.o.registry, node: this.o.nodeId }, 'left the registry');
    } catch (err) {
      this.o.log.warn(
        { err: String(err), registry: this.o.registry },
        'could not leave the registry (it forgets silent nodes after forget_after_s)',
      );
    }
  }

  /** Stops the heartbeats without leaving (the registry marks the node dead after its missed heartbeats). Safe twice. */
  close(): void {
    this.stopped = true;
    if (this.timer !== undefined) this.o.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async register(): Promise<void> {
    const s = this.o.source.sizes();
    try {
      const info = await this.call('POST', '/nodes/register', {
        node_id: this.o.nodeId,
        gateway_url: this.o.url,
        max_init_workers: s.init,
        max_run_workers: s.run,
        max_postrun_workers: s.eval,
        heartbeat_interval_seconds: this.o.intervalMs / 1000,
        backends: this.o.backends,
        draining: this.o.source.draining(),
      });
      if (!this.registered)
        this.o.log.info({ registry: this.o.registry, node: this.o.nodeId, url: this.o.url }, 'registered with the registry');
      this.registered = true;
      this.follow(info);
    } catch (err) {
      this.o.log.warn({ err: String(err), registry: this.o.registry }, 'node registration failed; retrying at the next heartbeat');
      this.registered = false;
    }
  }

  private async beat(): Promise<void> {
    if (!this.registered) return this.register();
    const s = this.o.source.sizes();
    try {
      const info = await this.call('POST', `/nodes/${encodeURIComponent(this.o.nodeId)}/heartbeat`, {
        metrics: this.o.source.metrics(),
        max_init_workers: s.init,
        max_run_workers: s.run,
        max_postrun_workers: s.eval,
        draining: this.o.source.draining(),
      });
      this.follow(info);
    } catch (err) {
      if (err instanceof HTTPError && err.response.statusCode === 404) return this.register();
      this.o.log.warn({ err: String(err), registry: this.o.registry }, 'node heartbeat failed');
    }
  }

  /** A drain asked at the registry reaches the server through the heartbeat's answer. */
  private follow(info: NodeInfo): void {
    if (info.draining && !this.o.source.draining() && !this.drainAsked) {
      this.drainAsked = true;
      this.o.onDrainRequested();
    }
  }

  private async call(method: 'POST', route: string, body: unknown): Promise<NodeInfo> {
    const answer = await got(`${this.o.registry}${route}`, {
      method,
      json: body,
      headers: this.headers(),
      timeout: { request: CALL_MS },
      retry: { limit: 0 },
    }).json();
    return NodeInfo.parse(answer);
  }

  private headers(): Record<string, string> {
    return this.o.token ? { authorization: `Bearer ${this.o.token}` } : {};
  }

  private arm(): void {
    if (this.stopped) return;
    this.timer = this.o.clock.setTimeout(() => {
      void this.beat().finally(() => this.arm());
    }, this.o.intervalMs);
    (this.timer as { unref?: () => void }).unref?.();
  }
}
