// Real components for the reliability suite: in-process rollout servers (port 0), `raas serve` as a
// child process (to SIGTERM / SIGKILL it like a real node), plain HTTP helpers, and a read-only view
// of the server's internal maps for the "nothing left behind" assertions.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRolloutServer, type RolloutServer, type ServerConfigInput } from '../../../src/server/index.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const CLI = path.join(ROOT, 'dist/src/cli.js');
/** The suite's test handlers (rel-faulty, rel-sandbox), loaded by path. */
export const HANDLERS = path.join(ROOT, 'test/reliability/fixtures/handlers.mjs');

/** A sandbox root the sandbox user can reach (as root it must not be under /root or /tmp of root-only dirs). */
export function sandboxRoot(name: string): string {
  const base = process.getuid?.() === 0 ? '/var/tmp' : fs.realpathSync(os.tmpdir());
  return `${base}/raas-rel-${name}-${process.pid}`;
}

/** A fresh temp directory (journals, configs). */
export function tempDir(name: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `raas-rel-${name}-`));
}

/** An in-process rollout server on port 0 with the suite's handlers loaded by path. */
export function inProcessServer(cfg: ServerConfigInput = {}): Promise<RolloutServer> {
  return startRolloutServer({ port: 0, log_level: 'silent', ...cfg, handler_modules: [HANDLERS, ...(cfg.handler_modules ?? [])] });
}

/** `raas serve` as a real child process. */
export interface ServeProcess {
  url: string;
  child: ChildProcess;
  pid: number;
  output(): string;
  /** Resolves with the exit code / signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(sig?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Spawns `node dist/src/cli.js serve --port 0 <args>` and waits for its "listening on" line. */
export function serveProcess(args: string[], env: Record<string, string> = {}): Promise<ServeProcess> {
  return cliProcess(['serve', '--port', '0', ...args], env);
}

/** Spawns `node dist/src/cli.js sim-llm --port 0 <args>` (a simulated backend that can be SIGKILLed). */
export function simProcess(args: string[] = []): Promise<ServeProcess> {
  return cliProcess(['sim-llm', '--port', '0', ...args]);
}

/** How long a child `raas` process may take to start listening. */
export const START_TIMEOUT_MS = Number(process.env.RAAS_REL_START_TIMEOUT_MS ?? 60_000);

/** Every child this worker started and that is still running: killed when the worker exits, whatever a test did. */
const liveChildren = new Set<ChildProcess>();
let exitHook = false;
function track(child: ChildProcess): void {
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
  if (!exitHook) {
    exitHook = true;
    process.once('exit', () => {
      for (const c of liveChildren) c.kill('SIGKILL');
    });
  }
}

/** Spawns `node dist/src/cli.js <args>` and waits until it prints "listening on <url>". */
export async function cliProcess(args: string[], env: Record<string, string> = {}): Promise<ServeProcess> {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  track(child);
  let buf = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.once('exit', (code, signal) => r({ code, signal })),
  );
  // A loaded 2-core machine can take tens of seconds to load the CLI and the tokenizer.
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (c: Buffer): void => {
      buf += c.toString();
      const m = /listening on (http:\/\/\S+?)[\s)]/.exec(buf);
      if (m) resolve(m[1]);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then(({ code, signal }) =>
      reject(new Error(`${args[0]} exited (${code ?? signal}) before listening: ${buf.slice(-2000)}`)),
    );
    setTimeout(
      () => reject(new Error(`${args[0]} did not print its URL within ${START_TIMEOUT_MS / 1000} s: ${buf.slice(-2000)}`)),
      START_TIMEOUT_MS,
    ).unref();
  }).catch((err: unknown) => {
    // Never leave a half-started child behind.
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    throw err;
  });
  return {
    url,
    child,
    pid: child.pid!,
    output: () => buf,
    exited,
    kill(sig: NodeJS.Signals = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(sig);
      return exited;
    },
  };
}

/** Runs `node dist/src/cli.js <args>` to completion (for commands expected to fail fast). */
export function runCli(args: string[], timeoutMs = START_TIMEOUT_MS): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    track(child);
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(t);
      resolve({ code, output: out });
    });
  });
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

/** One HTTP request with a hard timeout; the body is parsed as JSON when it is JSON. */
export async function request(
  url: string,
  init: {
    method?: string;
    body?: string | Buffer | Uint8Array;
    headers?: Record<string, string>;
    timeoutMs?: number;
    signal?: AbortSignal;
  } = {},
): Promise<Answer> {
  const signal = init.signal
    ? AbortSignal.any([init.signal, AbortSignal.timeout(init.timeoutMs ?? 30_000)])
    : AbortSignal.timeout(init.timeoutMs ?? 30_000);
  const res = await fetch(url, { method: init.method ?? 'GET', body: init.body as string | undefined, headers: init.headers, signal });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, text, body };
}

/** POSTs a JSON value. */
export function postJson(
  url: string,
  value: unknown,
  opts: { headers?: Record<string, string>; timeoutMs?: number; signal?: AbortSignal } = {},
): Promise<Answer> {
  return request(url, {
    method: 'POST',
    body: JSON.stringify(value),
    headers: { 'content-type': 'application/json', ...opts.headers },
    timeoutMs: opts.timeoutMs,
    signal: opts.signal,
  });
}

/** What the server still holds: every number must be 0 once the load has drained. */
export interface Internals {
  liveJobs: number;
  pendingCloses: number;
  queued: number;
  busyWorkers: number;
  groupBindings: number;
  activeOnBackends: number;
  finishedKept: number;
}

/** What the server holds after a scenario, through its public accessors (footprint, status, the pool). */
export function internals(server: RolloutServer): Internals {
  const f = server.pipeline.footprint();
  const st = server.pipeline.status();
  return {
    liveJobs: f.live,
    pendingCloses: f.pending_closes,
    queued: st.queued,
    busyWorkers: Object.values(st.workers).reduce((a, w) => a + w.busy, 0),
    groupBindings: server.pool.groupBindings,
    activeOnBackends: server.pool.list().reduce((a, b) => a + b.active, 0),
    finishedKept: f.kept,
  };
}

/** Polls until `fn` returns true (or throws with `what` after `ms`). */
export async function until(fn: () => boolean | Promise<boolean>, what: string, ms = 10_000, every = 25): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/**
 * POSTs JSON through node:http with an unbounded keep-alive agent: for a thousand concurrent held
 * requests, where fetch's 10 s connect timeout fires while a loaded machine works off the backlog.
 */
export function httpPost(url: string, value: unknown, agent: http.Agent, timeoutMs = 120_000): Promise<Answer> {
  return httpRequest(url, 'POST', JSON.stringify(value), agent, timeoutMs);
}

/** GET through node:http on the given agent (see httpPost). */
export function httpGet(url: string, agent: http.Agent, timeoutMs = 30_000): Promise<Answer> {
  return httpRequest(url, 'GET', undefined, agent, timeoutMs);
}

/** Reads a whole response: status, headers, text, and the JSON body when it parses. */
async function readAnswer(res: http.IncomingMessage): Promise<Answer> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.statusCode ?? 0, headers: new Headers(res.headers as Record<string, string>), text, body };
}

function httpRequest(url: string, method: string, data: string | undefined, agent: http.Agent, timeoutMs: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> =
      data === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) };
    const req = http.request(url, { method, agent, timeout: timeoutMs, headers }, (res) => {
      readAnswer(res).then(resolve, reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(data);
  });
}

/**
 * One request with the path sent exactly as given (fetch and URL normalise "/a/../b" to "/b" before
 * sending, which would test the client instead of the server).
 */
export function rawRequest(base: string, method: string, rawPath: string, headers: Record<string, string> = {}): Promise<Answer> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, method, path: rawPath, headers, agent: false, timeout: 30_000 }, (res) => {
      readAnswer(res).then(resolve, reject);
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
    req.on('error', reject);
    req.end();
  });
}
