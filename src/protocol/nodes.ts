import { z } from 'zod';
import { LlmApi } from './llm.js';

// The node routes follow Polar, ProRL Agent Server's rewrite (NVIDIA-NeMo/ProRL-Agent-Server,
// src/polar/rollout/models.py and server.py): a node registers with its URL and stage sizes, then
// heartbeats its stage occupancy; DELETE /nodes/{id} drains it. Where Polar has a gateway node we
// have a rollout server, so `gateway_url` is that server's URL. Our additions are optional.

/** Per-node stage occupancy and queue depths (Polar's NodeStageMetrics; ready = waiting for RUN, postrun = EVAL). */
export const NodeStageMetrics = z.object({
  init_queue_depth: z.number().int().nonnegative().default(0),
  init_inflight: z.number().int().nonnegative().default(0),
  ready_depth: z.number().int().nonnegative().default(0),
  run_inflight: z.number().int().nonnegative().default(0),
  postrun_queue_depth: z.number().int().nonnegative().default(0),
  postrun_inflight: z.number().int().nonnegative().default(0),
});
export type NodeStageMetrics = z.infer<typeof NodeStageMetrics>;

/** An LLM server that runs on the node, offered to the trainers for placement (ours). */
export const NodeBackend = z.strictObject({
  address: z.string().url(),
  api: LlmApi.optional(),
  /** Only this tenant's trainer places it (default: any). */
  tenant: z.string().min(1).max(64).optional(),
});
export type NodeBackend = z.infer<typeof NodeBackend>;

/** POST /nodes/register (Polar's NodeRegistrationRequest, plus ours). Registering an id again replaces it. */
export const NodeRegistration = z.looseObject({
  node_id: z.string().min(1).max(256),
  /** The rollout server's base URL. */
  gateway_url: z.string().url(),
  max_init_workers: z.number().int().min(1),
  max_run_workers: z.number().int().min(1),
  max_postrun_workers: z.number().int().min(1),
  /** Polar's default 30 s; a node that misses `registry.missed_heartbeats` of them counts as dead. */
  heartbeat_interval_seconds: z.number().positive().max(3600).default(30),
  // ours
  backends: z.array(NodeBackend).max(256).default([]),
  draining: z.boolean().default(false),
});
export type NodeRegistration = z.infer<typeof NodeRegistration>;

/** POST /nodes/{id}/heartbeat (Polar's NodeHeartbeatRequest, plus ours: the sizes in force and the drain flag). */
export const NodeHeartbeat = z.looseObject({
  metrics: NodeStageMetrics.default(NodeStageMetrics.parse({})),
  max_init_workers: z.number().int().min(1).optional(),
  max_run_workers: z.number().int().min(1).optional(),
  max_postrun_workers: z.number().int().min(1).optional(),
  draining: z.boolean().optional(),
});
export type NodeHeartbeat = z.infer<typeof NodeHeartbeat>;

/** What the node routes answer (Polar's GatewayNodeInfo, plus ours). */
export const NodeInfo = z.looseObject({
  node_id: z.string(),
  gateway_url: z.string(),
  max_init_workers: z.number().int(),
  max_run_workers: z.number().int(),
  max_postrun_workers: z.number().int(),
  metrics: NodeStageMetrics,
  dispatch_reservations: z.number().int().nonnegative(),
  /** False once the node missed its heartbeats: trainers treat it as a dead server. */
  healthy: z.boolean(),
  /** Taking no new work (DELETE /nodes/{id}, or the server's POST /drain): trainers place nothing more on it. */
  draining: z.boolean(),
  heartbeat_interval_seconds: z.number(),
  /** ISO 8601. */
  last_heartbeat: z.string(),
  // ours
  backends: z.array(NodeBackend).default([]),
  /** ISO 8601. */
  registered_at: z.string().optional(),
});
export type NodeInfo = z.infer<typeof NodeInfo>;

/** GET /nodes. */
export const NodeList = z.array(NodeInfo);
