import os from 'node:os';
import { isLoopbackHost } from '../../util/loopback.js';
import { normalizeAddress } from '../llm/http.js';

/** Names and addresses of this machine: a backend bound to 0.0.0.0 here answers on each of them. */
function thisHost(): Set<string> {
  const names = new Set(['0.0.0.0', '::', os.hostname().toLowerCase()]);
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) names.add(a.address.toLowerCase());
  return names;
}

/** `::ffff:7f00:1` (how URL writes an IPv4-mapped address) as `::ffff:127.0.0.1`. */
function unmapped(host: string): string {
  const m = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (!m) return host;
  const hi = Number.parseInt(m[1]!, 16);
  const lo = Number.parseInt(m[2]!, 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/**
 * Which server a backend address reaches, as far as the address alone can tell: the URL's own
 * normal form (case, `127.1`, a decimal IPv4, the default port), and every name of this machine
 * (localhost, 127.0.0.0/8, ::1, 0.0.0.0, its hostname and interface addresses) as one. Two
 * tenants' addresses with one identity reach one server, so the second is refused. A remote host
 * under two DNS names or two of its addresses is not recognised.
 */
export function backendIdentity(address: string): string {
  let u: URL;
  try {
    u = new URL(normalizeAddress(address));
  } catch {
    return normalizeAddress(address);
  }
  const host = unmapped(u.hostname.replace(/^\[|\]$/g, '').toLowerCase()).replace(/\.$/, '');
  const port = u.port || (u.protocol === 'https:' ? '443' : '80');
  const local = isLoopbackHost(host) || thisHost().has(host);
  return `${local ? 'this-host' : host}:${port}`;
}

/**
 * An `allowed_backends` entry as a backend identity: `http://host:port` as backendIdentity says,
 * `http://host:*` as `<host identity>:*` (any port of that host).
 */
export function allowedIdentity(entry: string): string {
  const any = /:\*\/?$/.test(entry);
  const id = backendIdentity(any ? entry.replace(/:\*(\/?)$/, ':1$1') : entry);
  return any ? `${id.slice(0, id.lastIndexOf(':'))}:*` : id;
}

/** Whether a backend identity is on a list of allowedIdentity entries. */
export function identityAllowed(list: readonly string[], id: string): boolean {
  return list.includes(id) || list.includes(`${id.slice(0, id.lastIndexOf(':'))}:*`);
}
