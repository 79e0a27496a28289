import { z } from 'zod';
import { LlmApi } from './llm.js';

// The node routes follow Polar, ProRL Agent Server's rewrite (NVIDIA-NeMo/ProRL-Agent-Server,
// src/polar/rollout/models.py and server.py): a node registers with its URL and stage sizes, then
// heartbeats its stage occupancy; DELETE /nodes/{id} drains it. Where Polar has a gateway node we
// have a rollout server, so `gateway_url` is that server's URL. Our additions are optional.

/** An LLM server that runs on the node, offered to the trainers for placement (ours). */
export const NodeBackend = z.strictObject({
  address: z.string().url(),
  api: LlmApi.optional(),
  /** Only this tenant's trainer places it (default: any). */
  tenant: z.string().min(1).max(64).optional(),
});
export type NodeBackend = z.infer<typeof NodeBackend>;
