/**
 * The loopback relay and harness launcher, run inside a sandbox by its own node:
 * `node relay.js '<RelayOptions JSON>'`, the prompt on stdin. It listens on 127.0.0.1 in the
 * sandbox's own network namespace and pipes every connection to the job's gateway socket (bound
 * read-only into the sandbox), so an unmodified agent CLI reaches its model at
 * http://127.0.0.1:<port> while the sandbox keeps no network. With a command, it starts the
 * harness with the base URLs in its environment, keeps the tail of its output, prints that tail
 * and exits with the harness's status; without one, it prints `{"port": N}` and relays until
 * stdin closes. Node builtins only: this file is copied alone next to the endpoints.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

/** What the launcher takes (one JSON argument). */
export interface RelayOptions {
  /** The gateway's socket as the sandbox sees it. */
  socket: string;
  /** Loopback port to listen on (0: any free one). */
  port?: number;
  /** The harness's argv; `{prompt}`, `{prompt_file}`, `{base_url}`, `{port}` are replaced. */
  command?: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** How the prompt (read from stdin) reaches the harness. */
  prompt?: { mode: 'arg' | 'stdin' | 'file'; file?: string };
  /** Bytes of the harness's combined output kept and printed at exit. */
  tail_bytes?: number;
  /** Files written before the harness starts (its settings), absolute path or relative to HOME → content. */
  files?: Record<string, string>;
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGTERM: 15 };

function readStdin(): Promise<string> {
  return new Promise((resolve) => {
    const parts: Buffer[] = [];
    process.stdin.on('data', (d: Buffer) => parts.push(d));
    process.stdin.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    process.stdin.on('error', () => resolve(Buffer.concat(parts).toString('utf8')));
  });
}

/** Keeps the last `cap` bytes written. */
class Tail {
  private parts: Buffer[] = [];
  private size = 0;
  constructor(private readonly cap: number) {}
  push(b: Buffer): void {
    this.parts.push(b);
    this.size += b.length;
    while (this.size - this.parts[0]!.length >= this.cap) this.size -= this.parts.shift()!.length;
  }
  text(): string {
    const all = Buffer.concat(this.parts);
    return all.subarray(Math.max(0, all.length - this.cap)).toString('utf8');
  }
}

function relay(opts: RelayOptions): Promise<net.Server> {
  const server = net.createServer((client) => {
    const upstream = net.connect(opts.socket);
    client.pipe(upstream).pipe(client);
    const drop = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => resolve(server));
  });
}

async function main(): Promise<void> {
  const opts = JSON.parse(process.argv[2] ?? '{}') as RelayOptions;
  if (!opts.socket) throw new Error('relay: options need socket');
  const server = await relay(opts);
  const port = (server.address() as net.AddressInfo).port;
  if (!opts.command?.length) {
    process.stdout.write(`${JSON.stringify({ port })}\n`);
    process.stdin.resume();
    process.stdin.on('end', () => process.exit(0));
    return;
  }
  const prompt = await readStdin();
  const base = `http://127.0.0.1:${port}`;
  const cwd = opts.cwd ?? process.cwd();
  const mode = opts.prompt?.mode ?? 'arg';
  const home = opts.env?.HOME ?? process.env.HOME ?? cwd;
  for (const [p, content] of Object.entries(opts.files ?? {})) {
    const file = path.resolve(home, p);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, content);
  }
  const promptFile = path.resolve(home, opts.prompt?.file ?? '.raas-prompt.md');
  fs.mkdirSync(path.dirname(promptFile), { recursive: true });
  if (mode === 'file') fs.writeFileSync(promptFile, prompt);
  const fill = (s: string): string =>
    s
      .replaceAll('{base_url}', base)
      .replaceAll('{port}', String(port))
      .replaceAll('{prompt_file}', promptFile)
      .replaceAll('{prompt}', mode === 'arg' ? prompt : '');
  const argv = opts.command.map(fill);
  if (mode === 'arg' && !opts.command.some((a) => a.includes('{prompt}'))) argv.push(prompt);
  const env: Record<string, string> = {
    OPENAI_BASE_URL: `${base}/v1`,
    OPENAI_API_BASE: `${base}/v1`,
    OPENAI_API_KEY: 'raas',
    ANTHROPIC_BASE_URL: base,
    ANTHROPIC_API_KEY: 'raas',
    RAAS_GATEWAY_URL: base,
    ...Object.fromEntries(Object.entries(opts.env ?? {}).map(([k, v]) => [k, fill(v)])),
  };
  const tail = new Tail(opts.tail_bytes ?? 64 * 1024);
  // Same process group as the relay: whoever ends the relay's group ends the harness with it.
  const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio: [mode === 'stdin' ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
  if (mode === 'stdin') {
    child.stdin!.on('error', () => undefined);
    child.stdin!.end(prompt);
  }
  child.stdout!.on('data', (d: Buffer) => tail.push(d));
  child.stderr!.on('data', (d: Buffer) => tail.push(d));
  for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.on(sig, () => child.kill(sig));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => {
    child.once('error', (e) => {
      tail.push(Buffer.from(`cannot start ${argv[0]}: ${e.message}\n`));
      resolve([127, null]);
    });
    child.once('close', (c, s) => resolve([c, s]));
  });
  process.stdout.write(tail.text(), () => process.exit(code ?? 128 + (SIGNALS[signal ?? ''] ?? 1)));
}

main().catch((e: unknown) => {
  process.stderr.write(`relay failed: ${(e as Error).stack ?? String(e)}\n`);
  process.exit(125);
});
