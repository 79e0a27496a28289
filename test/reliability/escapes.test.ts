// Sandbox escape attempts against real bwrap sandboxes (as root, bwrap runs as the sandbox user).
// Each attempt must fail; each test records the error it observed for docs/reliability.md.
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandboxRuntime, type ManagedSandbox, type Runtime } from '../../src/server/sandbox/index.js';
import { observe } from './helpers/observe.js';
import { inNamespaces, waitGone, withCommand } from '../helpers/procs.js';
import { ROOT, request, sandboxRoot } from './helpers/servers.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const SECRET_TOKEN = 'rel-secret-token-4f9c2b7e';
const first = (s: string, n = 220) => s.replace(/\s+/g, ' ').trim().slice(0, n);

describe('sandbox escape attempts (real bwrap)', () => {
  const root = sandboxRoot('esc');
  const cfgDir = `${root}-cfg`;
  let rt: Runtime;
  let a: ManagedSandbox;
  let b: ManagedSandbox;
  let host: http.Server;
  let hostPort: number;

  beforeAll(async () => {
    // The server's config and token, where an operator would keep them (readable by root only).
    fs.mkdirSync(cfgDir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(path.join(cfgDir, 'server.yaml'), `token: ${SECRET_TOKEN}\n`, { mode: 0o600 });
    process.env.RAAS_TOKEN = SECRET_TOKEN;
    host = http.createServer((_q, r) => r.end('host-ok'));
    await new Promise<void>((r) => host.listen(0, '127.0.0.1', r));
    hostPort = (host.address() as AddressInfo).port;
    rt = createSandboxRuntime({
      runtime: 'bwrap',
      root,
      close_grace_ms: 200,
      limits: { processes: 48, memory_mb: 512, cpu_s: 4, tmp_size_mb: 16 },
    });
    [a, b] = (await Promise.all([
      rt.open({ files: { 'mine.txt': 'A' } }),
      rt.open({ files: { 'secret-b.txt': 'B-SECRET' } }),
    ])) as ManagedSandbox[];
  }, 60_000);
  afterAll(async () => {
    delete process.env.RAAS_TOKEN;
    await rt?.close();
    await new Promise((r) => host.close(r));
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(cfgDir, { recursive: true, force: true });
  });

  const sh = async (cmd: string, timeout_s = 20) => (await a.bash(cmd, { timeout_s })).output;
  const py = async (code: string) => {
    const r = await a.python(code, { timeout_s: 20 });
    return `${r.stdout}${r.stderr}${r.error ? `${r.error.type}: ${r.error.message}` : ''}`;
  };

  it('network egress to the host loopback: TCP', async () => {
    // Markers computed at run time, so an echoed command line can never look like a success.
    const tcp = await sh(`timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/${hostPort} && echo TCP-$((40+2))' 2>&1; echo rc=$?`);
    const pyTcp = await py(
      `import socket\ns=socket.socket(); s.settimeout(2)\ntry:\n    s.connect(("127.0.0.1", ${hostPort})); print("TCP-" + str(40+2))\nexcept OSError as e:\n    print("refused:", e)`,
    );
    expect(tcp).not.toContain('TCP-42');
    expect(tcp).toMatch(/Connection refused/);
    expect(pyTcp).not.toContain('TCP-42');
    expect((await request(`http://127.0.0.1:${hostPort}/`)).text).toBe('host-ok'); // the target is up
    observe({
      section: 'escapes',
      name: 'TCP to a server on the host 127.0.0.1',
      observed: `bash /dev/tcp: "${first(tcp)}"; python connect: "${first(pyTcp)}"`,
    });
  });

  it('network egress to the host loopback: UDP', async () => {
    const sock = dgram.createSocket('udp4');
    let got = 0;
    sock.on('message', () => got++);
    await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
    const port = (sock.address() as AddressInfo).port;
    const out = await py(
      `import socket\ns=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ntry:\n    n=s.sendto(b"escape", ("127.0.0.1", ${port})); print("sent", n, "bytes to the sandbox's own loopback")\nexcept OSError as e:\n    print("send failed:", e)`,
    );
    await new Promise((r) => setTimeout(r, 700));
    sock.close();
    expect(got).toBe(0);
    observe({
      section: 'escapes',
      name: 'UDP to a socket on the host 127.0.0.1',
      observed: `inside: "${first(out)}"; datagrams received by the host socket: ${got}`,
    });
  });

  it('network egress: DNS', async () => {
    const out = await sh(
      'getent hosts example.com; echo rc=$?; timeout 3 bash -c "exec 3<>/dev/udp/8.8.8.8/53 && echo UDP53-OPEN" 2>&1; ip -o link 2>/dev/null | cut -d: -f2 | tr "\\n" " " || ls /sys/class/net',
    );
    const pyDns = await py(
      'import socket\ntry:\n    print(socket.getaddrinfo("example.com", 80)[0][4])\nexcept OSError as e:\n    print("resolution failed:", e)',
    );
    expect(out).toContain('rc=2');
    expect(pyDns).toContain('resolution failed');
    observe({
      section: 'escapes',
      name: 'DNS resolution (getent, getaddrinfo)',
      observed: `getent: "${first(out)}"; python: "${first(pyDns)}"`,
    });
  });

  it('reading /root, /home and /etc/shadow', async () => {
    const out = await sh(
      'for p in /root /home /etc/shadow /etc/gshadow; do echo "== $p"; ls -la $p 2>&1 | head -3; cat $p 2>&1 | head -2; done',
    );
    expect(out).not.toMatch(/root:[^:]*:\d+:/); // no shadow line
    expect(out).toMatch(/\/etc\/shadow: Permission denied/);
    expect(out).toMatch(/\/root.*No such file or directory/);
    // The read-only system directories bound in are expected to be readable.
    expect(await sh('head -1 /etc/passwd; ls /usr/bin | head -1')).toMatch(/^root:x:0:0/);
    observe({ section: 'escapes', name: 'read /root, /home, /etc/shadow', observed: first(out, 400) });
  });

  it("reading the server's config and token (file and environment)", async () => {
    const cfg = path.join(cfgDir, 'server.yaml');
    const out = await sh(
      `cat ${cfg} 2>&1; ls ${cfgDir} 2>&1; env | grep -c ${SECRET_TOKEN}; cat /proc/1/environ /proc/self/environ 2>/dev/null | tr '\\0' '\\n' | grep -c ${SECRET_TOKEN}; grep -rl ${SECRET_TOKEN} /workspace /tmp /run /opt /etc /var 2>/dev/null | head -3; echo end`,
    );
    expect(out).not.toContain(`token: ${SECRET_TOKEN}`);
    expect(out).toMatch(/No such file or directory/);
    expect(out).toMatch(/^0\n0\n/m);
    expect(process.env.RAAS_TOKEN).toBe(SECRET_TOKEN); // the host side does have it
    observe({ section: 'escapes', name: "read the server's config file and token", observed: first(out, 300) });
  }, 60_000);

  it("reading another sandbox's workspace", async () => {
    const out = await sh(
      `cat ${b.workspace}/secret-b.txt 2>&1; ls ${path.dirname(b.workspace)} 2>&1; ls /workspace/.. 2>&1 | tr '\\n' ' '; find / -name 'secret-b.txt' -not -path '/proc/*' 2>/dev/null | head; echo end`,
    );
    expect(out).not.toContain('B-SECRET');
    expect(out).not.toMatch(/secret-b\.txt\n/);
    observe({ section: 'escapes', name: "read another sandbox's workspace", observed: first(out, 300) });
  }, 60_000);

  it("other processes' /proc entries (host and other sandboxes)", async () => {
    const bPid = b.pid!;
    const out = await sh(
      `ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo; cat /proc/${process.pid}/environ 2>&1 | head -c 100; echo; cat /proc/${bPid}/cmdline 2>&1 | head -c 100; echo; ls /proc/${process.pid}/root/ 2>&1 | head -2`,
    );
    expect(out).not.toContain('RAAS_TOKEN');
    expect(out).toMatch(new RegExp(`/proc/${process.pid}/environ: No such file or directory`));
    const pids = out.split('\n')[0].trim().split(/\s+/).map(Number);
    expect(pids.length).toBeLessThan(15);
    observe({
      section: 'escapes',
      name: "read other processes' /proc entries",
      observed: `visible pids: ${pids.join(' ')}; host server pid ${process.pid} and sandbox B's pid ${bPid}: "${first(out.split('\n').slice(1).join(' '), 250)}"`,
    });
  });

  it('symlink and path escapes through the editor', async () => {
    await sh('ln -sf /etc/passwd link-file; ln -sfn / link-root; ln -sfn .. link-up; echo ok');
    const ops = [
      { command: 'view', path: 'link-file' },
      { command: 'view', path: 'link-root/etc' },
      { command: 'create', path: 'link-root/tmp/escaped.txt', file_text: 'x' },
      { command: 'create', path: 'link-up/escaped.txt', file_text: 'x' },
      { command: 'str_replace', path: 'link-file', old_str: 'root', new_str: 'toor' },
      { command: 'view', path: '../../etc/passwd' },
      { command: 'view', path: '/etc/passwd' },
      { command: 'create', path: '/workspace/../escaped.txt', file_text: 'x' },
    ] as const;
    const seen: string[] = [];
    for (const op of ops) {
      const r = await a.edit(op as never);
      seen.push(`${op.command} ${op.path}: ${r.ok ? 'ALLOWED' : 'refused'} (${first(r.output, 110)})`);
      expect({ op: op.path, ok: r.ok }).toEqual({ op: op.path, ok: false });
    }
    expect(fs.existsSync(path.join(path.dirname(a.workspace), 'escaped.txt'))).toBe(false);
    observe({ section: 'escapes', name: 'symlink and ../ escapes through the editor', observed: seen.join('; ') });
  });

  it('ptrace of host and sandbox processes', async () => {
    const code = `import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nfor pid in (${process.pid}, ${b.pid}, 1):\n    r = libc.ptrace(16, pid, 0, 0)\n    e = ctypes.get_errno()\n    print(pid, "attached" if r == 0 else "failed: " + os.strerror(e))\n    if r == 0: libc.ptrace(17, pid, 0, 0)`;
    const out = await py(code);
    const strace = await sh(`strace -p ${process.pid} -e trace=none 2>&1 | head -2; timeout 2 strace -p 1 2>&1 | head -2`);
    const lines = out.trim().split('\n');
    // Seccomp refuses ptrace outright (EPERM); without it the host pid is outside the pid namespace (ESRCH).
    expect(lines.find((l) => l.startsWith(String(process.pid)))).toMatch(/failed: (No such process|Operation not permitted)/);
    expect(lines.find((l) => l.startsWith(String(b.pid)))).toMatch(/failed/);
    // Pid 1 is the sandbox's own init, same uid, same namespaces: attaching to it is allowed and
    // reaches nothing outside (recorded, not asserted). Host and other-sandbox pids must be unreachable.
    observe({
      section: 'escapes',
      name: 'ptrace (host server, another sandbox, the sandbox init)',
      observed: `${lines.join('; ')} (pid 1 is the sandbox's own init); strace: "${first(strace, 160)}"`,
    });
  });

  it('setuid attempts', async () => {
    const out = await py(
      'import os\nfor f, a in ((os.setuid, 0), (os.setgid, 0), (os.seteuid, 0)):\n    try:\n        f(a); print(f.__name__, "SUCCEEDED")\n    except OSError as e:\n        print(f.__name__, "failed:", e)',
    );
    const shOut = await sh(
      'id -u; grep CapEff /proc/self/status; su -c id root </dev/null 2>&1 | head -1; cp /usr/bin/id ./myid && chmod u+s ./myid 2>&1; ./myid -u; mount -t tmpfs none /mnt 2>&1 | head -1',
    );
    expect(out).not.toContain('SUCCEEDED');
    expect(shOut).toMatch(/CapEff:\s+0000000000000000/);
    expect(shOut.split('\n')[0]).not.toBe('0');
    observe({ section: 'escapes', name: 'setuid / privilege attempts', observed: `${first(out)}; ${first(shOut, 260)}` });
  });

  it('CPU spin past the command timeout and past cpu_s', async () => {
    const t0 = performance.now();
    const r = await a.bash('while :; do :; done', { timeout_s: 1 });
    const s = (performance.now() - t0) / 1000;
    expect(r.timed_out).toBe(true);
    expect(s).toBeLessThan(8);
    expect((await a.bash('echo alive')).output).toContain('alive');
    // In a sandbox with cpu_s 1: past one CPU second the kernel kills the spinner (SIGXCPU, then
    // SIGKILL at the hard limit). One CPU second can take much longer in wall time on a loaded machine.
    const spin = (await rt.open({ limits: { cpu_s: 1 } })) as ManagedSandbox;
    const x = await spin.bash("bash -c 'while :; do :; done'; echo rc=$?", { timeout_s: 90 });
    await spin.close();
    expect(x.output).toMatch(/rc=(152|137)|CPU time limit/);
    observe({
      section: 'escapes',
      name: 'CPU spin (timeout_s 1; cpu_s 1)',
      observed: `spin interrupted after ${s.toFixed(1)} s (timed_out ${r.timed_out}), shell alive; spinner in a subshell with cpu_s 1: "${first(x.output, 120)}"`,
    });
  }, 120_000);

  it('memory bomb stays inside memory_mb; the host keeps answering', async () => {
    const out = await py(
      'try:\n    x = bytearray(8 * 1024 ** 3)\n    print("ALLOCATED")\nexcept MemoryError as e:\n    print("MemoryError", e)',
    );
    const shOut = await sh("python3 -c 'b = [bytearray(64 << 20) for _ in range(64)]' 2>&1 | tail -1; echo rc=$?");
    expect(out).not.toContain('ALLOCATED');
    expect((await request(`http://127.0.0.1:${hostPort}/`, { timeoutMs: 5000 })).text).toBe('host-ok');
    observe({
      section: 'escapes',
      name: 'memory bomb (memory_mb 512)',
      observed: `python tool: "${first(out)}"; python3 child: "${first(shOut)}"; host answered`,
    });
  }, 40_000);

  it('fork bomb stays inside the process limit; the host keeps answering; teardown leaves nothing', async () => {
    const bomb = (await rt.open({ limits: { processes: 32 } })) as ManagedSandbox;
    const ns = bomb.pidNamespace!;
    const running = bomb
      .bash('bomb() { bomb | bomb & }; bomb; sleep 3; echo survived', { timeout_s: 8 })
      .catch((e: Error) => ({ output: e.message }));
    await new Promise((r) => setTimeout(r, 1000));
    const t0 = performance.now();
    const health = await request(`http://127.0.0.1:${hostPort}/`, { timeoutMs: 5000 });
    const ms = performance.now() - t0;
    expect(health.text).toBe('host-ok');
    const inside = inNamespaces([ns]).length;
    await bomb.close();
    await running;
    const left = await waitGone(() => inNamespaces([ns]));
    expect(left).toEqual([]);
    observe({
      section: 'escapes',
      name: 'fork bomb (processes 32)',
      observed: `${inside} processes in the sandbox at peak (limit 32); host answered in ${ms.toFixed(0)} ms; after close: ${left.length} processes left`,
      figures: { orphans: left.length },
    });
  }, 40_000);

  it('escaping close by double fork and setsid', async () => {
    const sb = (await rt.open({})) as ManagedSandbox;
    const ns = sb.pidNamespace!;
    await sb.bash(
      'setsid bash -c \'(sleep 611 &) &\' ; nohup sleep 612 >/dev/null 2>&1 & disown; python3 -c \'import os\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp("sleep", ["sleep", "613"])\' ; sleep 0.5; echo forked',
    );
    const before = inNamespaces([ns]).filter((p) => /sleep 61[123]/.test(p.cmd)).length;
    expect(before).toBe(3);
    await sb.close();
    const left = await waitGone(() => [...inNamespaces([ns]), ...withCommand('sleep 61').filter((p) => /^sleep 61[123]$/.test(p.cmd))]);
    expect(left).toEqual([]);
    observe({
      section: 'escapes',
      name: 'escape close() by double fork + setsid + nohup',
      observed: `${before} detached sleepers running before close(); after close(): ${left.length} processes of the sandbox left`,
      figures: { orphans: left.length },
    });
  }, 30_000);

  it('escaping die-with-parent: the owning process SIGKILLed with double-forked, setsid children inside', async () => {
    const child = spawn(
      process.execPath,
      [
        path.join(ROOT, 'test/reliability/fixtures/hold-sandbox.mjs'),
        path.join(ROOT, 'dist/src/server/sandbox/index.js'),
        `${root}-owner`,
        "setsid bash -c '(sleep 621 &) &'; nohup sleep 622 >/dev/null 2>&1 & sleep 600",
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const info = await new Promise<{ pid: number; ns: string }>((resolve, reject) => {
      createInterface({ input: child.stdout }).once('line', (l) => resolve(JSON.parse(l)));
      child.once('exit', (c) => reject(new Error(`hold-sandbox exited ${c}`)));
      setTimeout(() => reject(new Error('hold-sandbox did not report within 60 s')), 60_000).unref();
    }).catch((err: unknown) => {
      child.kill('SIGKILL'); // its sandbox dies with it
      throw err;
    });
    const before = inNamespaces([info.ns]).length;
    expect(before).toBeGreaterThanOrEqual(4);
    child.kill('SIGKILL');
    const left = await waitGone(
      () => [...inNamespaces([info.ns]), ...withCommand('sleep 62').filter((p) => /^sleep 62[12]$/.test(p.cmd))],
      5000,
    );
    expect(left).toEqual([]);
    fs.rmSync(`${root}-owner`, { recursive: true, force: true });
    observe({
      section: 'escapes',
      name: 'escape --die-with-parent (owner SIGKILLed; double fork, setsid, nohup inside)',
      observed: `${before} processes in the sandbox before the owner died; ${left.length} left after`,
      figures: { orphans: left.length },
    });
  }, 90_000);
});
