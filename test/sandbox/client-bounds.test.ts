import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RaasError } from '../../src/protocol/errors.js';
import { DEFAULT_MAX_LINE_BYTES, lineCapFor, ToolClient } from '../../src/server/sandbox/client.js';
import { observed } from './helpers.js';

/**
 * A fake tool server in its own process (so its writing does not load the event loop measured
 * here): it accepts one connection, reads the first request line, then runs the named scenario.
 */
const SERVER = `
const net = require('node:net');
const [sock, scenario] = process.argv.slice(1);
const srv = net.createServer((c) => {
  c.on('error', () => process.exit(0));
  c.once('data', async () => {
    if (scenario === 'flood') {
      // 8 MiB without a newline, as fast as the socket takes it.
      const chunk = Buffer.alloc(64 << 10, 120);
      for (let i = 0; i < 128 && !c.destroyed; i++) if (!c.write(chunk)) await new Promise((r) => c.once('drain', r));
    } else if (scenario === 'trickle') {
      // One valid 3 MiB answer sent 64 bytes at a time, then a second answer after it.
      const body = 'y'.repeat(3 << 20);
      const line = Buffer.from(JSON.stringify({ id: 1, ok: true, result: body }) + '\\n');
      for (let i = 0; i < line.length && !c.destroyed; i += 64) {
        if (!c.write(line.subarray(i, i + 64))) await new Promise((r) => c.once('drain', r));
        if (i % 4096 === 0) await new Promise((r) => setImmediate(r));
      }
    } else if (scenario === 'split') {
      // Two answers in one write, and a two-byte character split across writes.
      const a = Buffer.from(JSON.stringify({ id: 1, ok: true, result: 'caf\\u00e9 \\u2603' }) + '\\n');
      const b = Buffer.from(JSON.stringify({ id: 2, ok: true, result: 'two' }) + '\\n');
      const cut = a.indexOf(0xc3) + 1;
      c.write(a.subarray(0, cut));
      setTimeout(() => c.write(Buffer.concat([a.subarray(cut), b])), 50);
    }
  });
});
srv.listen(sock, () => process.stdout.write('ready\\n'));
`;

interface Fake {
  proc: ChildProcess;
  sock: string;
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-cb-'));
const procs: ChildProcess[] = [];
let n = 0;

async function fakeServer(scenario: string): Promise<Fake> {
  const sock = path.join(dir, `${scenario}-${++n}.sock`);
  const proc = spawn(process.execPath, ['-e', SERVER, sock, scenario], { stdio: ['ignore', 'pipe', 'inherit'] });
  procs.push(proc);
  await new Promise<void>((resolve, reject) => {
    proc.stdout!.once('data', () => resolve());
    proc.once('exit', (code) => reject(new Error(`fake server exited ${code}`)));
  });
  return { proc, sock };
}

/** Event-loop delay while `fn` runs: max and p99 in ms. */
async function lagDuring<T>(fn: () => Promise<T>): Promise<{ value: T; maxMs: number; p99Ms: number }> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  try {
    const value = await fn();
    return { value, maxMs: h.max / 1e6, p99Ms: h.percentile(99) / 1e6 };
  } finally {
    h.disable();
  }
}

describe('ToolClient line bound (host side of the tool-server protocol)', () => {
  beforeAll(() => fs.mkdirSync(dir, { recursive: true }));
  afterEach(() => {
    for (const p of procs.splice(0)) if (p.exitCode === null) p.kill('SIGKILL');
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('fails the connection on an 8 MiB line without a newline, holding no more than the cap', async () => {
    const fake = await fakeServer('flood');
    const client = await ToolClient.connect(fake.sock, undefined, { maxLineBytes: 4 << 20 });
    const {
      value: err,
      maxMs,
      p99Ms,
    } = await lagDuring(() =>
      client.call('ping', {}).then(
        () => undefined,
        (e: unknown) => e,
      ),
    );
    observed('8 MiB flood', { maxLagMs: maxMs.toFixed(1), p99LagMs: p99Ms.toFixed(1), peakBuffered: client.peakBufferedBytes });
    expect(err).toBeInstanceOf(RaasError);
    expect((err as RaasError).code).toBe('sandbox_error');
    expect((err as RaasError).message).toMatch(/the tool server sent a line over 4194304 bytes.*sandbox\.output_cap/);
    expect(client.peakBufferedBytes).toBeLessThanOrEqual(4 << 20);
    expect(client.peakBufferedBytes).toBeGreaterThan(3 << 20);
    // Later calls fail at once with the same error; the fake server sees its connection end.
    await expect(client.call('ping', {})).rejects.toBe(err);
    await new Promise((r) => (fake.proc.exitCode !== null ? r(undefined) : fake.proc.once('exit', r)));
    expect(p99Ms).toBeLessThan(100);
  });

  it('assembles a 3 MiB answer trickled in 64-byte writes, with low event-loop lag', async () => {
    const fake = await fakeServer('trickle');
    const client = await ToolClient.connect(fake.sock);
    const t = performance.now();
    const { value, maxMs, p99Ms } = await lagDuring(() => client.call<string>('ping', {}));
    const ms = performance.now() - t;
    observed('3 MiB answer in 64-byte writes', { ms: ms.toFixed(0), maxLagMs: maxMs.toFixed(1), p99LagMs: p99Ms.toFixed(1) });
    expect(value.length).toBe(3 << 20);
    expect(client.peakBufferedBytes).toBeGreaterThan(2 << 20);
    expect(ms).toBeLessThan(20_000);
    expect(p99Ms).toBeLessThan(100);
    client.close();
  });

  it('fails a trickled line as soon as it passes the cap', async () => {
    const fake = await fakeServer('trickle');
    const client = await ToolClient.connect(fake.sock, undefined, { maxLineBytes: 1 << 20 });
    await expect(client.call('ping', {})).rejects.toThrow(/over 1048576 bytes/);
    expect(client.peakBufferedBytes).toBeLessThanOrEqual(1 << 20);
  });

  it('gives a read_file answer the room its max_bytes allows (base64), and no more', async () => {
    const roomy = await ToolClient.connect((await fakeServer('trickle')).sock, undefined, { maxLineBytes: 1 << 20 });
    expect((await roomy.call<string>('read_file', { path: 'f', max_bytes: 3 << 20 })).length).toBe(3 << 20);
    roomy.close();
    const tight = await ToolClient.connect((await fakeServer('trickle')).sock, undefined, { maxLineBytes: 1 << 20 });
    const room = Math.ceil((1 << 20) / 3) * 4 + (64 << 10);
    await expect(tight.call('read_file', { path: 'f', max_bytes: 1 << 20 })).rejects.toThrow(new RegExp(`over ${room} bytes`));
    expect(tight.peakBufferedBytes).toBeLessThanOrEqual(room);
  });

  it('decodes a character split across reads and several answers in one read', async () => {
    const fake = await fakeServer('split');
    const client = await ToolClient.connect(fake.sock);
    const [a, b] = await Promise.all([client.call<string>('ping', {}), client.call<string>('ping', {})]);
    expect(a).toBe('café ☃');
    expect(b).toBe('two');
    client.close();
  });

  it('sizes the small-answer cap from sandbox.output_cap', () => {
    expect(lineCapFor({ output_cap: 30_000 })).toBe(DEFAULT_MAX_LINE_BYTES);
    // Four capped fields, each character JSON-escaped at worst (6 bytes), plus the envelope.
    expect(lineCapFor({ output_cap: 1_000_000 })).toBe(24_000_000 + (64 << 10));
  });
});
