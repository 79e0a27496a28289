import { RolloutClient } from '../client/client.js';
import { RaasError } from '../protocol/errors.js';
import type { BackendInfo } from '../protocol/llm.js';
import type { PlacementPlan, RolloutServerSpec } from './plan.js';

/** Options of {@link applyPlacement}. */
export interface ApplyOptions {
  /** Clients to use, by rollout server URL (the fleet's); others are created from `servers` and closed after. */
  clients?: RolloutClient[];
  /** Rollout servers with their tokens, for servers without a client in `clients`. */
  servers?: RolloutServerSpec[];
  /** Registered with every backend (the coordinator passes `String(policy_version)`). */
  weight_version?: string;
  /**
   * `replace` (default): POST /clear_llm_server then /add_llm_server for each. `sync`:
   * add or update the planned ones first, then remove the others, so the server is never without
   * a backend (no 503 no_llm_backends window during a weight update).
   */
  mode?: 'replace' | 'sync';
  /**
   * A rollout server that cannot be reached (refused, reset or timed out through the client's
   * retries: `server_unreachable`) goes to `skipped` instead of failing the call, so the live part
   * of the fleet is still placed. Other failures (a refused token, a bad address) still reject.
   */
  skip_unreachable?: boolean;
  signal?: AbortSignal;
}

/** What each rollout server reported after the plan was applied. */
export interface ApplyReport {
  servers: Array<{ rollout_server: string; backends: BackendInfo[] }>;
  /** Servers left out with `skip_unreachable`, with the error that left them out. */
  skipped: Array<{ rollout_server: string; error: string }>;
}

/**
 * Applies a plan: every rollout server of the plan gets exactly its LLM servers, with
 * `weight_version` when given. Servers are updated concurrently; one failing rejects the whole
 * call (after the others finished), naming the server, unless it is unreachable and
 * `skip_unreachable` is set.
 */
export async function applyPlacement(plan: PlacementPlan, opts: ApplyOptions = {}): Promise<ApplyReport> {
  const byUrl = new Map((opts.clients ?? []).map((c) => [c.url, c]));
  const tokens = new Map((opts.servers ?? []).map((s) => [trim(s.url), s.token]));
  const owned: RolloutClient[] = [];
  const clientFor = (url: string): RolloutClient => {
    const known = byUrl.get(trim(url));
    if (known) return known;
    const c = new RolloutClient({ url, token: tokens.get(trim(url)) });
    owned.push(c);
    byUrl.set(c.url, c);
    return c;
  };
  const call = { signal: opts.signal };
  const wv = opts.weight_version === undefined ? {} : { weight_version: opts.weight_version };
  try {
    const settled = await Promise.allSettled(
      plan.assignments.map(async (a) => {
        const client = clientFor(a.rollout_server);
        let backends: BackendInfo[] = [];
        if ((opts.mode ?? 'replace') === 'replace') {
          await client.clearLlmServers(call);
          for (const l of a.llm_servers) backends = (await client.addLlmServer({ address: l.address, api: l.api, ...wv }, call)).backends;
        } else {
          for (const l of a.llm_servers) backends = (await client.addLlmServer({ address: l.address, api: l.api, ...wv }, call)).backends;
          const keep = new Set(a.llm_servers.map((l) => l.address));
          // The last add answered with the server's whole list: no GET /status needed (a weight
          // update re-registers on every server of the fleet, so each call saved is one per server).
          const current = a.llm_servers.length > 0 ? backends : (await client.status(call)).backends;
          const stale = current.filter((b) => !keep.has(b.address));
          for (const b of stale) backends = (await client.removeLlmServer(b.address, call)).backends;
          if (a.llm_servers.length === 0 && stale.length === 0) backends = [];
        }
        return { rollout_server: a.rollout_server, backends };
      }),
    );
    const servers: ApplyReport['servers'] = [];
    const skipped: ApplyReport['skipped'] = [];
    const failed: Array<{ reason: unknown; line: string }> = [];
    settled.forEach((r, i) => {
      const url = plan.assignments[i].rollout_server;
      if (r.status === 'fulfilled') servers.push(r.value);
      else if (opts.skip_unreachable && unreachable(r.reason) && !opts.signal?.aborted)
        skipped.push({ rollout_server: url, error: (r.reason as Error).message });
      else failed.push({ reason: r.reason, line: `${url}: ${(r.reason as Error)?.message ?? String(r.reason)}` });
    });
    if (failed.length > 0) {
      const err = failed[0].reason instanceof Error ? failed[0].reason : new Error(String(failed[0].reason));
      err.message = `placement not fully applied: ${failed.map((f) => f.line).join('; ')}`;
      throw err;
    }
    return { servers, skipped };
  } finally {
    for (const c of owned) c.close();
  }
}

function unreachable(err: unknown): boolean {
  return err instanceof RaasError && err.code === 'server_unreachable';
}

function trim(url: string): string {
  return url.replace(/\/+$/, '');
}
