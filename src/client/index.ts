/** Trainer-side HTTP clients of the rollout server: one server, or a fleet with failover. */
export { RolloutClient } from './client.js';
export type { RolloutClientOptions, ProcessInput } from './client.js';
export { RolloutFleet } from './fleet.js';
export type { RolloutFleetOptions, FleetServerInfo, FleetStats } from './fleet.js';
