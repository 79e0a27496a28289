import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { LoopbackLeases, loopbackAddress } from '../../src/server/sandbox/leases.js';
import { checkSocketPath } from '../../src/server/sandbox/host.js';
import { createSandboxRuntime } from '../../src/server/sandbox/index.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-leases-'));
const repo = path.resolve(import.meta.dirname, '../..');

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('loopback lease allocator', () => {
  it('never hands out 127.0.0.x and covers the 127/8 space', () => {
    expect(loopbackAddress(0)).toBe('127.1.0.1');
    expect(loopbackAddress(253)).toBe('127.1.0.254');
    expect(loopbackAddress(254)).toBe('127.1.1.1');
    expect(loopbackAddress(255 * 256 * 254 - 1)).toBe('127.255.255.254');
  });

  it('gives unique addresses, releases them, and reclaims expired leases (injected clock)', () => {
    let now = 1_000;
    const leases = new LoopbackLeases(path.join(dir, 'a.json'), 60_000, () => now);
    const a = leases.acquire();
    const b = leases.acquire();
    expect(a).not.toBe(b);
    expect(Object.keys(leases.list()).sort()).toEqual([a, b].sort());
    leases.release(a);
    expect(Object.keys(leases.list())).toEqual([b]);
    now += 61_000;
    expect(leases.list()).toEqual({});
  });

  it('reclaims leases of processes that died', () => {
    const leases = new LoopbackLeases(path.join(dir, 'b.json'), 60_000);
    leases.acquire(2 ** 22 + 12345); // above pid_max: never alive
    const mine = leases.acquire();
    expect(Object.keys(leases.list())).toEqual([mine]);
  });

  it('is safe across processes: 4 processes × 25 leases are all distinct', async () => {
    const file = path.join(dir, 'c.json');
    const script = `
      import { LoopbackLeases } from ${JSON.stringify(path.join(repo, 'dist/src/server/sandbox/leases.js'))};
      const l = new LoopbackLeases(${JSON.stringify(file)}, 60000);
      const out = [];
      for (let i = 0; i < 25; i++) out.push(l.acquire());
      console.log(JSON.stringify(out));
      setTimeout(() => {}, 300);`;
    const runs = await Promise.all(
      [0, 1, 2, 3].map(
        () =>
          new Promise<string[]>((resolve, reject) => {
            const c = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
            let out = '';
            c.stdout.on('data', (d: Buffer) => (out += d));
            c.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as string[]) : reject(new Error(`exit ${code}`))));
          }),
      ),
    );
    const all = runs.flat();
    expect(all).toHaveLength(100);
    expect(new Set(all).size).toBe(100);
  });
});

describe('Unix socket path length', () => {
  it('accepts 107 bytes and refuses 108 with a message naming the fix', () => {
    expect(() => checkSocketPath('/' + 'a'.repeat(106))).not.toThrow();
    expect(() => checkSocketPath('/' + 'a'.repeat(107))).toThrow(/108 bytes, over the 107-byte limit.*sandbox\.root/);
  });

  it('a sandbox root too long for socket paths fails at open, not silently', async () => {
    const root = path.join(dir, 'x'.repeat(90));
    const rt = createSandboxRuntime({ runtime: 'process', root });
    await expect(rt.open({})).rejects.toMatchObject({ code: 'sandbox_unavailable', message: expect.stringMatching(/107-byte limit/) });
  });
});
