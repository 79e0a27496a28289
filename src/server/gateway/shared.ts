import fs from 'node:fs';
import { GatewayHost } from './host.js';

let shared: Promise<GatewayHost> | undefined;

/**
 * The process's gateway host, started on first use: one fastify app behind every job's endpoint.
 * Its directory goes when the process exits.
 */
export function sharedGatewayHost(): Promise<GatewayHost> {
  shared ??= GatewayHost.start().then((host) => {
    process.once('exit', () => fs.rmSync(host.root, { recursive: true, force: true }));
    return host;
  });
  return shared;
}
