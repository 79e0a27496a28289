import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkUserNet,
  hostAddresses,
  networkBwrapArgs,
  startUserNet,
  type UserNet,
  type UserNetTool,
} from '../../src/server/sandbox/network.js';
import { alive, descendants, processTable } from '../../src/server/sandbox/proc.js';
import { observed, testRoot } from './helpers.js';

const isRoot = process.getuid?.() === 0;
const id = (flag: string): number => Number(spawnSync('id', [flag, 'raas-sandbox'], { encoding: 'utf8' }).stdout.trim());
/** As root, bwrap and the helper run as the sandbox user, the way the runtime starts them. */
const ids = isRoot ? { uid: id('-u'), gid: id('-g') } : {};
const dir = testRoot('net');
const REPO = path.resolve(import.meta.dirname, '../..');

function unavailable(tool: UserNetTool): string | undefined {
  try {
    checkUserNet(tool, ids);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Runs inside the sandbox: one JSON request per line ({argv}), one JSON answer per line. */
const AGENT = String.raw`
import json, subprocess, sys
for line in sys.stdin:
    req = json.loads(line)
    try:
        r = subprocess.run(req['argv'], capture_output=True, text=True, timeout=req.get('t', 20))
        out = {'code': r.returncode, 'out': r.stdout, 'err': r.stderr}
    except subprocess.TimeoutExpired:
        out = {'code': None, 'out': '', 'err': 'timeout'}
    print(json.dumps(out), flush=True)
`;

/**
 * Inside: connects to every target at once (2 s limit each) and reports what answered. An HTTP
 * target counts as reached only when its unique token comes back, a Unix one when its token does.
 */
const PROBE = String.raw`
import json, socket, sys, threading
targets = json.loads(sys.argv[1]); res = [None] * len(targets)
def probe(key):
    t = targets[key]
    try:
        if 'unix' in t:
            s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect('\0' + t['unix'])
        else:
            s = socket.create_connection((t['host'], t['port']), timeout=2)
            s.sendall(b'GET / HTTP/1.0\r\nHost: x\r\n\r\n')
        data = b''
        while True:
            b = s.recv(4096)
            if not b: break
            data += b
        res[key] = 'reached:' + data.decode(errors='replace').split('\r\n\r\n')[-1]
    except Exception as e:
        res[key] = type(e).__name__ + ': ' + str(e)
ths = [threading.Thread(target=probe, args=(i,)) for i in range(len(targets))]
[t.start() for t in ths]; [t.join() for t in ths]
print(json.dumps(res))
`;

type Target = { host: string; port: number } | { unix: string };

const SYSTEM_LINKS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/** A bwrap sandbox started the way the runtime starts one, with an agent to run commands in it. */
class TestSandbox {
  private queue: Promise<unknown> = Promise.resolve();
  private lines: AsyncIterator<string>;
  readonly exited: Promise<void>;
  net: UserNet | undefined;

  private constructor(
    readonly child: ChildProcess,
    readonly inner: number,
    lines: AsyncIterator<string>,
  ) {
    this.lines = lines;
    this.exited = child.exitCode !== null ? Promise.resolve() : new Promise((r) => child.once('exit', () => r()));
  }

  /** `beforeNet` runs inside the sandbox before its network helper starts. */
  static async start(tool?: UserNetTool, beforeNet?: (sb: TestSandbox) => Promise<unknown>): Promise<TestSandbox> {
    const a = [
      '--unshare-user',
      '--disable-userns',
      '--unshare-pid',
      '--unshare-net',
      '--unshare-ipc',
      '--unshare-uts',
      '--die-with-parent',
      '--new-session',
      '--clearenv',
    ];
    a.push('--ro-bind', '/usr', '/usr');
    for (const p of SYSTEM_LINKS) {
      const st = fs.lstatSync(p, { throwIfNoEntry: false });
      if (st?.isSymbolicLink()) a.push('--symlink', fs.readlinkSync(p), p);
      else if (st?.isDirectory()) a.push('--ro-bind', p, p);
    }
    a.push('--ro-bind', '/etc', '/etc');
    if (tool) a.push(...networkBwrapArgs(dir, tool));
    a.push('--proc', '/proc', '--dev', '/dev', '--tmpfs', '/tmp', '--remount-ro', '/');
    a.push('--setenv', 'PATH', '/usr/bin:/bin', '--setenv', 'HOME', '/tmp', '--json-status-fd', '3');
    if (tool) a.push('--sync-fd', '4');
    a.push('/usr/bin/python3', '-u', '-c', AGENT);
    const child = spawn('bwrap', a, {
      ...ids,
      detached: true,
      stdio: ['pipe', 'pipe', 'inherit', 'pipe', ...(tool ? (['pipe'] as const) : [])],
    });
    const status = createInterface({ input: child.stdio[3] as Readable });
    const inner = await new Promise<number>((resolve, reject) => {
      status.on('line', (l) => {
        const pid = (JSON.parse(l) as Record<string, unknown>)['child-pid'];
        if (typeof pid === 'number') resolve(pid);
      });
      child.once('exit', (c) => reject(new Error(`bwrap exited ${c}`)));
    });
    const sb = new TestSandbox(child, inner, createInterface({ input: child.stdout! })[Symbol.asyncIterator]());
    sandboxes.push(sb);
    await beforeNet?.(sb);
    if (tool) sb.net = await startUserNet({ pid: inner, ...ids, tool, sync: child.stdio[4] as Readable });
    return sb;
  }

  run(argv: string[], t = 20): Promise<{ code: number | null; out: string; err: string }> {
    const next = this.queue.then(async () => {
      this.child.stdin!.write(JSON.stringify({ argv, t }) + '\n');
      const r = await this.lines.next();
      if (r.done) throw new Error('the sandbox agent exited');
      return JSON.parse(r.value) as { code: number | null; out: string; err: string };
    });
    this.queue = next.catch(() => undefined);
    return next;
  }

  sh(script: string): Promise<{ code: number | null; out: string; err: string }> {
    return this.run(['/bin/bash', '-c', script]);
  }

  async probe(targets: Target[]): Promise<Record<string, string>> {
    const r = await this.run(['/usr/bin/python3', '-c', PROBE, JSON.stringify(targets)]);
    expect(r.err).toBe('');
    const raw = JSON.parse(r.out) as string[];
    const out: Record<string, string> = {};
    targets.forEach((t, i) => (out['unix' in t ? `@${t.unix}` : `${t.host}:${t.port}`] = raw[i]));
    return out;
  }

  async close(): Promise<void> {
    await this.net?.close();
    if (this.child.exitCode === null && this.child.signalCode === null) {
      try {
        process.kill(this.inner, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await this.exited;
  }
}
const sandboxes: TestSandbox[] = [];

/** A host HTTP server answering with `token`. */
async function tokenServer(host: string, token: string): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((_q, res) => res.end(token));
  await new Promise<void>((r) => server.listen(0, host, r));
  return { port: (server.address() as AddressInfo).port, close: () => new Promise((r) => server.close(() => r())) };
}

/** A host abstract Unix socket answering with `token` (abstract names live in a network namespace). */
async function abstractServer(name: string, token: string): Promise<{ close(): Promise<void> }> {
  const server = net.createServer((s) => s.end(token));
  await new Promise<void>((r) => server.listen('\0' + name, r));
  return { close: () => new Promise((r) => server.close(() => r())) };
}

async function hostGet(host: string, port: number): Promise<string> {
  const res = await fetch(`http://${host}:${port}/`, { signal: AbortSignal.timeout(3000) });
  return res.text();
}

function hostAbstract(name: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect('\0' + name);
    let data = '';
    s.on('data', (d) => (data += d));
    s.on('end', () => resolve(data));
    s.on('error', reject);
  });
}

async function waitGone(pid: number, ms = 3000): Promise<boolean> {
  const until = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

/** The host's live helper processes (slirp4netns, pasta) whose parent is `ppid`. */
function helpersOf(ppid: number): number[] {
  const out: number[] = [];
  for (const [pid, pp] of processTable()) {
    if (pp !== ppid) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (/slirp4netns|pasta|perl/.test(cmd)) out.push(pid);
    } catch {
      /* gone */
    }
  }
  return out;
}

let registry: string | undefined;

beforeAll(async () => {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  // (d) the only outside address this machine may reach: check from the host first, once.
  try {
    const res = await fetch('https://registry.npmjs.org/', { method: 'HEAD', signal: AbortSignal.timeout(10_000) });
    registry = res.status < 500 ? undefined : `HTTP ${res.status}`;
  } catch (e) {
    registry = (e as Error).message;
  }
});

afterAll(async () => {
  await Promise.all(sandboxes.map((s) => s.close()));
  // Nothing of ours survives: no helper is left as our child, no bwrap of ours is alive.
  expect(helpersOf(process.pid)).toEqual([]);
  for (const s of sandboxes) expect(alive(s.child.pid!)).toBe(false);
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('sandbox without network', () => {
  it('(e) has only lo', async () => {
    const sb = await TestSandbox.start();
    const r = await sb.sh('cat /proc/net/dev; cat /etc/resolv.conf');
    observed('interfaces without network', r.out);
    // /proc/net/dev: two header lines, then one "name: counters" line per interface.
    expect(
      r.out
        .split('\n')
        .filter((l) => /^\s*[\w.-]+:\s+\d/.test(l))
        .map((l) => l.split(':')[0].trim()),
    ).toEqual(['lo']);
    await sb.close();
  });
});

for (const tool of ['slirp4netns', 'pasta'] as const) {
  const missing = unavailable(tool);
  if (missing) console.warn(`[skipped] ${tool} network tests: ${missing}`);

  describe.skipIf(missing !== undefined)(`network: true with ${tool}`, () => {
    let a: TestSandbox;
    let b: TestSandbox;
    const servers: { close(): Promise<void> }[] = [];
    type Server = Awaited<ReturnType<typeof tokenServer>>;
    let lo1: Server;
    let lo2: Server;
    let any: Server;
    const abstract = `raas-net-test-${process.pid}-${tool}`;

    beforeAll(async () => {
      lo1 = await tokenServer('127.0.0.1', 'HOST-LO-1');
      lo2 = await tokenServer('127.0.0.2', 'HOST-LO-2');
      any = await tokenServer('0.0.0.0', 'HOST-ANY');
      servers.push(lo1, lo2, any, await abstractServer(abstract, 'HOST-ABSTRACT'));
      [a, b] = await Promise.all([TestSandbox.start(tool), TestSandbox.start(tool)]);
    });
    afterAll(async () => {
      await Promise.all([a?.close(), b?.close()]);
      await Promise.all(servers.map((s) => s.close()));
    });

    it('has its own interface, a default route and the generated resolv.conf', async () => {
      const r = await a.sh('cat /proc/net/dev /proc/net/route /etc/resolv.conf');
      observed(`${tool} interfaces and routes`, r.out);
      const info = a.net!.describe();
      expect(info.tool).toBe(tool);
      expect(r.out).toMatch(tool === 'pasta' ? /eth0|tap0|ens|enp/ : /tap0:/);
      expect(r.out).toMatch(/\t00000000\t/); // default route
      expect(r.out).toContain(`nameserver ${info.dns}`);
      // The host's own addresses are unreachable routes inside (services bound to 0.0.0.0).
      const routes = (await a.sh('ip route show')).out;
      for (const addr of hostAddresses()) if (tool === 'slirp4netns') expect(routes).toContain(`unreachable ${addr}`);
      // The sandbox cannot change its routes or interface (no capabilities over its network namespace).
      const tamper = await a.sh(
        `ip route flush table main 2>&1; ip link set ${tool === 'pasta' ? 'eth0' : 'tap0'} down 2>&1; ip route show`,
      );
      observed(`${tool} route tampering from inside`, tamper.out);
      expect(tamper.out.match(/Operation not permitted/g)?.length).toBe(2);
      expect(tamper.out).toContain('default via');
    });

    it('(a) cannot reach host servers on 127.0.0.1 and 127.0.0.2, directly, via the host alias, or via the host address', async () => {
      // The probes work: the host reaches all three, and the sandbox reaches its own 127.0.0.1.
      expect(await hostGet('127.0.0.1', lo1.port)).toBe('HOST-LO-1');
      expect(await hostGet('127.0.0.2', lo2.port)).toBe('HOST-LO-2');
      expect(await hostGet('127.0.0.1', any.port)).toBe('HOST-ANY');
      await a.sh(
        `nohup /usr/bin/python3 -c "import http.server as h; h.HTTPServer(('127.0.0.1', ${lo1.port}), type('H', (h.BaseHTTPRequestHandler,), {'do_GET': lambda s: (s.send_response(200), s.end_headers(), s.wfile.write(b'OWN-LO'))})).serve_forever()" >/dev/null 2>&1 &`,
      );
      await a.sh('sleep 0.3');
      // slirp4netns' 10.0.2.2 is the host alias it would map to the host's 127.0.0.1 (handled inside
      // slirp4netns, nothing leaves the machine). pasta's gateway is the real router with --no-map-gw,
      // so it is not probed: traffic to it would leave the machine.
      const alias = tool === 'slirp4netns' ? ['10.0.2.2'] : [];
      const targets: Target[] = [
        { host: '127.0.0.1', port: lo1.port },
        { host: '127.0.0.2', port: lo2.port },
        { host: '127.0.0.1', port: any.port },
        ...alias.flatMap((h) => [lo1.port, lo2.port, any.port].map((port) => ({ host: h, port }))),
        // A server on 0.0.0.0 through the host's own address: an unreachable route inside (slirp4netns),
        // or the sandbox's own address (pasta copies it).
        ...hostAddresses().map((h) => ({ host: h, port: any.port })),
      ];
      const got = await a.probe(targets);
      for (const [k, v] of Object.entries(got)) observed(`${tool} python connect ${k}`, v);
      // Its own 127.0.0.1:<port> answers (the sandbox's lo), nothing answers with a host token.
      expect(got[`127.0.0.1:${lo1.port}`]).toBe('reached:OWN-LO');
      for (const v of Object.values(got)) expect(v).not.toMatch(/HOST-/);
      if (tool === 'slirp4netns') {
        // slirp4netns refuses the host alias (--disable-host-loopback answers "network unreachable")...
        expect(got[`10.0.2.2:${any.port}`]).toMatch(/Network is unreachable|Connection refused/);
        // ...and the host's addresses hit the unreachable routes before reaching slirp4netns.
        for (const h of hostAddresses()) expect(got[`${h}:${any.port}`]).toMatch(/No route to host/);
      }
      // bash /dev/tcp and curl agree.
      const tcp = [
        `127.0.0.2/${lo2.port}`,
        `127.0.0.1/${any.port}`,
        ...alias.map((h) => `${h}/${lo1.port}`),
        ...hostAddresses().map((h) => `${h}/${any.port}`),
      ];
      const urls = [
        `http://127.0.0.2:${lo2.port}/`,
        ...alias.map((h) => `http://${h}:${lo1.port}/`),
        ...hostAddresses().map((h) => `http://${h}:${any.port}/`),
      ];
      const sh = await a.sh(
        `for t in ${tcp.join(' ')}; do timeout 3 bash -c "echo > /dev/tcp/$t" 2>/dev/null && echo "$t CONNECTED" || echo "$t REFUSED"; done; ` +
          `for u in ${urls.join(' ')}; do echo "$u $(curl -s -m 3 $u || echo curl-failed-$?)"; done`,
      );
      observed(`${tool} bash /dev/tcp and curl`, sh.out);
      expect(sh.out).not.toContain('CONNECTED');
      expect(sh.out).not.toContain('HOST-');
      expect(sh.out.match(/REFUSED/g)?.length).toBe(tcp.length);
      expect(sh.out.match(/curl-failed-/g)?.length).toBe(urls.length);
    });

    it('(b) cannot reach an abstract Unix socket of the host', async () => {
      expect(await hostAbstract(abstract)).toBe('HOST-ABSTRACT');
      const got = await a.probe([{ unix: abstract }]);
      observed(`${tool} abstract unix socket`, got);
      expect(got[`@${abstract}`]).toMatch(/ConnectionRefusedError|FileNotFoundError/);
    });

    it('(c) two network sandboxes cannot reach each other, and the host cannot reach a sandbox port', async () => {
      const port = 18000 + (process.pid % 1000) + (tool === 'pasta' ? 1000 : 0);
      const listen = (sb: TestSandbox, token: string): Promise<unknown> =>
        sb.sh(
          `nohup /usr/bin/python3 -c "import socketserver as s; s.TCPServer(('0.0.0.0', ${port}), type('H', (s.BaseRequestHandler,), {'handle': lambda h: h.request.sendall(b'${token}')})).serve_forever()" >/dev/null 2>&1 & sleep 0.3`,
        );
      await listen(b, 'SANDBOX-B');
      // C listens before its helper starts: a helper that publishes the sandbox's bound ports (pasta's
      // default -t auto; Debian 12's pasta publishes none in --netns mode, newer ones do) would
      // forward this one to the host.
      const c = await TestSandbox.start(tool, (sb) => listen(sb, 'SANDBOX-C'));
      const own = b.net!.describe();
      const self = await b.probe([
        { host: '127.0.0.1', port },
        { host: own.address, port },
      ]);
      observed(`${tool} sandbox B reaches its own listener`, self);
      expect(Object.values(self)).toEqual(['reached:SANDBOX-B', 'reached:SANDBOX-B']);
      const fromA = await a.probe([
        { host: '127.0.0.1', port },
        { host: own.address, port },
        // slirp4netns' host alias; not pasta's gateway (the real router, off the machine).
        ...(tool === 'slirp4netns' ? [{ host: own.gateway, port }] : []),
      ]);
      observed(`${tool} sandbox A probes B's and C's port`, fromA);
      for (const v of Object.values(fromA)) expect(v).not.toMatch(/SANDBOX-/);
      // No port of a sandbox appears on the host.
      const host = await new Promise<string>((resolve) => {
        const s = net.connect(port, '127.0.0.1');
        s.on('data', (d) => resolve(String(d)));
        s.on('error', (e) => resolve(e.message));
        s.setTimeout(2000, () => (s.destroy(), resolve('timeout')));
      });
      observed(`${tool} host connects to 127.0.0.1:${port}`, host);
      expect(host).not.toMatch(/SANDBOX-/);
      await c.close();
    });

    // One request to the outside per run, through the default tool (the machine may reach only the registry).
    it.skipIf(tool !== 'slirp4netns')('(d) reaches the outside (one HTTPS HEAD to registry.npmjs.org)', async (ctx) => {
      if (registry) ctx.skip(`the host itself cannot reach https://registry.npmjs.org/ (${registry}); the outside check needs it`);
      const r = await a.run(
        [
          '/usr/bin/python3',
          '-c',
          "import urllib.request as u; print(u.urlopen(u.Request('https://registry.npmjs.org/', method='HEAD'), timeout=10).status)",
        ],
        15,
      );
      observed(`${tool} HTTPS HEAD registry.npmjs.org from inside`, r);
      expect(r.out.trim()).toBe('200');
    });

    it('(f) killing the sandbox ends its helper', async () => {
      const sb = await TestSandbox.start(tool);
      const helper = sb.net!.describe().pid!;
      // pasta runs under the shim (its supervisor); slirp4netns is the shim's pid itself.
      const all = [helper, ...descendants(helper)];
      const cmd = (p: number): string => {
        try {
          return `${p}:${fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').slice(0, 80)}`;
        } catch {
          return `${p}:gone`;
        }
      };
      expect(all.length, all.map(cmd).join(' | ')).toBe(tool === 'pasta' ? 2 : 1);
      expect(all.every(alive)).toBe(true);
      process.kill(sb.inner, 'SIGKILL');
      await sb.exited;
      // No close(): the helper notices through the --sync-fd pipe (bwrap's end closed with the sandbox).
      expect(await Promise.all(all.map((p) => waitGone(p)))).toEqual(all.map(() => true));
      await sb.net!.exited;
    });
  });
}

describe.skipIf(unavailable('slirp4netns') !== undefined)('helper start and failures', () => {
  it('waits until the sandbox user namespace has its id maps (bwrap reports child-pid before its child writes them)', async () => {
    // A user + network namespace without id maps: where bwrap's child is right after child-pid.
    const holder = spawn('unshare', ['--user', '--net', 'sleep', '30'], { ...ids, stdio: 'ignore' });
    const pid = holder.pid!;
    const own = fs.readlinkSync('/proc/self/ns/user');
    while (fs.readlinkSync(`/proc/${pid}/ns/user`) === own) await new Promise((r) => setTimeout(r, 5));
    const route = (): string => fs.readFileSync(`/proc/${pid}/net/route`, 'utf8');
    try {
      const starting = startUserNet({ pid, ...ids });
      await new Promise((r) => setTimeout(r, 300));
      expect(route()).not.toMatch(/\t00000000\t/);
      const uid = ids.uid ?? process.getuid!();
      const gid = ids.gid ?? process.getgid!();
      fs.writeFileSync(`/proc/${pid}/uid_map`, `0 ${uid} 1\n`);
      fs.writeFileSync(`/proc/${pid}/setgroups`, 'deny\n');
      fs.writeFileSync(`/proc/${pid}/gid_map`, `0 ${gid} 1\n`);
      const n = await starting;
      expect(route()).toMatch(/^tap0\t00000000\t/m);
      await n.close();
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('rejects a deny entry that is not an address, before starting anything', async () => {
    await expect(startUserNet({ pid: process.pid, ...ids, deny: ['192.0.2.2\nroute flush'] })).rejects.toMatchObject({
      code: 'config_invalid',
    });
  });

  it("rejects with the helper's stderr when the sandbox is already gone, and leaves no helper", async () => {
    const gone = spawn('true');
    await new Promise((r) => gone.once('exit', r));
    const err = (await startUserNet({ pid: gone.pid!, ...ids }).catch((e: unknown) => e)) as Error & { code: string };
    observed('helper for a pid that is gone', err.message);
    expect(err.code).toBe('sandbox_error');
    expect(err.message).toMatch(/exited during start.*\/proc\/\d+\/(gid_map|ns\/net)/s);
    expect(
      helpersOf(process.pid).map((p) => `${p}:${fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').slice(0, 80)}`),
    ).toEqual([]);
  });
});

describe.skipIf(unavailable('slirp4netns') !== undefined)('owner process killed', () => {
  it('(f) SIGKILL of the node process that started them ends sandboxes and helpers (with and without --sync-fd)', async () => {
    // A separate node process starts two network sandboxes, prints the pids and waits to be killed.
    const script = path.join(dir, 'owner.mts');
    fs.writeFileSync(
      script,
      `import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { startUserNet } from ${JSON.stringify(path.join(REPO, 'src/server/sandbox/network.ts'))};
const ids = ${JSON.stringify(ids)};
async function one(sync) {
  const args = ['--unshare-user', '--unshare-pid', '--unshare-net', '--die-with-parent', '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin', '--symlink', 'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--proc', '/proc', '--dev', '/dev', '--json-status-fd', '3', ...(sync ? ['--sync-fd', '4'] : []), 'sleep', '600'];
  const child = spawn('bwrap', args, { ...ids, detached: true, stdio: ['ignore', 'ignore', 'inherit', 'pipe', ...(sync ? ['pipe'] : [])] });
  const inner = await new Promise((r) => createInterface({ input: child.stdio[3] }).on('line', (l) => r(JSON.parse(l)['child-pid'])));
  const net = await startUserNet({ pid: inner, ...ids, ...(sync ? { sync: child.stdio[4] } : {}) });
  return { bwrap: child.pid, inner, helper: net.describe().pid };
}
const out = [await one(true), await one(false)];
console.log(JSON.stringify(out));
setInterval(() => undefined, 1000);
`,
    );
    const owner = spawn(process.execPath, ['--import', 'tsx', script], { cwd: REPO, stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve, reject) => {
      createInterface({ input: owner.stdout! }).once('line', resolve);
      owner.once('exit', (c) => reject(new Error(`owner exited ${c}`)));
    });
    const started = JSON.parse(line) as { bwrap: number; inner: number; helper: number }[];
    const pids = started.flatMap((s) => [s.bwrap, s.inner, s.helper]);
    expect(pids.every(alive)).toBe(true);
    owner.kill('SIGKILL');
    const gone = await Promise.all(pids.map((p) => waitGone(p)));
    observed('after SIGKILL of the owner', { pids, gone });
    expect(gone).toEqual(pids.map(() => true));
  });
});
