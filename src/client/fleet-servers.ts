import type { RolloutClient } from './client.js';
import type { FleetServerInfo, ServerState } from './fleet-types.js';

/** Whether a server gets new groups: up, not draining, and (one a registry added) holding a backend. */
function takes(s: ServerState): boolean {
  return s.healthy && !s.draining && !(s.joined && s.noBackends);
}

/**
 * The servers of a fleet: which one a group goes to, the admission cap they offer, what they
 * report. The fleet changes their states; this is the view over them.
 */
export class FleetServers {
  readonly list: ServerState[] = [];
  private rotate = 0;

  find(url: string): ServerState | undefined {
    const u = url.replace(/\/+$/, '');
    return this.list.find((s) => s.url === u);
  }

  /** The server that takes groups with the fewest in-flight jobs; ties rotate so an idle fleet fills evenly. */
  leastLoaded(exclude?: ReadonlySet<ServerState>): ServerState | undefined {
    let best: ServerState | undefined;
    const n = this.list.length;
    for (let k = 0; k < n; k++) {
      const s = this.list[(this.rotate + k) % n]!;
      if (takes(s) && !exclude?.has(s) && (best === undefined || s.inFlight < best.inFlight)) best = s;
    }
    this.rotate = n === 0 ? 0 : (this.rotate + 1) % n;
    return best;
  }

  /**
   * The admission cap over the servers that take groups now. Without `configured`: the sum of their
   * workers.run.size. With it (max_inflight_jobs, meant for the whole fleet): its share for those
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
      if (takes(s)) live += size;
    }
    if (configured === undefined) return Math.round(live);
    return total > 0 ? Math.round((configured * live) / total) : configured;
  }

  infos(): FleetServerInfo[] {
    return this.list.map((s) => ({
      url: s.url,
      healthy: s.healthy,
      in_flight: s.inFlight,
      run_workers: s.runSize ?? null,
      draining: s.draining,
    }));
  }

  /** The per-server clients; `{taking: true}` leaves out servers that drain. */
  clients(opts: { taking?: boolean } = {}): RolloutClient[] {
    return this.list.filter((s) => !opts.taking || !s.draining).map((s) => s.client);
  }
}
