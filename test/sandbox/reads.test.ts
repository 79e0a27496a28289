// Reads, fresh processes and the workspace quota of a real bwrap sandbox: everything the host needs
// from a sandbox comes through its tool server, as the sandbox user, bounded.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandboxRuntime, type Runtime } from '../../src/server/sandbox/index.js';
import type { Sandbox } from '../../src/server/sandbox/types.js';
import { RaasError } from '../../src/protocol/errors.js';
import { testRoot } from './helpers.js';

const isRoot = process.getuid?.() === 0;

/** Bytes on disk under a directory (du), to check that the host disk does not grow. */
function diskBytes(dir: string): number {
  return Number(spawnSync('du', ['-sb', dir], { encoding: 'utf8' }).stdout.split(/\s/)[0]);
}

describe('sandbox reads, exec and the workspace quota (real bwrap)', () => {
  const dir = testRoot('reads');
  const secretDir = `/var/tmp/raas-t-secret-${process.pid}`;
  const marker = `host-secret-${process.pid}-${Date.now()}`;
  let rt: Runtime;
  let sb: Sandbox;

  beforeAll(async () => {
    fs.mkdirSync(secretDir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(path.join(secretDir, 'secret'), marker, { mode: 0o600 });
    rt = createSandboxRuntime({ runtime: 'bwrap', root: dir, disk_mb: 32, max_read_bytes: 1 << 20, close_grace_ms: 200 });
    sb = await rt.open({ files: { 'a.txt': 'alpha', 'sub/b.txt': 'beta' } });
  }, 60_000);
  afterAll(async () => {
    await rt?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(secretDir, { recursive: true, force: true });
  });

  const refusal = async (p: Promise<unknown>): Promise<RaasError> => {
    const e = await p.then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(RaasError);
    return e as RaasError;
  };

  it('reads the spec files back exactly, relative or absolute', async () => {
    expect((await sb.readFile('a.txt')).toString()).toBe('alpha');
    expect((await sb.readFile('/workspace/sub/b.txt')).toString()).toBe('beta');
    const bin = Buffer.from([0, 1, 2, 255, 254, 10]);
    await sb.python(`open('/workspace/bin', 'wb').write(bytes([0, 1, 2, 255, 254, 10]))`);
    expect(Buffer.compare(await sb.readFile('bin'), bin)).toBe(0);
  });

  it('writes large and many files through the tool server in parts under its line limit', async () => {
    const big = 'x'.repeat(3 << 20) + '\u0001'.repeat(300_000) + 'end';
    const many = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`many/f${i}.txt`, `file ${i}`]));
    const other = await rt.open({ files: { 'big.txt': big, ...many } });
    try {
      expect((await other.exec(['wc', '-c', 'big.txt'])).stdout.trim()).toBe(`${Buffer.byteLength(big)} big.txt`);
      expect((await other.readFile('big.txt', { maxBytes: 8 << 20 })).toString() === big).toBe(true);
      expect((await other.exec(['bash', '-c', 'ls many | wc -l'])).stdout.trim()).toBe('300');
    } finally {
      await other.close();
    }
  });

  it('readOnly binds an operator directory read-only; a bad bind is refused before anything starts', async () => {
    const data = path.join(dir, 'ro-data');
    fs.mkdirSync(data, { recursive: true, mode: 0o755 });
    fs.writeFileSync(path.join(data, 'f.txt'), 'ro');
    fs.chmodSync(path.join(data, 'f.txt'), 0o644);
    const other = await rt.open({ readOnly: [{ host: data, inside: '/opt/data' }] });
    try {
      expect((await other.exec(['cat', '/opt/data/f.txt'])).stdout).toBe('ro');
      const w = await other.exec(['bash', '-c', 'echo x > /opt/data/g.txt']);
      expect(w.exit_code).not.toBe(0);
      expect(fs.existsSync(path.join(data, 'g.txt'))).toBe(false);
    } finally {
      await other.close();
    }
    expect((await refusal(rt.open({ readOnly: [{ host: data, inside: '/workspace/x' }] }))).code).toBe('bad_request');
  });

  it('a symlink to a host file resolves inside the sandbox: the host file is never read', async () => {
    await sb.bash(`ln -sf ${secretDir}/secret link; ln -sf /etc/shadow shadow; ln -sf /proc/1/environ env1`);
    for (const p of ['link', 'shadow']) {
      const e = await refusal(sb.readFile(p));
      expect(e.message).not.toContain(marker);
    }
    // What the sandbox itself can read is all a link can reach (its own pid 1's environment is bwrap's: empty).
    const env = await sb.readFile('env1').then(
      (b) => b.toString(),
      (e: Error) => e.message,
    );
    expect(env).not.toContain(marker);
    expect(env).not.toMatch(/RAAS_TOKEN|npm_|VITEST/);
  });

  it('a FIFO, a device, a directory and a missing file are refused at once, without blocking', async () => {
    await sb.bash('mkfifo fifo; ln -sf /dev/zero zero; ln -sf /dev/urandom urandom; mkdir -p d');
    const t0 = Date.now();
    for (const p of ['fifo', 'zero', 'urandom', 'd']) expect((await refusal(sb.readFile(p))).code).toBe('tool_error');
    expect((await refusal(sb.readFile('missing'))).message).toMatch(/no such file/);
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('a file over the cap is refused with sandbox_limit naming sandbox.max_read_bytes', async () => {
    await sb.bash('head -c 2000000 /dev/zero > big');
    const e = await refusal(sb.readFile('big'));
    expect(e.code).toBe('sandbox_limit');
    expect(e.message).toMatch(/sandbox\.max_read_bytes/);
    const small = await refusal(sb.readFile('a.txt', { maxBytes: 3 }));
    expect(small.code).toBe('sandbox_limit');
  });

  it('exec reports the exit status of the process itself; the persistent shell cannot change it', async () => {
    await sb.bash(`timeout(){ echo "exit=0"; return 0; }; python3(){ echo exit=0; }; alias bash='echo exit=0'; export -f timeout python3`);
    const r = await sb.exec(['timeout', '5', 'python3', '-c', 'print("exit=0"); raise SystemExit(3)']);
    expect(r.exit_code).toBe(3);
    expect(r.stdout).toBe('exit=0\n');
    const stdin = await sb.exec(['python3', '-c', 'import sys; print(sys.stdin.read()[::-1])'], { stdin: 'abc' });
    expect(stdin).toMatchObject({ exit_code: 0, stdout: 'cba\n', timed_out: false });
    const slow = await sb.exec(['bash', '-c', 'sleep 30 & sleep 30'], { timeout_s: 0.5 });
    expect(slow).toMatchObject({ exit_code: null, signal: 'SIGKILL', timed_out: true });
    const loud = await sb.exec(['bash', '-c', 'head -c 5000000 /dev/zero'], { maxOutputBytes: 1000 });
    expect(loud.stdout.length).toBe(1000);
    expect(loud.truncated).toBe(true);
  });

  it.runIf(isRoot)('runs as the sandbox user: the tool server reads nothing the sandbox user may not', async () => {
    const uid = (await sb.exec(['id', '-u'])).stdout.trim();
    expect(uid).not.toBe('0');
  });

  it('the workspace is a tmpfs capped at sandbox.disk_mb: filling it is a sandbox_limit and the host disk does not grow', async () => {
    const df = await sb.exec(['df', '-k', '/workspace']);
    expect(Number(df.stdout.trim().split('\n').pop()!.split(/\s+/)[1])).toBeLessThanOrEqual(32 * 1024);
    const before = diskBytes(dir);
    const e = await refusal(sb.bash('head -c 100M /dev/zero > fill; echo done'));
    expect(e.code).toBe('sandbox_limit');
    expect(e.message).toMatch(/sandbox\.disk_mb/);
    expect(diskBytes(dir) - before).toBeLessThan(1 << 20);
    // Every later call says the same until the job ends.
    expect((await refusal(sb.exec(['true']))).code).toBe('sandbox_limit');
  });
});
