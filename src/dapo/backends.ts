import type { RolloutClient } from '../client/client.js';
import type { BackendRef } from '../protocol/config-train.js';
import { RaasError } from '../protocol/errors.js';
import { place, type ApplyReport, type PlacementPlan } from '../placement/index.js';

/** How long a rollout server may take to answer GET /health before a placement leaves it out. */
const LIVE_PROBE_MS = 2000;

/** A backend as /add_llm_server takes it. */
function normaliseBackend(b: BackendRef): { address: string; api?: 'vllm' | 'sglang' } {
  return typeof b === 'string' ? { address: b } : b;
}

/** What {@link registerBackends} did: the plan over the live servers, what they report, and who was left out. */
export interface RegisterReport {
  plan: PlacementPlan;
  applied: ApplyReport;
  /** Rollout servers left out: no answer to GET /health before planning, or unreachable while applying. */
  skipped: Array<{ rollout_server: string; error: string }>;
}

/**
 * Places the LLM backends onto the fleet's live rollout servers (src/placement: node-affine, then
 * round-robin) and registers them with `weightVersion`. A server that does not answer GET /health
 * is left out of the plan (and comes back at the next call once it answers), so one dead node
 * never fails a weight update; only a fleet with no live server does. `sync` (our default) adds or
 * updates the planned backends before removing the others, so a weight update never leaves a
 * server without a backend; `replace` is the literal /clear_llm_server + /add_llm_server.
 */
export async function registerBackends(
  clients: RolloutClient[],
  backends: BackendRef[],
  weightVersion: string,
  mode: 'sync' | 'replace' = 'sync',
  opts: { signal?: AbortSignal; probe_timeout_ms?: number } = {},
): Promise<RegisterReport | undefined> {
  if (backends.length === 0) return undefined;
  const timeout = opts.probe_timeout_ms ?? LIVE_PROBE_MS;
  const up = await Promise.all(clients.map((c) => c.health({ timeout_ms: timeout, signal: opts.signal })));
  const live = clients.filter((_, i) => up[i]);
  const skipped = clients
    .filter((_, i) => !up[i])
    .map((c) => ({ rollout_server: c.url, error: `no answer to GET /health within ${timeout} ms` }));
  if (live.length === 0) {
    throw new RaasError(
      'server_unreachable',
      `placement: no rollout server answers GET /health (${clients.map((c) => c.url).join(', ')}); start \`raas serve\` or check the servers' URLs`,
    );
  }
  const { plan, applied } = await place(
    live.map((c) => ({ url: c.url })),
    backends.map(normaliseBackend),
    {
      clients: live,
      weight_version: weightVersion,
      mode,
      skip_unreachable: true,
      signal: opts.signal,
    },
  );
  return { plan, applied, skipped: [...skipped, ...applied.skipped] };
}
