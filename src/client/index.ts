/** Trainer-side HTTP clients of the rollout server: one server, or a fleet with failover. */
export { RolloutClient } from './client.js';
export type { RolloutClientOptions, ProcessOptions, ProcessInput } from './client.js';
export { RolloutFleet } from './fleet.js';
export type { RolloutFleetOptions, FleetServerInfo, FleetStats } from './fleet.js';
export { backoffDelay, parseRetryAfter, DEFAULT_BACKOFF, MAX_RETRY_AFTER_MS } from './retry.js';
export type { Backoff } from './retry.js';
export type { Agents, CallOptions } from './transport.js';
