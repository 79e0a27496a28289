import { createHash, timingSafeEqual } from 'node:crypto';
import { RaasError } from '../protocol/errors.js';
import { isLoopbackHost } from '../util/loopback.js';
import type { Tenant } from './tenants/tenant.js';
import type { TenantSet } from './tenants/tenants.js';

export { isLoopbackHost } from '../util/loopback.js';

/** Refuses a non-loopback bind without a token unless `insecure` is set. */
export function assertBindAllowed(host: string, token: string | undefined, insecure: boolean): void {
  if (isLoopbackHost(host) || token || insecure) return;
  throw new RaasError(
    'config_invalid',
    `host ${host} is not a loopback address: pass --token <secret> (clients send "Authorization: Bearer <secret>"), or --insecure to serve without authentication`,
  );
}

/** Constant-time bearer check: both sides are hashed first so lengths leak nothing either. */
function makeTokenCheck(token: string): (authorization: string | undefined) => boolean {
  const want = createHash('sha256').update(token).digest();
  return (authorization) => {
    const m = /^Bearer\s+(.+)$/i.exec(authorization ?? '');
    const got = createHash('sha256')
      .update(m ? m[1].trim() : '')
      .digest();
    return timingSafeEqual(want, got) && m !== null;
  };
}

/** Who sent a request: a tenant (its jobs, its backends), the admin (server-wide routes), or both on a single-tenant server. */
export interface Principal {
  /** The tenant whose jobs and backends the request reaches; undefined for the admin of a multi-tenant server. */
  tenant: Tenant | undefined;
  /** May use server-wide routes (/stop, /start, /drain, /workers, /metrics, node registration). */
  admin: boolean;
}

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

/**
 * Maps an Authorization header to its principal, or undefined (401). A server without tenants: its
 * token (when set) is everyone's and names the admin and the implicit tenant at once; without a
 * token every request is both, as before. With tenants: the server's token is the admin's, each
 * tenant's token names that tenant. Tokens are compared as SHA-256 digests, so the time a lookup
 * takes says nothing about a token's bytes.
 */
export function makeAuthenticator(
  tenants: TenantSet,
  adminToken: string | undefined,
): (authorization: string | undefined) => Principal | undefined {
  const sole = tenants.sole;
  if (sole) {
    const everyone: Principal = { tenant: sole, admin: true };
    if (adminToken === undefined) return () => everyone;
    const check = makeTokenCheck(adminToken);
    return (h) => (check(h) ? everyone : undefined);
  }
  const byDigest = new Map<string, Principal>();
  for (const [t, token] of tenants.tokens) byDigest.set(sha(token), { tenant: t, admin: false });
  if (adminToken !== undefined) byDigest.set(sha(adminToken), { tenant: undefined, admin: true });
  return (h) => {
    const m = /^Bearer\s+(.+)$/i.exec(h ?? '');
    return m ? byDigest.get(sha(m[1]!.trim())) : undefined;
  };
}
