import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { afterAll, describe, expect, it } from 'vitest';
import { hostServer, testRoot, waitNamespaceEmpty } from './helpers.js';

const repo = path.resolve(import.meta.dirname, '../..');
const dist = path.join(repo, 'dist/src/server/sandbox/index.js');
const fixture = path.join(import.meta.dirname, 'fixtures/open-sandbox.mjs');
const isRoot = process.getuid?.() === 0;

/** A copy of the compiled package (dist/src, zod, node-pty) and the fixture that any user can read. */
function stageReadableCopy(dir: string): { dir: string; dist: string; fixture: string } {
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(path.join(repo, 'dist/src'), path.join(dir, 'dist/src'), { recursive: true });
  // The tool server every sandbox runs, bundled by `npm run build` (src/server/sandbox/prepare.ts).
  fs.cpSync(path.join(repo, 'dist/tool-server'), path.join(dir, 'dist/tool-server'), { recursive: true });
  fs.cpSync(path.join(repo, 'node_modules/zod'), path.join(dir, 'node_modules/zod'), { recursive: true });
  for (const f of ['package.json', 'lib', 'build/Release/pty.node']) {
    fs.cpSync(path.join(repo, 'node_modules/node-pty', f), path.join(dir, 'node_modules/node-pty', f), { recursive: true });
  }
  fs.writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}\n');
  fs.copyFileSync(fixture, path.join(dir, 'open-sandbox.mjs'));
  spawnSync('chmod', ['-R', 'a+rX', dir]);
  return { dir, dist: path.join(dir, 'dist/src/server/sandbox/index.js'), fixture: path.join(dir, 'open-sandbox.mjs') };
}

describe('sandbox owned by another process', () => {
  const roots: string[] = [];
  afterAll(() => {
    for (const r of roots) fs.rmSync(r, { recursive: true, force: true });
  });

  it('killing the owning process (SIGKILL) leaves no sandbox process in the process table', async () => {
    const root = testRoot('owner');
    roots.push(root);
    const child = spawn(
      process.execPath,
      [fixture, dist, root, JSON.stringify({ bg: '(sleep 300 &); (setsid sleep 300 &); echo started' }), 'hold'],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', resolve);
      child.once('exit', (code) => reject(new Error(`the sandbox owner exited (code ${code}) before opening its sandbox`)));
    });
    const info = JSON.parse(line) as { ns: string; workspace: string; probes: Record<string, string> };
    expect(info.probes.bg).toBe('started\n');
    expect((await waitNamespaceEmpty(info.ns, 0)).length).toBeGreaterThan(2);
    child.kill('SIGKILL');
    // --die-with-parent: the sandbox dies with its owner, background and setsid children included.
    expect(await waitNamespaceEmpty(info.ns, 3000)).toEqual([]);
    // The workspace was a tmpfs inside the sandbox: it died with it, nothing is left on the host disk.
    expect(info.workspace).toBe('/workspace');
    expect(fs.readdirSync(path.join(root, 'ws'))).toEqual([]);
    // The killed owner could not remove its owner record; the next runtime on this root does.
    expect(fs.readdirSync(path.join(root, 'owners')).length).toBe(1);
    const { createSandboxRuntime } = await import('../../src/server/sandbox/index.js');
    createSandboxRuntime({ runtime: 'bwrap', root }).prepare();
    expect(fs.readdirSync(path.join(root, 'owners'))).toEqual([]);
    expect(fs.readdirSync(path.join(root, 'run'))).toEqual([]);
  });

  // bubblewrap.c@124c4cdf4321f63ef17a1cb0ce8f9dd45bd7adbe:2933-2962 (also v0.8.0, Debian 12's): the outer
  // bwrap sets its death signal and writes --json-status-fd only after clone, then lets the child go
  // through an eventfd. An outer that dies in between (its owner SIGKILLed, the status write failing)
  // leaves the child blocked on the eventfd for ever, reparented to init. Here the status fd is not
  // open, so the outer dies at that write every time: the child is stuck as a dead server's would be.
  it("a sandbox child stuck in bwrap's start (outer gone before the go-ahead) dies with the owner through the sentinel", async () => {
    const sentinel = path.join(repo, 'dist/src/server/sandbox/sentinel.js');
    const script = (useSentinel: boolean): string => `
      import { spawn } from 'node:child_process';
      const { acquireSentinel } = await import(${JSON.stringify(sentinel)});
      const env = ${useSentinel} ? acquireSentinel().env : { RAAS_SANDBOX_OWNER: 'none-' + process.pid };
      const b = spawn('bwrap', ['--unshare-user', '--unshare-pid', '--die-with-parent', '--ro-bind', '/', '/', '--json-status-fd', '3', 'true'],
        { env, stdio: ['ignore', 'ignore', 'ignore'], detached: true });
      b.on('exit', () => console.log(JSON.stringify(env)));
      setInterval(() => {}, 1000);`;
    const stuck = (mark: string): number[] =>
      fs
        .readdirSync('/proc')
        .filter((n) => /^\d+$/.test(n))
        .filter((n) => {
          try {
            return fs.readFileSync(`/proc/${n}/environ`, 'latin1').split('\0').includes(`RAAS_SANDBOX_OWNER=${mark}`);
          } catch {
            return false;
          }
        })
        .map(Number);
    const run = async (useSentinel: boolean): Promise<{ mark: string; before: number[]; after: number[] }> => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', script(useSentinel)], { stdio: ['ignore', 'pipe', 'inherit'] });
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout! }).once('line', resolve);
        child.once('exit', (code) => reject(new Error(`the owner exited (code ${code}) before bwrap did`)));
      });
      const mark = (JSON.parse(line) as Record<string, string>).RAAS_SANDBOX_OWNER!;
      const before = stuck(mark);
      child.kill('SIGKILL');
      let after = stuck(mark);
      for (let i = 0; i < 40 && after.length; i++) {
        await new Promise((r) => setTimeout(r, 50));
        after = stuck(mark);
      }
      return { mark, before, after };
    };
    // Without the sentinel the stuck child outlives its owner (the defect the sentinel closes).
    const bare = await run(false);
    expect(bare.before.length).toBe(1);
    expect(bare.after).toEqual(bare.before);
    for (const p of bare.after) process.kill(p, 'SIGKILL');
    const guarded = await run(true);
    expect(guarded.before.length).toBe(1);
    expect(guarded.after).toEqual([]);
    // The sentinel itself ends after its second sweep.
    const sentinelLeft = (): string => spawnSync('pgrep', ['-f', `raas-sentinel ${guarded.mark}`]).stdout.toString();
    for (let i = 0; i < 40 && sentinelLeft(); i++) await new Promise((r) => setTimeout(r, 50));
    expect(sentinelLeft()).toBe('');
  });

  it.runIf(isRoot)('unprivileged: bwrap runs as the calling user (setpriv to nobody) with the same isolation', async () => {
    const host = await hostServer();
    const root = `/tmp/raas-t-nobody-${process.pid}`;
    roots.push(root);
    try {
      const probes = {
        id: 'id -u',
        shadow: 'cat /etc/shadow >/dev/null 2>&1 && echo READABLE || echo DENIED',
        net: `timeout 3 bash -c 'echo > /dev/tcp/127.0.0.1/${host.port}' 2>/dev/null && echo CONNECTED || echo REFUSED`,
        write: 'touch /usr/x /etc/x /x 2>/dev/null && echo WROTE || echo READONLY',
        secret: 'env | grep -c RAAS_FAKE_SECRET',
        procs: 'ls /proc | grep -cE "^[0-9]+$"',
      };
      // CI clones as root into a folder other users cannot read: run nobody's copy from /tmp.
      const pkg = stageReadableCopy(`/tmp/raas-t-nobody-pkg-${process.pid}`);
      roots.push(pkg.dir);
      const r = await new Promise<string>((resolve) => {
        const c = spawn(
          'setpriv',
          ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, pkg.fixture, pkg.dist, root, JSON.stringify(probes)],
          { env: { PATH: process.env.PATH, HOME: '/tmp', RAAS_FAKE_SECRET: 'hunter2' }, stdio: ['ignore', 'pipe', 'inherit'] },
        );
        let out = '';
        c.stdout.on('data', (d: Buffer) => (out += d));
        c.on('exit', () => resolve(out));
      });
      const info = JSON.parse(r) as { uid: number; error?: unknown; probes: Record<string, string>; leftover: number[] };
      expect(info.error).toBeUndefined();
      expect(info.uid).toBe(65534);
      expect(info.probes).toEqual({
        id: '65534\n',
        shadow: 'DENIED\n',
        net: 'REFUSED\n',
        write: 'READONLY\n',
        secret: '0\n',
        procs: expect.stringMatching(/^\d\n$/),
      });
      expect(info.leftover).toEqual([]);
    } finally {
      await host.close();
    }
  });

  it.runIf(isRoot)('as root, a missing sandbox user is refused with the fix in the message', async () => {
    const { createSandboxRuntime } = await import('../../src/server/sandbox/index.js');
    const rt = createSandboxRuntime({ runtime: 'bwrap', user: 'no-such-raas-user', root: testRoot('nouser') });
    await expect(rt.open({})).rejects.toMatchObject({
      code: 'sandbox_unavailable',
      message: expect.stringMatching(/no-such-raas-user.*scripts\/setup\.sh/),
    });
    await rt.close();
  });

  it.runIf(isRoot)('as root, a node the sandbox user cannot read is refused with the fix in the message', async () => {
    const { createSandboxRuntime } = await import('../../src/server/sandbox/index.js');
    const hidden = testRoot('hidden-node');
    roots.push(hidden);
    fs.mkdirSync(path.join(hidden, 'bin'), { recursive: true, mode: 0o700 });
    fs.chmodSync(hidden, 0o700);
    fs.copyFileSync('/bin/true', path.join(hidden, 'bin/node'));
    fs.chmodSync(path.join(hidden, 'bin/node'), 0o755);
    const rt = createSandboxRuntime({ runtime: 'bwrap', node: path.join(hidden, 'bin/node'), root: testRoot('hidden-root') });
    roots.push(testRoot('hidden-root'));
    await expect(rt.open({})).rejects.toMatchObject({
      code: 'sandbox_unavailable',
      message: expect.stringMatching(/not readable by the sandbox user.*sandbox\.node/),
    });
  });

  it('a missing bwrap is refused with the fix in the message', async () => {
    const { createSandboxRuntime } = await import('../../src/server/sandbox/index.js');
    const rt = createSandboxRuntime({ runtime: 'bwrap', bwrap: '/nonexistent/bwrap', root: testRoot('nobwrap') });
    await expect(rt.open({})).rejects.toMatchObject({
      code: 'sandbox_unavailable',
      message: expect.stringMatching(/apt-get install bubblewrap/),
    });
  });

  it('creating a runtime does nothing until the first open (lazy)', async () => {
    const { createSandboxRuntime } = await import('../../src/server/sandbox/index.js');
    const root = testRoot('lazy');
    const rt = createSandboxRuntime({ runtime: 'bwrap', bwrap: '/nonexistent/bwrap', root });
    expect(fs.existsSync(root)).toBe(false);
    await rt.close();
  });
});
