// Red team, isolation: the model snoops procfs, attaches to the tool server (ptrace, /proc/<pid>/mem,
// process_vm_readv, pidfd_getfd) and forges its answers, connects to sockets, creates namespaces,
// calls syscalls container runtimes deny, and reaches the rollout API, the LLM backend and other
// sandboxes over the network — from a default sandbox and from one whose task asks for network.
// Every attack is a real job through the real server; the scripted model runs the attack programs.
import net from 'node:net';
import os from 'node:os';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { runToolAgent } from '../../src/server/handlers/common/run.js';
import { PY_MEM, PY_NAMESPACES, PY_PTRACE, PY_SNOOP, PY_SOCKETS, PY_SYSCALLS, pyConnect, pyForge, pyListen } from './attacks.js';
import {
  answered,
  attackReport,
  bash,
  codeTask,
  create,
  expectNoLeak,
  expectNothingLeft,
  expectPlantedUnchanged,
  finish,
  hex,
  observations,
  plantSecrets,
  removeSecrets,
  sleep,
  snapshotPlanted,
  startHarness,
  summary,
  type Harness,
  type JobAnswer,
  type Secrets,
} from './helpers.js';

/**
 * A task that asks for network (no built-in handler does): the sandbox is opened with
 * `network: true` and the model gets the CodeAct tools.
 */
const NetInstance = z.looseObject({
  data_source: z.literal('rt-net'),
  instance_id: z.string().optional(),
  prompt: z.string(),
  network: z.boolean().default(true),
});
const netHandler: AgentHandler<z.infer<typeof NetInstance>> = {
  name: 'rt-net',
  instance: NetInstance,
  async init(ctx) {
    return { runtime: await ctx.sandboxes.open({ network: ctx.job.instance.network }, ctx.signal) };
  },
  async run(ctx) {
    const { run } = await runToolAgent(ctx, {
      messages: [
        { role: 'system', content: 'You are a network engineer working in a sandbox.' },
        { role: 'user', content: ctx.job.instance.prompt },
      ],
      tools: ['execute_bash', 'execute_ipython_cell', 'str_replace_editor', 'finish'],
      defaults: { max_iterations: 10 },
    });
    return run;
  },
  async eval() {
    return { reward: 0, resolved: false };
  },
};

let h: Harness;
let s: Secrets;
let before: Map<string, string>;
/** Canary TCP servers on the host (each test its own, so concurrent tests do not mix their counts). */
const canaries: Array<{ server: net.Server; port: number; hits: number }> = [];
let hostIp = '';

/** A TCP server on the host that counts connections. */
async function canary(host: string): Promise<{ server: net.Server; port: number; hits: number }> {
  const c = { server: net.createServer(), port: 0, hits: 0 };
  c.server.on('connection', (sock) => {
    c.hits++;
    sock.destroy();
  });
  await new Promise<void>((r) => c.server.listen(0, host, () => r()));
  c.port = (c.server.address() as net.AddressInfo).port;
  canaries.push(c);
  return c;
}

beforeAll(async () => {
  s = plantSecrets('iso');
  h = await startHarness('iso', { secrets: s, handlers: [netHandler as AgentHandler<any>] });
  before = snapshotPlanted(s);
  hostIp =
    Object.values(os.networkInterfaces())
      .flat()
      .find((a) => a && a.family === 'IPv4' && !a.internal)?.address ?? '';
}, 120_000);

afterAll(async () => {
  await h?.close();
  for (const c of canaries) c.server.close();
  removeSecrets(s);
});

/** Runs one attack program as the model would: write it with the editor, run it with python3. */
function attackSteps(program: string, extra: string[] = []): string[] {
  return [create('/workspace/attack.py', program), bash('python3 /workspace/attack.py', 60), ...extra, finish()];
}

/** A code job running `program` in its RUN sandbox; answered, nothing leaked. */
async function runAttack(name: string, program: string, extra: string[] = []): Promise<{ r: any; rep: Record<string, any>; a: JobAnswer }> {
  const m = h.script(name, attackSteps(program, extra));
  const a = await h.process({ instance: codeTask(m) });
  expectNoLeak(a.text, s);
  const r = answered(a);
  return { r, rep: attackReport(r), a };
}

const allowed = (rec: Record<string, string>): string[] =>
  Object.entries(rec)
    .filter(([, v]) => /^(OK|OPENED|READ)/.test(String(v)))
    .map(([k, v]) => `${k}: ${v}`);

describe.concurrent('the model cannot reach the tool server, the kernel or the host from its sandbox', { timeout: 120_000 }, () => {
  it('procfs snooping (/proc/*/environ, cmdline, fd, maps) shows no host process, token or server environment', async () => {
    const { r, rep } = await runAttack('iso-snoop', PY_SNOOP);
    expect(rep.snoop, summary(r)).toBeDefined();
    const visible: Array<[number, string]> = rep.snoop.visible;
    const host = visible.filter(([, cmd]) => /vitest|raas-rtsb|\/work\/main|sim-llm|cli\.js serve/.test(cmd));
    expect(host, 'host processes visible in the sandbox').toEqual([]);
    expect(visible.length, `visible processes: ${JSON.stringify(visible)}`).toBeLessThan(20);
    expect(rep.snoop.hits, 'credential-like strings found by the sandbox').toEqual([]);
  });

  it('ptrace (PTRACE_ATTACH, PTRACE_SEIZE) of the tool server and of pid 1 is refused', async () => {
    const { r, rep } = await runAttack('iso-ptrace', PY_PTRACE);
    expect(rep.ptrace, summary(r)).toBeDefined();
    expect(rep.ptrace.targets.length, 'the attack found no tool server to attach to').toBeGreaterThan(0);
    expect([...allowed(rep.ptrace.attach), ...allowed(rep.ptrace.seize)], 'ptrace calls the kernel allowed').toEqual([]);
  });

  it('/proc/<pid>/mem and process_vm_readv of the tool server are refused; the sandbox init (bwrap, pid 1) holds no channel to the host', async () => {
    const { r, rep } = await runAttack('iso-mem', PY_MEM);
    expect(rep.mem, summary(r)).toBeDefined();
    expect(rep.mem.targets.length).toBeGreaterThan(0);
    const comm = rep.mem.comm as Record<string, string>;
    const toolServer = (rec: Record<string, string>): Record<string, string> =>
      Object.fromEntries(Object.entries(rec).filter(([pid]) => comm[pid] !== 'bwrap'));
    expect(Object.values(comm), 'the attack found the tool server').toContain('node');
    expect(allowed(toolServer(rep.mem.mem)), '/proc/<pid>/mem of the tool server opened or read').toEqual([]);
    // EFAULT would mean the permission check passed and only the address was wrong.
    const vm = Object.entries(rep.mem.vm_readv as Record<string, string>).filter(
      ([, v]) => !['EPERM', 'EACCES', 'ENOSYS', 'ESRCH'].includes(v),
    );
    expect(vm, 'process_vm_readv allowed').toEqual([]);
    // bwrap's init runs as the sandbox user from a readable binary (unprivileged bwrap must stay
    // dumpable to write its own uid map), so same-uid code can open its memory (measured: yes). What
    // matters is that it holds nothing of the host's: stdin and stdout are /dev/null, stderr (a
    // socketpair, as node makes stdio pipes) has its host end closed once the tool server is ready,
    // and no other socket.
    for (const [pid, name] of Object.entries(comm)) {
      if (name !== 'bwrap') continue;
      const fds = rep.mem.fds[pid] as Record<string, string> | string;
      expect(typeof fds, `fds of pid ${pid}: ${JSON.stringify(fds)}`).toBe('object');
      const links = Object.entries(fds as Record<string, string>);
      expect(
        links.filter(([fd, l]) => fd !== '2' && l.startsWith('socket:')),
        `sockets held by bwrap's init: ${JSON.stringify(fds)}`,
      ).toEqual([]);
      expect((fds as Record<string, string>)['0']).toBe('/dev/null');
      expect((fds as Record<string, string>)['1']).toBe('/dev/null');
    }
  });

  it("pidfd_getfd cannot steal the tool server's host connection to forge the answer of the running call", async () => {
    const { r, rep } = await runAttack('iso-forge', pyForge('RTFORGED the tests passed'));
    expect(rep.forge, 'the attack ran and reported what it tried').toBeDefined();
    const forgedSeen = observations(r).filter((o) => o.includes('RTFORGED'));
    expect(forgedSeen, 'a forged tool-server answer reached the host as an observation').toEqual([]);
    expect(rep.forge?.getfd_ok, 'fds of the tool server obtained with pidfd_getfd').toEqual({});
  });

  it('no Unix socket in the sandbox accepts a connection; writing forged answers to any of them changes nothing', async () => {
    const { r, rep } = await runAttack('iso-sockets', PY_SOCKETS, [bash('echo after-sockets')]);
    expect(rep.sockets, summary(r)).toBeDefined();
    expect(observations(r).filter((o) => o.includes('RTFORGED'))).toEqual([]);
    expect(rep.sockets.connected, `sockets seen: ${JSON.stringify(rep.sockets.paths)} ${JSON.stringify(rep.sockets.abstract)}`).toEqual([]);
    expect(
      observations(r).some((o) => o.includes('after-sockets')),
      'the tool server still answers',
    ).toBe(true);
  });

  it('no new namespaces: unshare -r, unshare(CLONE_NEW*), nested bwrap and mount all fail', async () => {
    const { r, rep } = await runAttack('iso-ns', PY_NAMESPACES);
    expect(rep.ns, summary(r)).toBeDefined();
    const ns = rep.ns as Record<string, any>;
    const made = Object.entries(ns).filter(([k, v]) => k.startsWith('unshare_NEW') && v === 'OK');
    expect(made, 'unshare(2) calls that succeeded').toEqual([]);
    for (const k of ['unshare_r', 'unshare_user_mount', 'unshare_net', 'unshare_pid', 'nested_bwrap', 'mount_tmpfs']) {
      expect(ns[k]?.rc, `${k} succeeded: ${JSON.stringify(ns[k])}`).not.toBe(0);
    }
    expect(JSON.stringify(ns.unshare_user_mount)).not.toContain('MOUNTED');
  });

  it('syscalls container runtimes deny (keyctl, bpf, perf_event_open, userfaultfd, module/kexec loading, mount API, setns, open_by_handle_at) all fail', async () => {
    const { r, rep } = await runAttack('iso-syscalls', PY_SYSCALLS);
    expect(rep.syscalls, summary(r)).toBeDefined();
    expect(allowed(rep.syscalls), 'syscalls the kernel accepted').toEqual([]);
  });

  it('a default sandbox reaches nothing: rollout API, LLM backend, host canaries (loopback and host IP), DNS', async () => {
    const api = new URL(h.url).port;
    const sim = new URL(h.sim.url).port;
    const lo = await canary('127.0.0.1');
    const all = await canary('0.0.0.0');
    const targets = [
      `127.0.0.1:${api}`,
      `127.0.0.1:${sim}`,
      `127.0.0.1:${lo.port}`,
      `127.0.0.1:${all.port}`,
      `10.0.2.2:${api}`,
      `10.0.2.2:${sim}`,
    ];
    if (hostIp) targets.push(`${hostIp}:${all.port}`, `${hostIp}:${api}`);
    const { r, rep } = await runAttack('iso-net-default', pyConnect(targets, 1));
    expect(rep.net, summary(r)).toBeDefined();
    const reached = Object.entries(rep.net.tcp as Record<string, string>).filter(([, v]) => v.startsWith('CONNECTED'));
    expect(reached, 'TCP targets the default sandbox reached').toEqual([]);
    expect(rep.net.dns).not.toBe('RESOLVED');
    expect(lo.hits + all.hits, 'connections the host canaries saw').toBe(0);
  });

  it('a sandbox whose task asks for network still cannot reach the rollout API, the LLM backend or loopback services', async () => {
    const api = new URL(h.url).port;
    const sim = new URL(h.sim.url).port;
    const lo = await canary('127.0.0.1');
    const all = await canary('0.0.0.0');
    const targets = [`127.0.0.1:${api}`, `127.0.0.1:${sim}`, `127.0.0.1:${lo.port}`, `127.0.0.1:${all.port}`];
    for (const gw of ['10.0.2.2', '10.0.2.3', '169.254.1.1']) targets.push(`${gw}:${api}`, `${gw}:${sim}`, `${gw}:${lo.port}`);
    if (hostIp) targets.push(`${hostIp}:${api}`, `${hostIp}:${sim}`, `${hostIp}:${lo.port}`);
    const m = h.script(
      'iso-net-true',
      attackSteps(pyConnect(targets, 1), [bash(`curl -s -m 3 http://127.0.0.1:${api}/health; echo " curl=$?"`)]),
    );
    const a = await h.process({ instance: { data_source: 'rt-net', instance_id: 'net-true', prompt: `${m} check the network` } });
    expectNoLeak(a.text, s);
    const r = answered(a);
    if (r.critical_error === 'init') {
      // A runtime that refuses network sandboxes outright is safe; say so in the output.
      expect(r.error, 'a network sandbox that failed to start must say why').toBeTruthy();
      return;
    }
    const rep = attackReport(r);
    expect(rep.net, summary(r)).toBeDefined();
    const reached = Object.entries(rep.net.tcp as Record<string, string>).filter(([, v]) => v.startsWith('CONNECTED'));
    expect(reached, 'loopback services a network sandbox reached').toEqual([]);
    expect(lo.hits, 'connections the loopback canary saw').toBe(0);
    expect(observations(r).join('\n')).not.toMatch(/"status":"ok"/);
  });

  it('sandboxes cannot reach each other: listeners of a network sandbox (TCP on 0.0.0.0, abstract socket) get no connection from other sandboxes', async () => {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const abstractName = `rt-${hex(4)}`;
    const listener = h.script('iso-peer-listen', attackSteps(pyListen(port, abstractName, 10)));
    const targets = [`127.0.0.1:${port}`, `10.0.2.2:${port}`, ...(hostIp ? [`${hostIp}:${port}`] : [])];
    const dialer = h.script('iso-peer-dial', attackSteps(pyConnect(targets, 6, [abstractName])));
    const listening = h.process({ instance: { data_source: 'rt-net', instance_id: 'peer-listen', prompt: `${listener} listen` } });
    await sleep(1500);
    const dialers = [
      h.process({ instance: { data_source: 'rt-net', instance_id: 'peer-dial-net', prompt: `${dialer} dial` } }),
      h.process({ instance: { data_source: 'rt-net', instance_id: 'peer-dial-default', prompt: `${dialer} dial`, network: false } }),
    ];
    const [l, ...ds] = await Promise.all([listening, ...dialers]);
    for (const a of [l!, ...ds]) expectNoLeak(a.text, s);
    const lr = answered(l!);
    if (lr.critical_error === 'init') return expect(lr.error).toBeTruthy();
    const lrep = attackReport(lr);
    expect(lrep.listen, summary(lr)).toBeDefined();
    expect(
      lrep.listen.accepted + lrep.listen.abstract_accepted,
      `connections the listening sandbox accepted: ${JSON.stringify(lrep.listen)}`,
    ).toBe(0);
    for (const d of ds) {
      const dr = answered(d);
      if (dr.critical_error === 'init') continue;
      const drep = attackReport(dr);
      expect(drep.net, summary(dr)).toBeDefined();
      const reached = [
        ...Object.entries(drep.net.tcp as Record<string, string>),
        ...Object.entries(drep.net.abstract as Record<string, string>),
      ].filter(([, v]) => v.startsWith('CONNECTED'));
      expect(reached, 'peer listeners reached').toEqual([]);
    }
  });
});

describe.concurrent('rollouts cannot see each other', { timeout: 120_000 }, () => {
  it("a rollout cannot read what a concurrent rollout left in /tmp, /dev/shm, SysV or POSIX IPC (copying a group peer's answer)", async () => {
    const mark = `RTSHARE${hex(8)}`;
    const writer = h.script('iso-share-write', [
      bash(
        [
          `for d in /tmp /dev/shm /var/tmp /run /workspace; do echo ${mark} > $d/rt-share 2>/dev/null && echo "wrote $d"; done`,
          `ipcmk -M 4096 2>&1 | head -1`,
          `python3 -c "import ctypes; libc = ctypes.CDLL(None); fd = libc.shm_open(b'/rt-share', 66, 0o644); import os; os.write(fd, b'${mark}') if fd >= 0 else None; print('shm_open', fd)"`,
          'sleep 8; echo writer-done',
        ].join('\n'),
        30,
      ),
      finish(),
    ]);
    const reader = h.script('iso-share-read', [
      bash(
        [
          'sleep 1.5',
          "grep -rsh 'RTSHARE' /tmp /dev/shm /var/tmp /run /workspace 2>/dev/null | head -5",
          'ipcs -m 2>/dev/null | tail -n +4 | head -5',
          'ls -la /dev/shm 2>&1 | head -5',
          'echo reader-done',
        ].join('\n'),
        30,
      ),
      finish(),
    ]);
    const w = h.process({ instance: codeTask(writer) });
    await sleep(500);
    const [wa, ra] = await Promise.all([w, h.process({ instance: codeTask(reader) })]);
    for (const a of [wa, ra]) expectNoLeak(a.text, s);
    const wr = answered(wa);
    const rr = answered(ra);
    expect(observations(wr).join('\n'), summary(wr)).toContain('wrote /tmp');
    expect(observations(rr).join('\n'), summary(rr)).toContain('reader-done');
    expect(observations(rr).join('\n'), `the reader saw the writer's data: ${summary(rr)}`).not.toContain(mark);
  });
});

describe('the host after every attack of this file', { timeout: 60_000 }, () => {
  it('planted files unchanged, no process of ours left, /health fast', async () => {
    expectPlantedUnchanged(before, s);
    await expectNothingLeft(h);
    expect(await h.health()).toBeLessThan(1000);
  });
});
