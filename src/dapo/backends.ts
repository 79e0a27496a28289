import type { RolloutClient } from '../client/client.js';
import type { BackendRef } from '../protocol/config-train.js';
import { place } from '../placement/index.js';

/** A backend as /add_llm_server takes it. */
export function normaliseBackend(b: BackendRef): { address: string; api?: 'vllm' | 'sglang' } {
  return typeof b === 'string' ? { address: b } : b;
}

/**
 * Places the LLM backends onto the fleet's rollout servers (src/placement: node-affine, then
 * round-robin) and registers them with `weightVersion`. `sync` (our default) adds or updates the
 * planned backends before removing the others, so a weight update never leaves a server without a
 * backend; `replace` is DESIGN.md's literal /clear_llm_server + /add_llm_server.
 */
export async function registerBackends(clients: RolloutClient[], backends: BackendRef[], weightVersion: string, mode: 'sync' | 'replace' = 'sync'): Promise<void> {
  if (backends.length === 0) return;
  await place(clients.map((c) => ({ url: c.url })), backends.map(normaliseBackend), { clients, weight_version: weightVersion, mode });
}
