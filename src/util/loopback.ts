import { isIP } from 'node:net';

/** True for 127.0.0.0/8, ::1 (and its IPv4-mapped forms) and `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1' || h === '0:0:0:0:0:0:0:1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return isIP(v4) === 4 && v4.startsWith('127.');
}

/**
 * Whether a request's Host header names this machine by a loopback name (`localhost`, 127.0.0.0/8,
 * `[::1]`, with or without a port). A server without authentication on loopback answers only these:
 * a page of another site whose name its DNS rebinds to 127.0.0.1 is same-origin with the server in
 * the browser, but its requests still carry its own name. A request without Host (HTTP/1.0) passes.
 */
export function hostHeaderIsLoopback(header: string | undefined): boolean {
  if (header === undefined) return true;
  const m = /^(\[[^\]]*\]|[^:]*)(?::\d+)?$/.exec(header.trim());
  return m !== null && isLoopbackHost(m[1]!);
}
