import { RolloutClient } from '../client/client.js';
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
   * `replace` (default, DESIGN.md): POST /clear_llm_server then /add_llm_server for each. `sync`:
   * add or update the planned ones first, then remove the others, so the server is never without
   * a backend (no 503 no_llm_backends window during a weight update).
   */
  mode?: 'replace' | 'sync';
  signal?: AbortSignal;
}

/** What each rollout server reported after the plan was applied. */
export interface ApplyReport {
  servers: Array<{ rollout_server: string; backends: BackendInfo[] }>;
}

/**
 * Applies a plan: every rollout server of the plan gets exactly its LLM servers, with
 * `weight_version` when given. Servers are updated concurrently; one failing rejects the whole
 * call (after the others finished), naming the server.
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
          const stale = (await client.status(call)).backends.filter((b) => !keep.has(b.address));
          for (const b of stale) backends = (await client.removeLlmServer(b.address, call)).backends;
          if (a.llm_servers.length === 0 && stale.length === 0) backends = [];
        }
        return { rollout_server: a.rollout_server, backends };
      }),
    );
    const failed = settled.flatMap((r, i) => (r.status === 'rejected' ? [`${plan.assignments[i].rollout_server}: ${(r.reason as Error).message}`] : []));
    if (failed.length > 0) {
      const first = settled.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      const err = first.reason instanceof Error ? first.reason : new Error(String(first.reason));
      err.message = `placement not fully applied: ${failed.join('; ')}`;
      throw err;
    }
    return { servers: settled.map((r) => (r as PromiseFulfilledResult<ApplyReport['servers'][number]>).value) };
  } finally {
    for (const c of owned) c.close();
  }
}

function trim(url: string): string {
  return url.replace(/\/+$/, '');
}
