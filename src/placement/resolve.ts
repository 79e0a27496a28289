import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { RaasError } from '../protocol/errors.js';

/** Resolves a host name to its addresses (DNS or /etc/hosts). Tests and air-gapped setups inject their own. */
export type Lookup = (host: string) => Promise<string[]>;

/** The system resolver (`getaddrinfo`, so /etc/hosts and search domains apply), all families. */
export const systemLookup: Lookup = async (host) => (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address);

/**
 * The host part of a server address: a URL (`http://node-3:8000/v1`) or a bare `host:port`
 * (ProRL configs and SGLang often omit the scheme). IPv6 brackets are removed.
 */
export function hostOf(address: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(address) ? address : `http://${address}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new RaasError('config_invalid', `"${address}" is not a server address; write http://host:port (or host:port)`);
  }
  const h = url.hostname.replace(/^\[|\]$/g, '');
  if (h === '') throw new RaasError('config_invalid', `"${address}" has no host; write http://host:port`);
  return h;
}

/** Canonical form of an address: `::ffff:10.0.0.1` is 10.0.0.1, and IPv6 is lower-case. */
function canonicalIp(ip: string): string {
  const m = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  return m ? m[1] : ip.toLowerCase();
}

/**
 * The addresses of each distinct host, resolved once and concurrently. A host that does not
 * resolve maps to an empty list (and a message in `failures`): it cannot match a node, but a rollout
 * server elsewhere may still reach it, so placement goes on.
 */
export async function resolveHosts(
  hosts: Iterable<string>,
  lookup: Lookup = systemLookup,
): Promise<{ ips: Map<string, string[]>; failures: string[] }> {
  const ips = new Map<string, string[]>();
  const failures: string[] = [];
  await Promise.all(
    [...new Set(hosts)].map(async (host) => {
      if (isIP(host)) return void ips.set(host, [canonicalIp(host)]);
      try {
        ips.set(host, [...new Set((await lookup(host)).map(canonicalIp))]);
      } catch (err) {
        ips.set(host, []);
        failures.push(`${host}: ${(err as Error).message}`);
      }
    }),
  );
  return { ips, failures };
}
