import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { processesInNamespace } from '../../src/server/sandbox/proc.js';

/** A sandbox root for one test file, under /var/tmp so the sandbox user can reach it (as root). */
export function testRoot(name: string): string {
  const base = process.getuid?.() === 0 ? '/var/tmp' : fs.realpathSync(process.env.TMPDIR ?? '/tmp');
  return `${base}/raas-t-${name}-${process.pid}`;
}

/** A real HTTP server on the host's 127.0.0.1: the target of escape attempts and the health check. */
export async function hostServer(): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => res.end('ok'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return { port, close: () => new Promise((r) => server.close(() => r())) };
}

/** Milliseconds the host health check takes to answer (throws past the limit). */
export async function healthCheck(port: number, limitMs = 5000): Promise<number> {
  const t = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(limitMs) });
  await res.text();
  return performance.now() - t;
}

/** Waits until no process is left in a pid namespace; returns what is left after `ms`. */
export async function waitNamespaceEmpty(ns: string, ms = 3000): Promise<number[]> {
  const until = Date.now() + ms;
  for (;;) {
    const left = processesInNamespace(ns);
    if (left.length === 0 || Date.now() > until) return left;
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Records what an escape attempt observed (printed with the test output, one line per attempt). */
export function observed(attempt: string, what: unknown): void {
  const text = typeof what === 'string' ? what : JSON.stringify(what);
  console.info(`[observed] ${attempt}: ${text.replace(/\s+/g, ' ').trim().slice(0, 300)}`);
}
