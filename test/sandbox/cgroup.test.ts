import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RaasError } from '../../src/protocol/errors.js';
import { CgroupManager, parseMountinfo, type SandboxCgroup } from '../../src/server/sandbox/cgroup.js';
import { resolveIdentity } from '../../src/server/sandbox/host.js';
import { createSandboxRuntime, ManagedSandbox, type Runtime } from '../../src/server/sandbox/index.js';
import { alive, descendants, processesInNamespace } from '../../src/server/sandbox/proc.js';
import { createDirs, removeDirs } from '../../src/server/sandbox/workspace.js';
import { healthCheck, hostServer, observed, testRoot } from './helpers.js';

const isRoot = process.getuid?.() === 0;
const parent = `raas-t-cg-${process.pid}`;
const identity = isRoot ? resolveIdentity('raas-sandbox') : undefined;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The live manager (root only); undefined when this machine offers no writable cgroups. */
function liveManager(): CgroupManager | undefined {
  if (!isRoot) return undefined;
  const m = CgroupManager.detect({ parent, identity });
  return m.mode === 'rlimit' ? undefined : m;
}
const live = liveManager();

/** The namespace flags of the real sandbox command line, around a shell command (no tool server). */
function bwrapArgs(inner: string, tmpMb = 64): string[] {
  const links: string[] = [];
  for (const p of ['/bin', '/sbin', '/lib', '/lib64']) {
    try {
      if (fs.lstatSync(p).isSymbolicLink()) links.push('--symlink', fs.readlinkSync(p), p);
      else links.push('--ro-bind', p, p);
    } catch {
      /* absent */
    }
  }
  return [
    '--unshare-user',
    '--unshare-pid',
    '--unshare-net',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    '--die-with-parent',
    '--new-session',
    '--clearenv',
    '--ro-bind',
    '/usr',
    '/usr',
    ...links,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--size',
    String(tmpMb << 20),
    '--tmpfs',
    '/tmp',
    '--setenv',
    'PATH',
    '/usr/bin:/bin',
    '/bin/sh',
    '-c',
    inner,
  ];
}

interface Run {
  child: ChildProcess;
  done: Promise<{ code: number | null; signal: string | null; out: string }>;
}

/** Starts bwrap (as the sandbox user) inside `group` through its spawn wrapper. */
function runIn(group: SandboxCgroup, inner: string, tmpMb?: number): Run {
  const plan = group.wrapSpawn({ file: 'bwrap', args: bwrapArgs(inner, tmpMb), uid: identity?.uid, gid: identity?.gid });
  const child = spawn(plan.file, plan.args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const done = new Promise<{ code: number | null; signal: string | null; out: string }>((r) =>
    child.on('close', (code, signal) => r({ code, signal, out })),
  );
  return { child, done };
}

/** The group path a process is in, per controller, from the host's /proc/<pid>/cgroup. */
function cgroupsOf(pid: number): Map<string, string> {
  const m = new Map<string, string>();
  let text = '';
  try {
    text = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return m;
  }
  for (const line of text.trim().split('\n')) {
    const [, ctl, p] = line.split(':');
    for (const c of ctl ? ctl.split(',') : ['unified']) m.set(c, p);
  }
  return m;
}

/** Removes this file's parent group directories (after every group below them is gone). */
function removeParents(m: CgroupManager | undefined): void {
  for (const d of m?.describe().parents ?? []) {
    try {
      fs.rmdirSync(d);
    } catch {
      /* not created or already gone */
    }
  }
}

describe.skipIf(!live)(`cgroup limits on this machine (${live?.describe().mode ?? 'unavailable'})`, () => {
  const mgr = live!;
  const groups: SandboxCgroup[] = [];
  const make = (id: string, limits: { memory_mb: number; processes: number; cpus: number }, owner?: number): SandboxCgroup => {
    const g = mgr.create(id, limits, owner)!;
    groups.push(g);
    return g;
  };
  afterAll(async () => {
    for (const g of groups) await g.remove().catch(() => undefined);
    removeParents(mgr);
  });

  it('says which mode is in force and which controllers a sandbox gets', () => {
    const d = mgr.describe();
    observed('cgroup mode', d);
    expect(['cgroup-v1', 'cgroup-v2']).toContain(d.mode);
    expect(d.controllers).toEqual(expect.arrayContaining(['memory', 'pids']));
    for (const p of d.parents) expect(fs.statSync(p).isDirectory()).toBe(true);
  });

  it('starts every process of a sandbox inside its group (the wrapper joins before bwrap forks)', async () => {
    const started = Array.from({ length: 6 }, (_, i) => {
      const g = make(`race${i}`, { memory_mb: 128, processes: 64, cpus: 1 });
      // Children forked at once, a double-forked orphan and a new session: all must be inside.
      return { g, run: runIn(g, 'sleep 30 & sleep 30 & (setsid sleep 30 &); exec sleep 30') };
    });
    await sleep(400);
    for (const { g, run } of started) {
      const tree = [run.child.pid!, ...descendants(run.child.pid!)];
      expect(tree.length).toBeGreaterThanOrEqual(5);
      const name = path.basename(g.dirs[0].dir);
      for (const pid of tree) {
        const where = cgroupsOf(pid);
        for (const c of mgr.describe().controllers) expect(where.get(c), `pid ${pid} ${c}`).toBe(`/${parent}/${name}`);
      }
      expect(new Set(g.pids())).toEqual(new Set(tree));
    }
    for (const { g, run } of started) {
      const tree = [run.child.pid!, ...descendants(run.child.pid!)];
      await g.remove();
      await run.done;
      expect(tree.filter(alive)).toEqual([]);
      for (const d of g.dirs) expect(fs.existsSync(d.dir)).toBe(false);
    }
  });

  it('stops a fork bomb at the pids limit; the host can still fork; remove() leaves nothing', async () => {
    const g = make('bomb', { memory_mb: 256, processes: 48, cpus: 0.5 });
    // Every shell forks two more and waits: the bomb holds what it gets (bash retries a failed fork).
    const run = runIn(g, `exec bash -c 'f() { f & f & wait; }; f' 2>/dev/null`);
    let sampled = 0;
    for (let i = 0; i < 10; i++) {
      await sleep(100);
      sampled = Math.max(sampled, g.report().pids!.current);
    }
    const host = spawnSync('/bin/true');
    const r = g.report();
    observed('fork bomb', {
      max_tasks_sampled: sampled,
      peak: r.pids!.peak,
      refused_forks: r.pids!.refused_forks,
      host_fork_status: host.status,
    });
    expect(host.status).toBe(0);
    expect(sampled).toBeLessThanOrEqual(48);
    expect(r.pids!.peak ?? sampled).toBe(48);
    expect(r.pids!.refused_forks).toBeGreaterThan(0);
    expect(g.limitNote()).toMatch(/process limit hit: \d+ fork\(s\) refused \(limit 48 tasks, sandbox\.limits\.processes\)/);
    const pids = g.pids();
    await g.remove();
    await run.done;
    expect(pids.filter(alive)).toEqual([]);
    expect(fs.existsSync(g.dirs[0].dir)).toBe(false);
  });

  it('holds a CPU burner to its quota (cpus: 0.5)', async () => {
    const g = make('cpu', { memory_mb: 128, processes: 32, cpus: 0.5 });
    const run = runIn(g, 'while :; do :; done & while :; do :; done & wait');
    await sleep(300);
    const u0 = g.report().cpu!.usage_s!;
    const t0 = performance.now();
    await sleep(1000);
    const u1 = g.report().cpu!.usage_s!;
    const rate = (u1 - u0) / ((performance.now() - t0) / 1000);
    const throttled = g.report().cpu!.throttled_periods;
    observed('cpu burner, 2 busy loops under cpus=0.5', { cpu_s_per_s: Number(rate.toFixed(3)), throttled_periods: throttled });
    // Never more than the quota (a period's slack); throttling shows the quota, not load, held it.
    expect(rate).toBeLessThanOrEqual(0.5 * 1.2);
    expect(rate).toBeGreaterThan(0.05);
    expect(throttled).toBeGreaterThan(0);
    await g.remove();
    await run.done;
  });

  it('sweeps groups of a dead server, killing what is left in them, and keeps live ones', async () => {
    const dead = spawnSync('/bin/true').pid!;
    const stale = make('stale', { memory_mb: 64, processes: 8, cpus: 0 }, dead);
    const mine = make('mine', { memory_mb: 64, processes: 8, cpus: 0 });
    // A process that has not forked: attach() after spawn is safe for it.
    const leftover = spawn('sleep', ['60'], { stdio: 'ignore' });
    stale.attach(leftover.pid!);
    const exited = new Promise((r) => leftover.on('exit', r));
    expect(await mgr.sweep()).toBe(1);
    await exited;
    expect(alive(leftover.pid!)).toBe(false);
    for (const d of stale.dirs) expect(fs.existsSync(d.dir)).toBe(false);
    for (const d of mine.dirs) expect(fs.existsSync(d.dir)).toBe(true);
    await mine.remove();
  });

  it('every process of every sandbox the runtime starts is born in its group (v1: the wrapper moves itself in; v2: bwrap waits for its options until joined)', async () => {
    const dir = testRoot('cgroup-starts');
    const rt = createSandboxRuntime({ runtime: 'bwrap', root: dir, cgroup: 'required', cgroup_parent: parent });
    try {
      // The race the join closes shows within a few starts when bwrap runs before it (13 of 100 measured).
      for (let i = 0; i < 8; i++) {
        const sb = (await rt.open({})) as ManagedSandbox;
        await sb.bash('sleep 30 & true');
        const want = `/${parent}/${process.pid}-${sb.id}`;
        const tree = [sb.pid!, ...descendants(sb.pid!)];
        expect(tree.length).toBeGreaterThanOrEqual(4);
        for (const pid of tree)
          for (const c of mgr.describe().controllers) expect(cgroupsOf(pid).get(c), `start ${i} pid ${pid} ${c}`).toBe(want);
        await sb.close();
      }
    } finally {
      await rt.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('a real tool server in the real launch plan', () => {
    let rt: Runtime;
    let sb: ManagedSandbox;
    let g: SandboxCgroup;
    let host: Awaited<ReturnType<typeof hostServer>>;
    const dir = testRoot('cgroup');
    const MEM = 256;

    beforeAll(async () => {
      host = await hostServer();
      // The in-sandbox ulimits stay generous here so that the cgroup is what stops the hog.
      rt = createSandboxRuntime({ runtime: 'bwrap', root: dir, limits: { memory_mb: 4096, processes: 256, tmp_size_mb: 64 } });
      const p = rt.prepare();
      const id = `cg-${Date.now().toString(36)}`;
      const dirs = createDirs(p.root, id, p.identity, { mode: 'private' });
      g = make(id, { memory_mb: MEM, processes: 128, cpus: 1 });
      // As the runtime starts it: bwrap reads its options from a pipe, written once the host joined it to the group.
      const plan = rt.plan(p, dirs, {});
      expect(plan.argsFd).toBeDefined();
      sb = await ManagedSandbox.start(plan, {
        id,
        workspace: '/workspace',
        join: g,
        startTimeoutMs: 30_000,
        graceMs: 300,
        cleanup: () => removeDirs(dirs),
      });
    });
    afterAll(async () => {
      await sb?.close();
      await rt?.close();
      await host?.close();
      fs.rmSync(dir, { recursive: true, force: true });
    });

    it('puts the tool server and everything it starts in the group', async () => {
      await sb.bash('sleep 60 & (setsid sleep 60 &); true');
      await sb.python('import subprocess; p = subprocess.Popen(["sleep", "60"])');
      const inNs = processesInNamespace(sb.pidNamespace!);
      expect(inNs.length).toBeGreaterThanOrEqual(6);
      const name = path.basename(g.dirs[0].dir);
      for (const pid of inNs)
        for (const c of mgr.describe().controllers) expect(cgroupsOf(pid).get(c), `pid ${pid} ${c}`).toBe(`/${parent}/${name}`);
      expect(new Set(g.pids())).toEqual(new Set([sb.pid!, ...descendants(sb.pid!)]));
    });

    it('kills a memory hog (2x the limit) with the cgroup; the tool server and the host carry on', async () => {
      const hog = `b = bytearray(${2 * MEM} << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint("survived")`;
      const r = await sb.exec(['/usr/bin/python3', '-c', hog], { timeout_s: 60 });
      const note = g.limitNote();
      observed('memory hog', { exit_code: r.exit_code, signal: r.signal, note, peak: g.report().memory!.peak_bytes });
      expect(r.signal).toBe('SIGKILL');
      expect(r.stdout).not.toContain('survived');
      expect(note).toMatch(/memory limit hit: the kernel killed 1 process\(es\).*limit 256 MiB, sandbox\.limits\.memory_mb/);
      expect(g.report().memory!.peak_bytes!).toBeLessThanOrEqual(MEM << 20);
      expect((await sb.bash('echo alive')).output.trim()).toBe('alive');
      expect(await healthCheck(host.port)).toBeLessThan(5000);
    });

    it('a tmpfs fill within the memory budget stops at the tmpfs cap (ENOSPC), no OOM kill', async () => {
      const r = await sb.exec(
        ['/bin/sh', '-c', 'dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>&1; echo rc=$?; du -m /tmp/fill; rm /tmp/fill'],
        { timeout_s: 60 },
      );
      observed('fill of /tmp (64 MiB tmpfs) in a 256 MiB group', r.stdout);
      expect(r.stdout).toMatch(/No space left on device/);
      expect(r.stdout).toMatch(/^6[45]\t\/tmp\/fill$/m);
      expect(g.limitNote()).toBeUndefined();
      expect((await sb.bash('echo alive')).output.trim()).toBe('alive');
    });

    it('a tmpfs fill past the memory limit is bounded by the group: tmpfs pages are charged to it', async () => {
      // /workspace is a 2048 MiB tmpfs (sandbox.disk_mb) here, far above the 256 MiB group.
      const shmem = (): number =>
        Number(
          /^shmem (\d+)$/m.exec(
            fs.readFileSync(path.join(g.dirs.find((d) => d.controllers.includes('memory'))!.dir, 'memory.stat'), 'utf8'),
          )?.[1] ?? 0,
        );
      let peakShmem = 0;
      const poll = setInterval(() => (peakShmem = Math.max(peakShmem, shmem())), 20);
      const r = await sb
        .exec(['/bin/sh', '-c', 'dd if=/dev/zero of=/workspace/fill bs=1M count=700 2>&1; echo rc=$?'], { timeout_s: 60 })
        .then(
          (x) => x.stdout,
          (e: Error) => e.message,
        );
      clearInterval(poll);
      const note = g.limitNote();
      observed('fill of /workspace (2048 MiB tmpfs) in a 256 MiB group', {
        answer: r,
        peak_shmem_mib: Math.round(peakShmem / 1048576),
        note,
      });
      // The kernel picks the process with the largest resident set: tmpfs pages belong to no process,
      // so the tool server (node), not dd, is the usual victim and the sandbox ends.
      expect(peakShmem).toBeGreaterThan(100 << 20);
      expect(peakShmem).toBeLessThanOrEqual(MEM << 20);
      expect(g.report().memory!.peak_bytes!).toBeLessThanOrEqual(MEM << 20);
      expect(note).toMatch(/memory limit hit/);
      expect(await healthCheck(host.port)).toBeLessThan(5000);
    });

    it('close() and remove() leave no process and no group', async () => {
      const ns = sb.pidNamespace!;
      const pids = g.pids();
      await sb.close();
      await g.remove();
      expect(processesInNamespace(ns)).toEqual([]);
      expect(pids.filter(alive)).toEqual([]);
      for (const d of g.dirs) expect(fs.existsSync(d.dir)).toBe(false);
    });
  });
});

/**
 * The same join and kill path on this machine's cgroup2 mount, which has no memory or pids
 * controller here (hybrid layout): cgroup.procs, cgroup.kill and rmdir are the real v2 files;
 * the v2 limit files are covered by the fake tree below only.
 */
const unified = isRoot ? parseMountinfo(fs.readFileSync('/proc/self/mountinfo', 'utf8')).v2[0] : undefined;
describe.skipIf(!unified || !live)('cgroup v2 join and kill on the real cgroup2 mount (no limit controllers here)', () => {
  it('joins every sandbox process and kills them with cgroup.kill', async () => {
    const m = CgroupManager.detect({ parent, identity, required: [], mountinfo: `1 0 0:1 / ${unified} rw - cgroup2 cgroup2 rw\n` });
    expect(m.mode).toBe('cgroup-v2');
    const g = m.create('v2', { memory_mb: 64, processes: 16, cpus: 1 })!;
    try {
      const run = runIn(g, 'sleep 30 & (setsid sleep 30 &); exec sleep 30');
      await sleep(300);
      const tree = [run.child.pid!, ...descendants(run.child.pid!)];
      expect(tree.length).toBeGreaterThanOrEqual(4);
      for (const pid of tree) expect(cgroupsOf(pid).get('unified')).toBe(`/${parent}/${path.basename(g.dirs[0].dir)}`);
      await g.remove();
      await run.done;
      // Killed processes reparented to init may linger as zombies for a moment on a loaded machine.
      for (let i = 0; i < 40 && tree.some(alive); i++) await sleep(50);
      expect(tree.filter(alive)).toEqual([]);
      expect(fs.existsSync(g.dirs[0].dir)).toBe(false);
    } finally {
      await g.remove().catch(() => undefined);
      removeParents(m);
    }
  });
});

describe('cgroup detection and layout (fake trees)', () => {
  let tmp: string;
  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-cg-'));
  });
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const fakeV2 = (name: string, controllers: string): string => {
    const root = path.join(tmp, name);
    fs.mkdirSync(root, { recursive: true });
    fs.writeFileSync(path.join(root, 'cgroup.controllers'), controllers + '\n');
    fs.writeFileSync(path.join(root, 'cgroup.subtree_control'), '');
    return root;
  };
  const v2Line = (mount: string): string =>
    `41 31 0:38 / ${mount} rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n`;

  it('parses this kind of machine: v1 controllers per hierarchy, a cgroup2 mount with hugetlb only', () => {
    const text = [
      '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
      '32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct',
      '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
      '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids',
      '40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd',
      '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
      '50 31 0:39 / /mnt/with\\040space rw,relatime - cgroup2 cgroup2 rw',
    ].join('\n');
    const m = parseMountinfo(text);
    expect(m.v2).toEqual(['/sys/fs/cgroup/unified', '/mnt/with space']);
    expect(m.v1).toEqual([
      { mount: '/sys/fs/cgroup/cpu,cpuacct', controllers: ['cpu', 'cpuacct'] },
      { mount: '/sys/fs/cgroup/memory', controllers: ['memory'] },
      { mount: '/sys/fs/cgroup/pids', controllers: ['pids'] },
    ]);
  });

  it('v2: enables the controllers down to the parent and writes memory.max, memory.swap.max, pids.max, cpu.max', () => {
    const root = fakeV2('v2', 'cpuset cpu io memory hugetlb pids rdma misc');
    const m = CgroupManager.detect({ mountinfo: v2Line(root), parent: 'ci/raas', probe: false });
    expect(m.describe()).toEqual({ mode: 'cgroup-v2', controllers: ['memory', 'pids', 'cpu'], parents: [path.join(root, 'ci/raas')] });
    for (const d of ['', 'ci', 'ci/raas'])
      expect(fs.readFileSync(path.join(root, d, 'cgroup.subtree_control'), 'utf8')).toBe('+memory +pids +cpu');
    const g = m.create('sb1', { memory_mb: 512, processes: 64, cpus: 1.5 }, 4242)!;
    const dir = path.join(root, 'ci/raas/4242-sb1');
    expect(g.dirs).toEqual([{ dir, controllers: ['memory', 'pids', 'cpu'] }]);
    const read = (f: string): string => fs.readFileSync(path.join(dir, f), 'utf8');
    expect([read('memory.max'), read('pids.max'), read('cpu.max')]).toEqual(['536870912', '64', '150000 100000']);
    // The kernel creates memory.swap.max when swap accounting exists: then swap is set to nothing.
    fs.writeFileSync(path.join(dir, 'memory.swap.max'), 'max');
    g.setLimits({ memory_mb: 256, processes: 32, cpus: 0 });
    expect([read('memory.max'), read('memory.swap.max'), read('pids.max'), read('cpu.max')]).toEqual([
      '268435456',
      '0',
      '32',
      'max 100000',
    ]);
    // One cgroup.procs on v2; the wrapper writes the shell's own pid there before exec.
    const plan = g.wrapSpawn({ file: '/usr/bin/bwrap', args: ['--x'], uid: 999, gid: 995 });
    expect(plan.file).toBe('/bin/sh');
    expect(plan.uid).toBeUndefined();
    expect(plan.args.slice(2)).toEqual([
      'raas-cgroup',
      'self',
      '1',
      path.join(dir, 'cgroup.procs'),
      'setpriv',
      '--reuid=999',
      '--regid=995',
      '--clear-groups',
      '--',
      '/usr/bin/bwrap',
      '--x',
    ]);
    // The report reads memory.events, pids.events and cpu.stat; limitNote names what changed.
    fs.writeFileSync(path.join(dir, 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n');
    fs.writeFileSync(path.join(dir, 'pids.events'), 'max 5\n');
    fs.writeFileSync(path.join(dir, 'pids.current'), '7\n');
    fs.writeFileSync(path.join(dir, 'cpu.stat'), 'usage_usec 2500000\nuser_usec 2000000\nnr_throttled 9\n');
    expect(g.report()).toEqual({
      memory: { limit_bytes: 268435456, peak_bytes: null, oom_kills: 2, limit_hits: 12 },
      pids: { limit: 32, current: 7, peak: null, refused_forks: 5 },
      cpu: { usage_s: 2.5, throttled_periods: 9 },
    });
    expect(g.limitNote()).toBe(
      'memory limit hit: the kernel killed 2 process(es) of the sandbox (limit 256 MiB, sandbox.limits.memory_mb; files in /workspace and /tmp count against it); process limit hit: 5 fork(s) refused (limit 32 tasks, sandbox.limits.processes)',
    );
    expect(g.limitNote()).toBeUndefined();
  });

  it('v2 without a memory controller (a hybrid host) and no v1 memory: falls back to rlimits and says why', () => {
    const root = fakeV2('hybrid', 'hugetlb');
    const m = CgroupManager.detect({ mountinfo: v2Line(root), probe: false });
    expect(m.describe().mode).toBe('rlimit');
    expect(m.describe().reason).toMatch(/no mounted cgroup hierarchy offers the memory and pids controllers/);
    expect(m.create('x', { memory_mb: 1, processes: 1, cpus: 1 })).toBeUndefined();
    expect(() => CgroupManager.detect({ mountinfo: v2Line(root), probe: false, setting: 'required' })).toThrow(RaasError);
    expect(CgroupManager.detect({ setting: 'off' }).describe()).toEqual({
      mode: 'rlimit',
      controllers: [],
      parents: [],
      reason: 'sandbox.cgroup is "off": only the in-sandbox ulimits apply',
    });
  });

  it('v2 without the cpu controller: memory and pids only, and describe() names the missing limit', () => {
    const root = fakeV2('nocpu', 'memory pids io');
    const m = CgroupManager.detect({ mountinfo: v2Line(root), probe: false });
    expect(m.describe().controllers).toEqual(['memory', 'pids']);
    expect(m.describe().reason).toMatch(/no cpu controller/);
    const g = m.create('a', { memory_mb: 64, processes: 8, cpus: 1 }, 1)!;
    expect(fs.existsSync(path.join(g.dirs[0].dir, 'cpu.max'))).toBe(false);
  });

  it('v1 with cpu,cpuacct mounted together: one directory per hierarchy, memsw and CFS quota', () => {
    const mounts = ['cpu,cpuacct', 'memory', 'pids'].map((n) => {
      fs.mkdirSync(path.join(tmp, 'v1', n), { recursive: true });
      return `9 1 0:9 / ${path.join(tmp, 'v1', n)} rw - cgroup cgroup rw,${n}`;
    });
    const m = CgroupManager.detect({ mountinfo: mounts.join('\n'), probe: false });
    expect(m.describe().mode).toBe('cgroup-v1');
    expect(m.describe().parents).toEqual(['cpu,cpuacct', 'memory', 'pids'].map((n) => path.join(tmp, 'v1', n, 'raas')));
    const g = m.create('s', { memory_mb: 100, processes: 20, cpus: 0.25 }, 7)!;
    expect(g.procsFiles).toEqual(['cpu,cpuacct', 'memory', 'pids'].map((n) => path.join(tmp, 'v1', n, 'raas', '7-s', 'cgroup.procs')));
    // On v1 the wrapper's shell moves its one thread (`0` into tasks): no global lock, no grace period.
    expect(g.selfJoinIsCheap).toBe(true);
    expect(g.wrapSpawn({ file: '/usr/bin/bwrap', args: [] }).args.slice(2, 8)).toEqual([
      'raas-cgroup',
      '0',
      '3',
      ...['cpu,cpuacct', 'memory', 'pids'].map((n) => path.join(tmp, 'v1', n, 'raas', '7-s', 'tasks')),
    ]);
    const at = (h: string, f: string): string => fs.readFileSync(path.join(tmp, 'v1', h, 'raas', '7-s', f), 'utf8');
    expect([
      at('memory', 'memory.limit_in_bytes'),
      at('pids', 'pids.max'),
      at('cpu,cpuacct', 'cpu.cfs_period_us'),
      at('cpu,cpuacct', 'cpu.cfs_quota_us'),
    ]).toEqual(['104857600', '20', '100000', '25000']);
    // With swap accounting (memory.memsw.*), memory + swap is capped at the memory limit.
    fs.writeFileSync(path.join(tmp, 'v1', 'memory', 'raas', '7-s', 'memory.memsw.limit_in_bytes'), '9223372036854771712');
    g.setLimits({ memory_mb: 200, processes: 20, cpus: 0 });
    expect([
      at('memory', 'memory.limit_in_bytes'),
      at('memory', 'memory.memsw.limit_in_bytes'),
      at('cpu,cpuacct', 'cpu.cfs_quota_us'),
    ]).toEqual(['209715200', '209715200', '-1']);
  });

  it('refuses a parent path that climbs out of the hierarchy', () => {
    expect(() => CgroupManager.detect({ parent: '../x', mountinfo: '' })).toThrow(/sandbox.cgroup_parent/);
  });
});
