import { RaasError } from '../protocol/errors.js';
import type { NodeBackend, NodeInfo } from '../protocol/nodes.js';
import { sleep, type Clock } from '../util/clock.js';
import { resolveToken } from '../util/secret.js';
import { RolloutClient, type RolloutClientOptions } from './client.js';
import type { FleetRegistry, MembershipChange } from './fleet-types.js';

/** What membership changes on the fleet. */
export interface FleetMembers {
  addServer(url: string, token?: string): string | undefined;
  drainServer(url: string): void;
  removeServer(url: string): void;
  serverLost(url: string): void;
}

/** How long a fleet waits at start for its registry to list a live server. */
const FIRST_SERVER_MS = 60_000;

/**
 * A fleet's servers as a registry lists them (`servers: {registry: url}`): every poll adds the
 * nodes that joined, stops placing on those that drain, hands the groups of those that missed
 * their heartbeats to the others (as for a dead server), and drops those that left. The servers
 * are reached with the registry's token. A registry that does not answer leaves the fleet as it is.
 */
export class Membership {
  private readonly client: RolloutClient;
  private readonly token: string | undefined;
  private readonly known = new Map<string, { healthy: boolean; draining: boolean }>();
  private backends = '';
  private timer: unknown;
  private closed = false;
  private polled = false;
  private lastError: unknown;

  constructor(
    private readonly fleet: FleetMembers,
    private readonly reg: FleetRegistry,
    private readonly clock: Clock,
    clientOpts: Omit<RolloutClientOptions, 'url' | 'token'>,
    private readonly onChange?: (c: MembershipChange) => void,
  ) {
    this.token = resolveToken(reg, 'servers.registry');
    this.client = new RolloutClient({ ...clientOpts, url: reg.registry, token: this.token, retries: 1 });
    this.arm(0);
  }

  /** Resolves once the registry listed a live server (or rejects after a minute, naming the registry). */
  async ready(signal?: AbortSignal): Promise<void> {
    const end = this.clock.now() + FIRST_SERVER_MS;
    while (![...this.known.values()].some((n) => n.healthy && !n.draining)) {
      if (this.clock.now() > end || this.closed) {
        const why = this.lastError ? `it did not answer (${(this.lastError as Error).message})` : 'it lists no live rollout server';
        throw new RaasError(
          'server_unreachable',
          `servers.registry ${this.reg.registry}: ${why}; start \`raas serve --join ${this.reg.registry}\` on the rollout nodes`,
        );
      }
      await sleep(this.polled ? 200 : 50, signal, this.clock);
    }
  }

  /** Reads the node list once and applies what changed. */
  async poll(): Promise<void> {
    let nodes: NodeInfo[];
    try {
      nodes = await this.client.nodes({ timeout_ms: 5000 });
      this.lastError = undefined;
    } catch (err) {
      this.lastError = err;
      return;
    } finally {
      this.polled = true;
    }
    if (this.closed) return;
    const change: MembershipChange = { joined: [], left: [], draining: [], backends: [] };
    const seen = new Set<string>();
    for (const n of nodes) {
      const url = n.gateway_url.replace(/\/+$/, '');
      seen.add(url);
      const was = this.known.get(url);
      if (!was) {
        // A node first seen dead is not added: it joins when its heartbeats say it is alive.
        if (!n.healthy) continue;
        this.fleet.addServer(url, this.token);
        change.joined.push(url);
      } else if (was.healthy && !n.healthy) this.fleet.serverLost(url);
      if (n.draining && !was?.draining) {
        this.fleet.drainServer(url);
        change.draining.push(url);
      }
      this.known.set(url, { healthy: n.healthy, draining: n.draining });
    }
    for (const url of [...this.known.keys()]) {
      if (seen.has(url)) continue;
      this.known.delete(url);
      this.fleet.removeServer(url);
      change.left.push(url);
    }
    change.backends = offered(nodes);
    const key = JSON.stringify(change.backends);
    const moved = change.joined.length + change.left.length + change.draining.length > 0 || key !== this.backends;
    this.backends = key;
    if (moved && this.onChange) queueMicrotask(() => this.onChange?.(change));
  }

  /** Stops polling. Safe twice. */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.client.close();
  }

  private arm(ms: number): void {
    if (this.closed) return;
    this.timer = this.clock.setTimeout(() => {
      void this.poll().finally(() => this.arm(this.reg.poll_interval_ms ?? 2000));
    }, ms);
    (this.timer as { unref?: () => void }).unref?.();
  }
}

/** The LLM servers of the nodes that take work, each once. */
function offered(nodes: NodeInfo[]): NodeBackend[] {
  const out = new Map<string, NodeBackend>();
  for (const n of nodes) if (n.healthy && !n.draining) for (const b of n.backends) out.set(b.address, b);
  return [...out.values()];
}
