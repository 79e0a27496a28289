/**
 * Entry point of the tool server inside the sandbox: `node main.js '<ToolServerOptions JSON>'`.
 * Prints one `{"ready":true}` line on stdout once the socket listens, and exits when stdin closes
 * (the host went away) or on a `shutdown` request.
 */
import { ToolServer } from './server.js';
import type { ToolServerOptions } from './protocol.js';
import { existsSync } from 'node:fs';
import { copySeed } from './files.js';
import { activateImage } from './image-env.js';

async function main(): Promise<void> {
  const opts = JSON.parse(process.argv[2] ?? '{}') as ToolServerOptions;
  if ((!opts.socket && opts.conn_fd === undefined) || !opts.workspace)
    throw new Error('tool server: options need socket (or conn_fd) and workspace');
  if (opts.seed_dir) copySeed(opts.seed_dir, opts.workspace);
  if (opts.image_env === 'inherit') {
    const own = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined));
    const found = activateImage({ ...own, ...(opts.env ?? {}) }, '/usr/local/bin:/usr/bin:/bin', existsSync);
    Object.assign(opts, { env: found.env, shell: found.shell, python: opts.python ?? found.python });
  }
  const server = new ToolServer(opts, () => process.exit(0));
  await server.listen();
  // Over a socketpair the ready line went on the connection; stdout is /dev/null there, and opening
  // node's stdout stream would only delay the first request.
  if (opts.conn_fd === undefined) process.stdout.write(JSON.stringify({ ready: true, pid: process.pid }) + '\n');
  server.warmAfterFirstAnswer = true;
  // Over a socketpair, the connection's close is the host going away (stdin is /dev/null then).
  if (opts.conn_fd === undefined) {
    process.stdin.on('end', () => void server.close().then(() => process.exit(0)));
    process.stdin.on('error', () => undefined);
    process.stdin.resume();
  }
  for (const sig of ['SIGTERM', 'SIGHUP'] as const) process.on(sig, () => void server.close().then(() => process.exit(0)));
}

main().catch((e: unknown) => {
  process.stderr.write(`tool server failed: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
