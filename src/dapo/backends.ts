import type { RolloutClient } from '../client/client.js';
import type { BackendRef } from '../protocol/config-train.js';

/** A backend as the rollout server's /add_llm_server takes it. */
export function normaliseBackend(b: BackendRef): { address: string; api?: 'vllm' | 'sglang' } {
  return typeof b === 'string' ? { address: b } : b;
}

/**
 * Clears and re-registers the LLM backends on every rollout server with `weightVersion`.
 * TEMPORARY round-robin until src/placement lands; then this calls its node-affine plan.
 */
export async function registerBackends(clients: RolloutClient[], backends: BackendRef[], weightVersion: string): Promise<void> {
  if (backends.length === 0) return;
  const plan = new Map<RolloutClient, Array<{ address: string; api?: 'vllm' | 'sglang' }>>();
  clients.forEach((c) => plan.set(c, []));
  backends.forEach((b, i) => plan.get(clients[i % clients.length])!.push(normaliseBackend(b)));
  await Promise.all(
    [...plan].map(async ([client, list]) => {
      await client.clearLlmServers();
      for (const b of list) await client.addLlmServer({ ...b, weight_version: weightVersion });
    }),
  );
}
