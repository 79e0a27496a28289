import type { FastifyRequest } from 'fastify';

/**
 * Who is looking at the console or the event stream. Today every authenticated client sees the
 * whole server; once the server has tenants, a tenant's token sees its own jobs and backends only.
 * This file is the one place that decides it: events, job rows and backend rows carry `tenant`,
 * and every console route and the event stream filter through `sees`.
 */
export interface Viewer {
  /** The tenant of the credential, when the server has tenants. */
  tenant?: string;
  /** Sees every tenant's jobs (the admin token, or a server without tenants). */
  all: boolean;
}

/** The viewer of a request (after the app's authentication passed it). */
export function viewerOf(_req: FastifyRequest): Viewer {
  return { all: true };
}

/** Whether the viewer may see an item (a job row, an event, a backend) of `tenant`. */
export function sees(v: Viewer, item: { tenant?: string }): boolean {
  return v.all || item.tenant === v.tenant;
}
