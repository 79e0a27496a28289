import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandboxRuntime, type ManagedSandbox, type Runtime } from '../../src/server/sandbox/index.js';
import { processesInNamespace } from '../../src/server/sandbox/proc.js';
import { rootTag } from '../../src/server/sandbox/runtimes/bwrap.js';
import { createDirs, removeDirs } from '../../src/server/sandbox/workspace.js';
import { healthCheck, hostServer, observed, testRoot, waitNamespaceEmpty } from './helpers.js';

const root = process.getuid?.() === 0;
const sandboxUid = root ? Number(spawnSync('id', ['-u', 'raas-sandbox'], { encoding: 'utf8' }).stdout.trim()) : process.getuid!();

/**
 * Escape attempts against a real bwrap sandbox. Run as root (CI), bwrap runs as the sandbox user;
 * run unprivileged, as the current user. Each test records what the sandbox observed.
 */
describe(`bwrap sandbox security (${root ? 'root → raas-sandbox' : 'unprivileged'})`, () => {
  let rt: Runtime;
  let sb: ManagedSandbox;
  let host: Awaited<ReturnType<typeof hostServer>>;
  const dir = testRoot('sec');

  beforeAll(async () => {
    process.env.RAAS_FAKE_SECRET = 'hunter2-do-not-leak';
    host = await hostServer();
    rt = createSandboxRuntime({ runtime: 'bwrap', root: dir, limits: { processes: 64, memory_mb: 512, tmp_size_mb: 16 } });
    sb = (await rt.open({ files: { 'in.txt': 'x' } })) as ManagedSandbox;
  });
  afterAll(async () => {
    delete process.env.RAAS_FAKE_SECRET;
    await rt.close();
    await host.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs as the sandbox user, in a workspace the host has no path into', async () => {
    expect((await sb.bash('id -u')).output.trim()).toBe(String(sandboxUid));
    await sb.bash('echo data > made-inside.txt');
    expect((await sb.exec(['stat', '-c', '%u', 'made-inside.txt'])).stdout.trim()).toBe(String(sandboxUid));
    // The workspace is a tmpfs inside the sandbox: nothing of it exists under the sandbox root.
    expect(sb.workspace).toBe('/workspace');
    expect(fs.readdirSync(path.join(dir, 'ws')).length).toBe(0);
    expect((await sb.readFile('made-inside.txt')).toString()).toBe('data\n');
  });

  it('a launch whose options never arrive (its server gone before the write) runs nothing and exits', async () => {
    const p = rt.prepare();
    const dirs = createDirs(p.root, `noargs-${process.pid}`, p.identity, { mode: 'private' });
    try {
      const plan = rt.plan(p, dirs, {});
      expect(plan.argsFd).toBeDefined();
      // bwrap's own argv: the sandbox's name for `ps`, the pipe to read options from, the tool server's command.
      expect(plan.args.slice(0, 5)).toEqual(['--setenv', 'RAAS_SANDBOX_TAG', rootTag(p.root), '--args', String(plan.argsFd!.fd)]);
      expect(plan.args.join(' ')).not.toContain(p.root);
      // The options clear the environment before anything runs: the open sandbox's processes never carry that name.
      const inside = processesInNamespace(sb.pidNamespace!);
      expect(inside.length).toBeGreaterThanOrEqual(2);
      for (const pid of inside) expect(fs.readFileSync(`/proc/${pid}/environ`, 'utf8')).not.toContain('RAAS_SANDBOX_TAG=');
      const stdio: Array<'pipe' | 'ignore'> = Array.from({ length: 10 }, () => 'ignore');
      stdio[1] = stdio[2] = stdio[plan.argsFd!.fd] = stdio[9] = 'pipe';
      const c = spawn(plan.file, plan.args, { env: plan.env, cwd: plan.cwd, uid: plan.uid, gid: plan.gid, stdio });
      let out = '';
      for (const fd of [1, 2, 9]) (c.stdio[fd] as Readable).on('data', (d: Buffer) => (out += d));
      (c.stdio[plan.argsFd!.fd] as Writable).end();
      const code = await new Promise<number | null>((r) => c.on('exit', r));
      expect(code).not.toBe(0);
      expect(out).toMatch(/execvp .*No such file or directory/);
      expect(out).not.toContain('ready');
    } finally {
      removeDirs(dirs);
    }
  });

  it('cannot open a TCP connection to a server on the host 127.0.0.1', async () => {
    expect(await healthCheck(host.port)).toBeLessThan(5000);
    const r = await sb.bash(`timeout 3 bash -c 'echo > /dev/tcp/127.0.0.1/${host.port}' && echo CONNECTED || echo REFUSED`);
    observed('tcp to host 127.0.0.1 (bash)', r.output);
    expect(r.output).toContain('REFUSED');
    const p = await sb.python(
      `import socket\ns = socket.socket()\ns.settimeout(2)\ntry:\n    s.connect(("127.0.0.1", ${host.port})); print("CONNECTED")\nexcept OSError as e:\n    print("REFUSED", e)`,
    );
    observed('tcp to host 127.0.0.1 (python)', p.stdout);
    expect(p.stdout).toContain('REFUSED');
    expect(
      (await sb.bash('cat /sys/class/net/*/operstate 2>/dev/null; ls /sys/class/net 2>/dev/null || ip -o link 2>/dev/null')).output,
    ).not.toMatch(/eth|ens|enp|wlan|docker/);
  });

  it('the tool server cannot be attached to or read: seccomp on, non-dumpable, no host channel to steal', async () => {
    // The task's code runs as the same uid as the tool server: its /proc files, ptrace and
    // pidfd_getfd must all fail (execute-only node: non-dumpable; seccomp denies the calls).
    const pid = (await sb.exec(['bash', '-c', 'pgrep -x node | head -1'])).stdout.trim();
    expect(Number(pid)).toBeGreaterThan(1);
    expect((await sb.exec(['grep', 'Seccomp:', '/proc/self/status'])).stdout).toMatch(/Seccomp:\s+2/);
    const r = await sb.exec([
      'bash',
      '-c',
      `ls /proc/${pid}/fd 2>&1 | head -3; cat /proc/${pid}/environ 2>&1 | head -c 200; echo; head -c 16 /proc/${pid}/mem 2>&1; echo`,
    ]);
    observed('tool server /proc', r.stdout);
    expect(r.stdout).toMatch(/Permission denied/);
    expect(r.stdout).not.toMatch(/socket:|PATH=/);
    const py = await sb.python(
      `import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nr = libc.ptrace(16, ${pid}, 0, 0)\nprint("ptrace", r, os.strerror(ctypes.get_errno()))\nfd = libc.syscall(434, ${pid}, 0)\nprint("pidfd_open", fd)\ng = libc.syscall(438, fd, 9, 0) if fd >= 0 else -1\nprint("pidfd_getfd", g, os.strerror(ctypes.get_errno()))\nprint("unshare", libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))`,
    );
    observed('ptrace / pidfd_getfd / unshare', py.stdout);
    // bwrap's init (pid 1) stays readable by same-uid code (unprivileged bwrap must be dumpable to
    // write its uid map), so it must hold no channel to the host: stdin/stdout /dev/null, and the
    // host's end of stderr closed once the tool server answered (a write then fails with EPIPE).
    const init = await sb.exec(['bash', '-c', 'readlink /proc/1/fd/0 /proc/1/fd/1']);
    expect(init.stdout).toBe('/dev/null\n/dev/null\n');
    expect((sb as unknown as { child: { stderr: { destroyed: boolean } } }).child.stderr.destroyed).toBe(true);
    expect(py.stdout).toMatch(/ptrace -1 Operation not permitted/);
    expect(py.stdout).toMatch(/pidfd_getfd -1/);
    expect(py.stdout).toMatch(/unshare -1/);
  });

  it('a network sandbox (network: true) has its own namespace: the host loopback stays unreachable', async () => {
    const net = await rt.open({ network: true });
    try {
      expect(net.address).toBeUndefined();
      const r = await net.bash(
        `timeout 3 bash -c 'echo > /dev/tcp/127.0.0.1/${host.port}' && echo CONNECTED || echo REFUSED; timeout 3 bash -c 'echo > /dev/tcp/10.0.2.2/${host.port}' && echo CONNECTED || echo REFUSED; ip -o -4 addr show | awk '{print $2, $4}'`,
      );
      observed('network sandbox to host loopback', r.output);
      expect(r.output).not.toContain('CONNECTED');
      expect(r.output).toMatch(/tap0 10\.0\.2\.100/);
      expect(await healthCheck(host.port)).toBeLessThan(5000);
    } finally {
      await net.close();
    }
  });

  it('cannot write outside the workspace', async () => {
    const r = await sb.bash(
      'for p in /usr/x /etc/x /x /opt/raas/tool-server/x /run/x /home/x; do touch $p 2>/dev/null && echo "WROTE $p"; done; echo done',
    );
    observed('writes outside the workspace', r.output);
    expect(r.output).toBe('done\n');
    // /tmp is private and size-capped (16 MiB here).
    const big = await sb.bash('head -c 64M /dev/zero > /tmp/big; echo rc=$?; du -m /tmp/big | cut -f1');
    observed('64 MiB into a 16 MiB /tmp', big.output);
    expect(big.output).toMatch(/No space left|rc=1/);
    expect(fs.existsSync('/x')).toBe(false);
  });

  it('cannot see host processes', async () => {
    const r = await sb.bash('ls /proc | grep -E "^[0-9]+$" | wc -l; test -e /proc/' + process.pid + ' && echo HOST-PID-VISIBLE');
    observed('host processes', r.output);
    expect(r.output).not.toContain('HOST-PID-VISIBLE');
    expect(Number(r.output.trim().split('\n')[0])).toBeLessThan(20);
  });

  it('does not receive the parent environment (fake secret absent)', async () => {
    expect(process.env.RAAS_FAKE_SECRET).toBeDefined();
    const r = await sb.bash('env; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr "\\0" "\\n"');
    observed('environment', r.output);
    expect(r.output).not.toContain('hunter2');
    expect((await sb.python('import os; "RAAS_FAKE_SECRET" in os.environ')).result).toBe('False');
  });

  it("the sandbox's first process (bwrap, pid 1) carries PATH and the sentinel's random mark alone: neither the server's working directory nor anything else of its environment", async () => {
    const r = await sb.bash('tr "\\0" "\\n" < /proc/1/environ');
    observed('/proc/1/environ', r.output);
    const keys = r.output
      .split('\n')
      .filter(Boolean)
      .map((l) => l.slice(0, l.indexOf('=')));
    // The mark (src/server/sandbox/sentinel.ts) only lets the server's sentinel find a stuck bwrap child.
    expect(keys).toEqual(['PATH', 'RAAS_SANDBOX_OWNER']);
    expect(r.output).toMatch(/^RAAS_SANDBOX_OWNER=[0-9a-f]{24}$/m);
    expect(r.output).not.toContain(process.cwd());
  });

  it('cannot read /etc/shadow', async () => {
    const r = await sb.bash('cat /etc/shadow; echo rc=$?');
    observed('/etc/shadow', r.output);
    expect(r.output).toMatch(/Permission denied/);
    expect(r.output).toContain('rc=1');
  });

  it('a fork bomb hits the process limit; the host keeps answering and teardown leaves nothing', async () => {
    const bomb = (await rt.open({ limits: { processes: 32 } })) as ManagedSandbox;
    const ns = bomb.pidNamespace!;
    const r = bomb.bash('bomb() { bomb | bomb & }; bomb; sleep 2; echo survived', { timeout_s: 6 });
    await new Promise((res) => setTimeout(res, 500));
    const health = await healthCheck(host.port);
    observed('host health check during fork bomb (ms)', health.toFixed(1));
    expect(health).toBeLessThan(5000);
    const out = await r;
    observed('fork bomb', out.output);
    expect(out.output).toMatch(/Resource temporarily unavailable|retry|survived/);
    await bomb.close();
    expect(bomb.leftover).toEqual([]);
    expect(await waitNamespaceEmpty(ns)).toEqual([]);
  });

  it('a memory hog fails under the limit; the host keeps answering and teardown leaves nothing', async () => {
    const hog = (await rt.open({ limits: { memory_mb: 256 } })) as ManagedSandbox;
    const ns = hog.pidNamespace!;
    const p = hog.python('x = bytearray(2 * 1024**3)');
    const health = await healthCheck(host.port);
    observed('host health check during memory hog (ms)', health.toFixed(1));
    expect(health).toBeLessThan(5000);
    const hogged = await p;
    observed('memory hog (python)', hogged.error ?? hogged);
    expect(hogged.error?.type).toBe('MemoryError');
    const b = await hog.bash('python3 -c "x = bytearray(2 * 1024**3)" 2>&1 | tail -1');
    expect(b.output).toContain('MemoryError');
    await hog.close();
    expect(await waitNamespaceEmpty(ns)).toEqual([]);
  });

  it('close ends every process of the sandbox, including detached, TERM-ignoring ones', async () => {
    const s = (await rt.open({})) as ManagedSandbox;
    const ns = s.pidNamespace!;
    await s.bash("(trap '' TERM; setsid nohup sleep 300 >/dev/null 2>&1 &); (sleep 300 &) ; echo ok");
    expect((await waitNamespaceEmpty(ns, 0)).length).toBeGreaterThan(3);
    await s.close();
    expect(await waitNamespaceEmpty(ns)).toEqual([]);
    // Nothing of the sandbox is left on the host: its run directory and its owner record.
    expect(fs.existsSync(path.join(dir, 'run', s.id)), 'run directory').toBe(false);
    expect(fs.existsSync(path.join(dir, 'owners', s.id)), 'owner record').toBe(false);
    await s.close();
  });
});
