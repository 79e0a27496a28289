// The isolation attacks of the red-team suite, as one function so they run against every kind of
// sandbox a task can get: host-rooted (isolation.test.ts) and rooted in an image
// (image-root.long.test.ts). Each attack is a real job through the real server; the scripted model
// writes the attack program into the workspace and runs it with python3.
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { PY_MEM, PY_NAMESPACES, PY_PTRACE, PY_SNOOP, PY_SOCKETS, PY_SYSCALLS, pyConnect, pyForge, pyListen } from './attacks.js';
import {
  answered,
  attackReport,
  bash,
  create,
  expectNoLeak,
  finish,
  hex,
  observations,
  sleep,
  summary,
  type Harness,
  type JobAnswer,
  type Secrets,
} from './helpers.js';

/** Where the attacks run: the harness, its secrets, and the instances of the two kinds of task. */
export interface IsolationTarget {
  /** What the test titles say the sandbox is (e.g. "host-rooted", "rooted in a Debian image"). */
  label: string;
  harness: () => Harness;
  secrets: () => Secrets;
  /** An instance whose RUN sandbox is the kind under test (no network) for a scripted marker. */
  task: (marker: string) => Record<string, unknown>;
  /** The same kind of sandbox for a task that asks for network (`network: false` for a default one). */
  netTask: (marker: string, network?: boolean) => Record<string, unknown>;
  /** The host's own IPv4 address (empty when it has none). */
  hostIp: () => string;
}

/** Canary TCP servers on the host (each test its own, so concurrent tests do not mix their counts). */
const canaries: Array<{ server: net.Server; port: number; hits: number }> = [];

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

/** Closes the canaries the attacks opened (call in afterAll). */
export function closeCanaries(): void {
  for (const c of canaries.splice(0)) c.server.close();
}

/** Runs one attack program as the model would: write it with the editor, run it with python3. */
export function attackSteps(program: string, extra: string[] = []): string[] {
  return [create('/workspace/attack.py', program), bash('python3 /workspace/attack.py', 60), ...extra, finish()];
}

const allowed = (rec: Record<string, string>): string[] =>
  Object.entries(rec)
    .filter(([, v]) => /^(OK|OPENED|READ)/.test(String(v)))
    .map(([k, v]) => `${k}: ${v}`);

/** Declares the isolation attacks against the target's kind of sandbox. */
export function isolationAttacks(t: IsolationTarget): void {
  /** A job running `program` in its RUN sandbox; answered, nothing leaked. */
  async function runAttack(
    name: string,
    program: string,
    extra: string[] = [],
  ): Promise<{ r: any; rep: Record<string, any>; a: JobAnswer }> {
    const h = t.harness();
    const m = h.script(name, attackSteps(program, extra));
    const a = await h.process({ instance: t.task(m) });
    expectNoLeak(a.text, t.secrets());
    const r = answered(a);
    return { r, rep: attackReport(r), a };
  }

  describe.concurrent(`the model cannot reach the tool server, the kernel or the host from its sandbox (${t.label})`, {
    timeout: 120_000,
  }, () => {
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
      expect(rep.sockets.connected, `sockets seen: ${JSON.stringify(rep.sockets.paths)} ${JSON.stringify(rep.sockets.abstract)}`).toEqual(
        [],
      );
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
      const h = t.harness();
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
      if (t.hostIp()) targets.push(`${t.hostIp()}:${all.port}`, `${t.hostIp()}:${api}`);
      const { r, rep } = await runAttack('iso-net-default', pyConnect(targets, 1));
      expect(rep.net, summary(r)).toBeDefined();
      const reached = Object.entries(rep.net.tcp as Record<string, string>).filter(([, v]) => v.startsWith('CONNECTED'));
      expect(reached, 'TCP targets the default sandbox reached').toEqual([]);
      expect(rep.net.dns).not.toBe('RESOLVED');
      expect(lo.hits + all.hits, 'connections the host canaries saw').toBe(0);
    });

    it('a sandbox whose task asks for network still cannot reach the rollout API, the LLM backend or loopback services', async () => {
      const h = t.harness();
      const api = new URL(h.url).port;
      const sim = new URL(h.sim.url).port;
      const lo = await canary('127.0.0.1');
      const all = await canary('0.0.0.0');
      const targets = [`127.0.0.1:${api}`, `127.0.0.1:${sim}`, `127.0.0.1:${lo.port}`, `127.0.0.1:${all.port}`];
      for (const gw of ['10.0.2.2', '10.0.2.3', '169.254.1.1']) targets.push(`${gw}:${api}`, `${gw}:${sim}`, `${gw}:${lo.port}`);
      if (t.hostIp()) targets.push(`${t.hostIp()}:${api}`, `${t.hostIp()}:${sim}`, `${t.hostIp()}:${lo.port}`);
      const m = h.script(
        'iso-net-true',
        attackSteps(pyConnect(targets, 1), [bash(`curl -s -m 3 http://127.0.0.1:${api}/health; echo " curl=$?"`)]),
      );
      const a = await h.process({ instance: t.netTask(`${m} check the network`) });
      expectNoLeak(a.text, t.secrets());
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
      const h = t.harness();
      const port = 20000 + Math.floor(Math.random() * 20000);
      const abstractName = `rt-${hex(4)}`;
      const listener = h.script('iso-peer-listen', attackSteps(pyListen(port, abstractName, 10)));
      const targets = [`127.0.0.1:${port}`, `10.0.2.2:${port}`, ...(t.hostIp() ? [`${t.hostIp()}:${port}`] : [])];
      const dialer = h.script('iso-peer-dial', attackSteps(pyConnect(targets, 6, [abstractName])));
      const listening = h.process({ instance: t.netTask(`${listener} listen`) });
      await sleep(1500);
      const dialers = [h.process({ instance: t.netTask(`${dialer} dial`) }), h.process({ instance: t.netTask(`${dialer} dial`, false) })];
      const [l, ...ds] = await Promise.all([listening, ...dialers]);
      for (const a of [l!, ...ds]) expectNoLeak(a.text, t.secrets());
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
}
