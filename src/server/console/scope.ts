import type { Tenant } from '../tenants/tenant.js';
import type { Access } from '../tenants/access.js';

/**
 * Who is looking at the console or the event stream, from the request's principal: a tenant's
 * token sees its own jobs and backends, the admin (and everyone on a server without tenants) sees
 * every tenant's. This file is the one place that decides it: events, job rows and backend rows
 * carry `tenant` on a server with tenants, and every console route and the event stream filter
 * through `sees`.
 */
export interface Viewer {
  /** The tenant of the credential (undefined for the admin of a multi-tenant server). */
  tenant?: string;
  /** Sees every tenant's jobs and backends. */
  all: boolean;
  /** The tenant whose pipeline figures and backends the viewer gets; undefined: every tenant. */
  scope: Tenant | undefined;
}

/** The viewer of a request (after the app's authentication named its principal). */
export function viewerOf(access: Access): Viewer {
  const p = access.principal;
  return { tenant: p.tenant?.name, all: p.admin, scope: access.scope() };
}

/** Whether the viewer may see an item (a job row, an event, a backend) of `tenant`. */
export function sees(v: Viewer, item: { tenant?: string }): boolean {
  return v.all || item.tenant === undefined || item.tenant === v.tenant;
}
