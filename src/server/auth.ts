import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { RaasError } from '../protocol/errors.js';

/** True for 127.0.0.0/8, ::1 (and its IPv4-mapped forms) and `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

/** Refuses a non-loopback bind without a token unless `insecure` is set. */
export function assertBindAllowed(host: string, token: string | undefined, insecure: boolean): void {
  if (isLoopbackHost(host) || token || insecure) return;
  throw new RaasError(
    'config_invalid',
    `host ${host} is not a loopback address: pass --token <secret> (clients send "Authorization: Bearer <secret>"), or --insecure to serve without authentication`,
  );
}

/** Constant-time bearer check: both sides are hashed first so lengths leak nothing either. */
export function makeTokenCheck(token: string): (authorization: string | undefined) => boolean {
  const want = createHash('sha256').update(token).digest();
  return (authorization) => {
    const m = /^Bearer\s+(.+)$/i.exec(authorization ?? '');
    const got = createHash('sha256')
      .update(m ? m[1].trim() : '')
      .digest();
    return timingSafeEqual(want, got) && m !== null;
  };
}
