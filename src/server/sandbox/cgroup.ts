import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import { findBinary } from './host.js';
import { alive, signal } from './proc.js';
import { sleep, systemClock, type Clock } from '../../util/clock.js';

/** Which mechanism bounds a sandbox's memory, processes and CPU. */
export type CgroupMode = 'cgroup-v1' | 'cgroup-v2' | 'rlimit';

/** `sandbox.cgroup`: use cgroups when writable (`auto`), never (`off`), or refuse to start without them. */
type CgroupSetting = 'auto' | 'off' | 'required';

/** Per-sandbox cgroup limits. Memory covers processes and the files of the sandbox's tmpfs mounts. */
export interface CgroupLimits {
  /** memory.max / memory.limit_in_bytes; swap is limited to nothing on top. */
  memory_mb: number;
  /** pids.max: tasks (processes and threads) of the sandbox. */
  processes: number;
  /** CPUs' worth of time per period (0.5 = half a core); 0 leaves CPU unlimited. */
  cpus: number;
}

/** What `/status` and the start log show. */
export interface CgroupDescription {
  mode: CgroupMode;
  /** Controllers a sandbox group gets (memory, pids, cpu; cpuacct on v1 for usage). */
  controllers: string[];
  /** The parent group's directories (one per v1 hierarchy, one on v2). */
  parents: string[];
  /** Why the mode is `rlimit`, or which limit is missing in a cgroup mode. */
  reason?: string;
}

/** Counters of one sandbox group, read before it is removed (and between tool calls). */
export interface CgroupReport {
  memory?: { limit_bytes: number | null; peak_bytes: number | null; oom_kills: number; limit_hits: number };
  pids?: { limit: number | null; current: number; peak: number | null; refused_forks: number };
  cpu?: { usage_s: number | null; throttled_periods: number };
}

/** The part of a launch plan the cgroup wrapper rewrites (managed.ts' LaunchPlan has these). */
export interface SpawnPlan {
  file: string;
  args: string[];
  uid?: number;
  gid?: number;
}

export interface CgroupOptions {
  setting?: CgroupSetting;
  /** Parent group, relative to each hierarchy's mount point (`sandbox.cgroup_parent`). */
  parent?: string;
  /** Controllers without which the mode falls back to rlimits (default memory and pids). */
  required?: string[];
  /** Text of /proc/self/mountinfo; tests pass a fake tree's. */
  mountinfo?: string;
  /** Spawn a probe process through the wrapper once (default true; fake trees turn it off). */
  probe?: boolean;
  /** The sandbox user the probe drops to (the runtime's identity), if the server is root. */
  identity?: { uid: number; gid: number };
  /** Timers of a group's removal (default: the system clock). */
  clock?: Clock;
}

/** A mounted hierarchy we write to: the v2 tree, or one v1 hierarchy. */
interface Hierarchy {
  mount: string;
  /** Controllers of ours bound to it (v1: those in its mount options; v2: those enabled). */
  controllers: string[];
}

const WANTED = ['memory', 'pids', 'cpu'] as const;
const V1_KNOWN = ['memory', 'pids', 'cpu', 'cpuacct'];
const CFS_PERIOD_US = 100_000;

/**
 * Joins the groups, then execs the command: the shell moves itself before anything is forked, so
 * every process of the sandbox is born inside. Writing bwrap's pid after spawn() races with bwrap's
 * own clone() of the sandbox (measured: 4 of 30 sandboxes escaped on an idle machine). `$1` is what
 * the shell writes: `self` for its pid ($$, into cgroup.procs), or `0` (the writing thread itself,
 * into a v1 `tasks` file).
 */
// `unset PWD OLDPWD`: sh exports PWD (the server's working directory) to what it execs, and the
// sandbox's first process keeps its environment.
const JOIN_SCRIPT =
  'unset PWD OLDPWD; w=$1; [ "$w" = self ] && w=$$; n=$2; shift 2; while [ "$n" -gt 0 ]; do { echo $w > "$1"; } 2>/dev/null || { echo "raas: cannot join cgroup $1" >&2; exit 125; }; shift; n=$((n - 1)); done; exec "$@"';

/** Parsed cgroup mounts from /proc/self/mountinfo. */
export function parseMountinfo(text: string): { v2: string[]; v1: Hierarchy[] } {
  const v2: string[] = [];
  const v1: Hierarchy[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(' ');
    const sep = f.indexOf('-');
    if (sep < 0 || f.length < sep + 4) continue;
    const mount = f[4].replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    const fstype = f[sep + 1];
    if (fstype === 'cgroup2') v2.push(mount);
    else if (fstype === 'cgroup') {
      const controllers = f[sep + 3].split(',').filter((o) => V1_KNOWN.includes(o));
      if (controllers.length && !v1.some((h) => h.mount === mount)) v1.push({ mount, controllers });
    }
  }
  return { v2, v1 };
}

const words = (file: string): string[] => {
  try {
    return fs.readFileSync(file, 'utf8').trim().split(/\s+/).filter(Boolean);
  } catch {
    return [];
  }
};

/** `key value` lines (memory.events, cpu.stat, memory.oom_control) as numbers. */
function keyed(file: string): Map<string, number> {
  const m = new Map<string, number>();
  let text = '';
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch {
    return m;
  }
  for (const line of text.split('\n')) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined && /^\d+$/.test(v)) m.set(k, Number(v));
  }
  return m;
}

/** A number file; `max` (v2) and v1's "unlimited" (near 2^63) read as null. */
function num(file: string): number | null {
  const w = words(file)[0];
  if (w === undefined || w === 'max') return null;
  const n = Number(w);
  return Number.isFinite(n) && n < 2 ** 62 ? n : null;
}

/** writeFileSync whose error names the file (cgroupfs answers EINVAL/EBUSY without a path). */
function writeFile(file: string, value: string): void {
  try {
    fs.writeFileSync(file, value);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    err.path ??= file;
    err.message = `${err.message} (writing "${value}" to ${file})`;
    throw err;
  }
}

const sleepSync = (ms: number): void => void Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

function errText(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  return err.code ? `${err.code} on ${err.path ?? '?'}` : String(err.message ?? e);
}

/**
 * Per-sandbox cgroups, v1 or v2, under one parent group (`raas` by default). `detect()` picks the
 * mode once, creates the parent and proves with a probe process that a group can be joined; when
 * that fails the mode is `rlimit` (the in-sandbox ulimits only) and `describe()` says why.
 */
export class CgroupManager {
  private constructor(
    readonly mode: CgroupMode,
    private readonly hierarchies: Hierarchy[],
    private readonly parentRel: string,
    private readonly setpriv: string | undefined,
    private readonly reason: string | undefined,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Detects the cgroup version, prepares the parent group, probes; never throws unless `required`. */
  static detect(opts: CgroupOptions = {}): CgroupManager {
    const setting = opts.setting ?? 'auto';
    const parent = (opts.parent ?? 'raas').replace(/^\/+|\/+$/g, '');
    const fallback = (reason: string): CgroupManager => {
      if (setting === 'required')
        throw new RaasError('sandbox_unavailable', `sandbox.cgroup is "required" but cgroup limits are unavailable: ${reason}`, {
          retryable: false,
        });
      return new CgroupManager('rlimit', [], parent, undefined, reason);
    };
    if (setting === 'off')
      return new CgroupManager('rlimit', [], parent, undefined, 'sandbox.cgroup is "off": only the in-sandbox ulimits apply');
    if (!parent || parent.split('/').some((s) => s === '..' || s === '.' || s === '')) {
      throw new RaasError(
        'config_invalid',
        `sandbox.cgroup_parent "${opts.parent}" must be a relative group path without "." or ".." (e.g. "raas")`,
        { retryable: false },
      );
    }
    let text = opts.mountinfo;
    if (text === undefined) {
      try {
        text = fs.readFileSync('/proc/self/mountinfo', 'utf8');
      } catch (e) {
        return fallback(`cannot read /proc/self/mountinfo (${errText(e)})`);
      }
    }
    const required = opts.required ?? ['memory', 'pids'];
    const mounts = parseMountinfo(text);
    let mode: CgroupMode | undefined;
    let hierarchies: Hierarchy[] = [];
    for (const m of mounts.v2) {
      const available = words(path.join(m, 'cgroup.controllers'));
      if (required.every((c) => available.includes(c))) {
        mode = 'cgroup-v2';
        hierarchies = [{ mount: m, controllers: WANTED.filter((c) => available.includes(c)) }];
        break;
      }
    }
    if (!mode) {
      const v1 = mounts.v1.filter((h) => h.controllers.some((c) => V1_KNOWN.includes(c)));
      const have = v1.flatMap((h) => h.controllers);
      if (v1.length && required.every((c) => have.includes(c))) {
        mode = 'cgroup-v1';
        hierarchies = v1;
      }
    }
    if (!mode) {
      return fallback(
        `no mounted cgroup hierarchy offers the ${required.join(' and ')} controllers (cgroup2 mounts: ${mounts.v2.join(', ') || 'none'}; v1: ${mounts.v1.map((h) => h.mount).join(', ') || 'none'})`,
      );
    }
    let setpriv: string | undefined;
    if (opts.identity) {
      setpriv = findBinary('setpriv') ?? findBinary('/usr/bin/setpriv');
      if (!setpriv)
        return fallback(
          'setpriv (util-linux) is not on PATH; the server needs it to join a cgroup as root and then drop to sandbox.user: install util-linux',
        );
    }
    try {
      if (mode === 'cgroup-v2') hierarchies[0].controllers = enableV2(hierarchies[0].mount, parent, hierarchies[0].controllers, required);
      else for (const h of hierarchies) fs.mkdirSync(path.join(h.mount, parent), { recursive: true });
    } catch (e) {
      return fallback(setupFailure(e, mode, hierarchies, parent));
    }
    const mgr = new CgroupManager(mode, hierarchies, parent, setpriv, undefined, opts.clock);
    if (opts.probe !== false) {
      const err = mgr.probe(opts.identity);
      if (err) return fallback(err);
    }
    return mgr;
  }

  /** Mode, controllers and parent directories, for `/status` and the start log. */
  describe(): CgroupDescription {
    const controllers = [...new Set(this.hierarchies.flatMap((h) => h.controllers))];
    const missing = this.mode === 'rlimit' ? [] : WANTED.filter((c) => !controllers.includes(c));
    const reason =
      this.reason ?? (missing.length ? `no ${missing.join(', ')} controller: that limit is not enforced by the cgroup` : undefined);
    return {
      mode: this.mode,
      controllers,
      parents: this.hierarchies.map((h) => path.join(h.mount, this.parentRel)),
      ...(reason ? { reason } : {}),
    };
  }

  /**
   * Creates `<parent>/<owner pid>-<id>` with the limits; undefined in `rlimit` mode. The owner (this
   * server by default) is in the name so that `sweep()` of a later server knows the group is stale.
   */
  create(id: string, limits: CgroupLimits, owner = process.pid): SandboxCgroup | undefined {
    if (this.mode === 'rlimit') return undefined;
    if (!/^[\w.-]+$/.test(id)) throw new RaasError('sandbox_error', `sandbox id "${id}" cannot name a cgroup`);
    const name = `${owner}-${id}`;
    const dirs = this.hierarchies.map((h) => ({ dir: path.join(h.mount, this.parentRel, name), controllers: h.controllers }));
    const group = new SandboxCgroup(this.mode, dirs, this.setpriv, this.clock);
    try {
      for (const d of dirs) fs.mkdirSync(d.dir);
      group.setLimits(limits);
    } catch (e) {
      group.removeSync();
      throw new RaasError(
        'sandbox_error',
        `cannot create the sandbox's cgroup (${errText(e)}): check sandbox.cgroup_parent, or set sandbox.cgroup to "off"`,
        { cause: e },
      );
    }
    return group;
  }

  /**
   * Removes groups under the parent whose server is gone (named `<pid>-…`, that pid dead), killing
   * what is left in them. Returns how many were removed.
   */
  async sweep(): Promise<number> {
    if (this.mode === 'rlimit') return 0;
    const names = new Set<string>();
    for (const h of this.hierarchies) {
      let entries: fs.Dirent[] = [];
      try {
        entries = fs.readdirSync(path.join(h.mount, this.parentRel), { withFileTypes: true });
      } catch {
        continue;
      }
      for (const e of entries) if (e.isDirectory() && /^\d+-/.test(e.name)) names.add(e.name);
    }
    let removed = 0;
    for (const name of names) {
      const owner = Number(name.slice(0, name.indexOf('-')));
      if (owner === process.pid || alive(owner)) continue;
      const dirs = this.hierarchies.map((h) => ({ dir: path.join(h.mount, this.parentRel, name), controllers: h.controllers }));
      if (
        await new SandboxCgroup(this.mode, dirs, this.setpriv, this.clock).remove().then(
          () => true,
          () => false,
        )
      )
        removed++;
    }
    return removed;
  }

  /** Runs `true` through the join wrapper in a probe group: proves mkdir, limits, join and setpriv. */
  private probe(identity: { uid: number; gid: number } | undefined): string | undefined {
    let group: SandboxCgroup | undefined;
    try {
      group = this.create(`probe-${Date.now().toString(36)}`, { memory_mb: 64, processes: 16, cpus: 0 });
      const plan = group!.wrapSpawn({ file: '/bin/true', args: [], uid: identity?.uid, gid: identity?.gid });
      const r = spawnSync(plan.file, plan.args, { encoding: 'utf8', timeout: 10_000 });
      if (r.status !== 0) {
        const dir = group!.dirs[0].dir;
        return `a process cannot join ${dir} (${(r.stderr || r.error?.message || `exit ${r.status}`).trim()}); on cgroup v2 the writer needs write access to cgroup.procs of the common ancestor of its own group and ${dir}: run the server as root or inside the delegated subtree`;
      }
      return undefined;
    } catch (e) {
      return e instanceof RaasError ? e.message : errText(e);
    } finally {
      if (group) for (let i = 0; i < 20 && !group.removeSync(); i++) sleepSync(10);
    }
  }
}

/** Enables our controllers from the v2 mount down to the parent group; returns those enabled. */
function enableV2(mount: string, parent: string, wanted: string[], required: string[]): string[] {
  fs.mkdirSync(path.join(mount, parent), { recursive: true });
  let enabled = wanted;
  let dir = mount;
  for (const seg of ['', ...parent.split('/')]) {
    dir = seg ? path.join(dir, seg) : dir;
    // The kernel lists in a group's cgroup.controllers what its parent enabled; a tree laid out by
    // hand (tests) may lack the file, and then what the level above enabled is what is available.
    const listed = path.join(dir, 'cgroup.controllers');
    const available = fs.existsSync(listed) ? words(listed) : enabled;
    enabled = enabled.filter((c) => available.includes(c) || required.includes(c));
    const on = words(path.join(dir, 'cgroup.subtree_control'));
    const add = enabled.filter((c) => !on.includes(c));
    if (add.length) writeFile(path.join(dir, 'cgroup.subtree_control'), add.map((c) => `+${c}`).join(' '));
  }
  return enabled;
}

/** Why the parent group could not be prepared, with the fix. */
function setupFailure(e: unknown, mode: CgroupMode, hierarchies: Hierarchy[], parent: string): string {
  const err = e as NodeJS.ErrnoException;
  const where = err.path ?? path.join(hierarchies[0].mount, parent);
  if (err.code === 'EBUSY' && mode === 'cgroup-v2') {
    return `cannot enable controllers in ${where}: its group has processes of its own (cgroup v2 "no internal processes" rule); set sandbox.cgroup_parent below a group without processes, or move the server into a leaf group (systemd: Delegate=yes with DelegateSubgroup=)`;
  }
  if (err.code === 'EACCES' || err.code === 'EPERM' || err.code === 'EROFS') {
    return `no write access to ${where} (${err.code}): run the server as root, or delegate the parent group to the server's user (chown the directory, its cgroup.procs and cgroup.subtree_control), or mount the cgroup filesystem read-write in the container`;
  }
  return `cannot prepare the parent group ${where} (${errText(e)})`;
}

/**
 * One sandbox's group (one directory per v1 hierarchy, one on v2). Spawn through `wrapSpawn` so the
 * sandbox starts inside; `report()` reads the counters; `remove()` kills what is left and removes it.
 */
export class SandboxCgroup {
  private seen = { oom_kills: 0, refused_forks: 0 };
  private limits: CgroupLimits | undefined;

  constructor(
    readonly mode: CgroupMode,
    readonly dirs: Array<{ dir: string; controllers: string[] }>,
    private readonly setpriv: string | undefined,
    private readonly clock: Clock = systemClock,
  ) {}

  private file(controller: string, name: string): string | undefined {
    const d = this.dirs.find((x) => x.controllers.includes(controller));
    return d ? path.join(d.dir, name) : undefined;
  }

  /** The cgroup.procs files a process writes its pid to (one per hierarchy). */
  get procsFiles(): string[] {
    return this.dirs.map((d) => path.join(d.dir, 'cgroup.procs'));
  }

  /**
   * A process moving itself in is cheap here: on v1 a single thread writing `0` to `tasks` moves
   * without the kernel's global threadgroup lock, whose write side waits for an RCU grace period
   * (measured on a 2-core VM: 4.4 ms for a shell that joins four hierarchies so, against 15.9 ms
   * writing its pid to cgroup.procs, 2.3 ms not joining). On v2 every move takes that lock.
   */
  get selfJoinIsCheap(): boolean {
    return this.mode === 'cgroup-v1';
  }

  /** Writes (or changes) the limits; a controller the hierarchy lacks is skipped. */
  setLimits(l: CgroupLimits): void {
    const mem = Math.floor(l.memory_mb * 1024 * 1024);
    const write = (controller: string, name: string, value: string | number): void => {
      const f = this.file(controller, name);
      if (f) writeFile(f, String(value));
    };
    if (this.mode === 'cgroup-v2') {
      write('memory', 'memory.max', mem);
      const swap = this.file('memory', 'memory.swap.max');
      if (swap && fs.existsSync(swap)) writeFile(swap, '0');
      write('pids', 'pids.max', Math.max(1, Math.floor(l.processes)));
      write(
        'cpu',
        'cpu.max',
        l.cpus > 0 ? `${Math.max(1000, Math.round(l.cpus * CFS_PERIOD_US))} ${CFS_PERIOD_US}` : `max ${CFS_PERIOD_US}`,
      );
    } else {
      // memsw (memory + swap) must stay >= the memory limit: raise it first, lower it last.
      const memsw = this.file('memory', 'memory.memsw.limit_in_bytes');
      const hasSw = memsw !== undefined && fs.existsSync(memsw);
      const current = num(this.file('memory', 'memory.limit_in_bytes') ?? '/nonexistent');
      const raising = current !== null && mem > current;
      if (hasSw && raising) writeFile(memsw, String(mem));
      write('memory', 'memory.limit_in_bytes', mem);
      if (hasSw && !raising) writeFile(memsw, String(mem));
      write('pids', 'pids.max', Math.max(1, Math.floor(l.processes)));
      write('cpu', 'cpu.cfs_period_us', CFS_PERIOD_US);
      write('cpu', 'cpu.cfs_quota_us', l.cpus > 0 ? Math.max(1000, Math.round(l.cpus * CFS_PERIOD_US)) : -1);
    }
    this.limits = { ...l };
  }

  /**
   * The plan that starts `plan` inside this group: `/bin/sh` (as the server's user, one thread)
   * moves itself into every hierarchy (v1: `0` into `tasks`, see selfJoinIsCheap; v2: its pid into
   * cgroup.procs), then execs the command, through `setpriv` to the plan's uid/gid when it has one.
   * The pid stays the same through both execs, so process-group signals still work.
   */
  wrapSpawn<T extends SpawnPlan>(plan: T): T {
    const drop =
      plan.uid !== undefined
        ? [this.setpriv ?? 'setpriv', `--reuid=${plan.uid}`, `--regid=${plan.gid ?? plan.uid}`, '--clear-groups', '--']
        : [];
    const v1 = this.mode === 'cgroup-v1';
    const files = v1 ? this.dirs.map((d) => path.join(d.dir, 'tasks')) : this.procsFiles;
    return {
      ...plan,
      file: '/bin/sh',
      args: ['-c', JOIN_SCRIPT, 'raas-cgroup', v1 ? '0' : 'self', String(files.length), ...files, ...drop, plan.file, ...plan.args],
      uid: undefined,
      gid: undefined,
    };
  }

  /**
   * Moves one running process in. Its existing children stay where they are, so use it only for a
   * process that has not forked yet; sandboxes start through `wrapSpawn`.
   */
  attach(pid: number): void {
    for (const f of this.procsFiles) writeFile(f, String(pid));
  }

  /**
   * `attach()` off the event loop, for a process that has not forked yet (bwrap waiting for its
   * arguments): the kernel's move into a group can wait for an RCU grace period (5-20 ms on a
   * loaded 2-core VM), during which the server keeps serving.
   */
  async join(pid: number): Promise<void> {
    for (const f of this.procsFiles) {
      try {
        await fs.promises.writeFile(f, String(pid));
      } catch (e) {
        throw new RaasError(
          'sandbox_error',
          `cannot join the sandbox's cgroup ${path.dirname(f)} (${errText(e)}): check sandbox.cgroup_parent, or set sandbox.cgroup to "off"`,
          { cause: e },
        );
      }
    }
  }

  /** Host pids of every process in the group. */
  pids(): number[] {
    const all = new Set<number>();
    for (const f of this.procsFiles) for (const w of words(f)) all.add(Number(w));
    return [...all];
  }

  /** Memory, pids and CPU counters. */
  report(): CgroupReport {
    const r: CgroupReport = {};
    const f = (c: string, n: string): string => this.file(c, n) ?? '/nonexistent';
    const has = (c: string): boolean => this.file(c, '') !== undefined;
    if (has('memory')) {
      if (this.mode === 'cgroup-v2') {
        const ev = keyed(f('memory', 'memory.events'));
        r.memory = {
          limit_bytes: num(f('memory', 'memory.max')),
          peak_bytes: num(f('memory', 'memory.peak')),
          oom_kills: ev.get('oom_kill') ?? 0,
          limit_hits: ev.get('max') ?? 0,
        };
      } else {
        const oom = keyed(f('memory', 'memory.oom_control'));
        r.memory = {
          limit_bytes: num(f('memory', 'memory.limit_in_bytes')),
          peak_bytes: num(f('memory', 'memory.max_usage_in_bytes')),
          oom_kills: oom.get('oom_kill') ?? 0,
          limit_hits: num(f('memory', 'memory.failcnt')) ?? 0,
        };
      }
    }
    if (has('pids')) {
      r.pids = {
        limit: num(f('pids', 'pids.max')),
        current: num(f('pids', 'pids.current')) ?? 0,
        peak: num(f('pids', 'pids.peak')),
        refused_forks: keyed(f('pids', 'pids.events')).get('max') ?? 0,
      };
    }
    if (this.mode === 'cgroup-v2') {
      // v2 keeps usage_usec in every group; nr_throttled appears with the cpu controller.
      const st = keyed(path.join(this.dirs[0]?.dir ?? '/nonexistent', 'cpu.stat'));
      const usage = st.get('usage_usec');
      r.cpu = { usage_s: usage === undefined ? null : usage / 1e6, throttled_periods: st.get('nr_throttled') ?? 0 };
    } else {
      const usage = num(f('cpuacct', 'cpuacct.usage'));
      r.cpu = { usage_s: usage === null ? null : usage / 1e9, throttled_periods: keyed(f('cpu', 'cpu.stat')).get('nr_throttled') ?? 0 };
    }
    return r;
  }

  /**
   * The two counters limitNote() compares: two small reads, where report() reads ten files (on v1),
   * 0.1-0.2 ms of every tool call it followed.
   */
  private hits(): { oom_kills: number; refused_forks: number } {
    const events = this.file('memory', this.mode === 'cgroup-v2' ? 'memory.events' : 'memory.oom_control');
    const pids = this.file('pids', 'pids.events');
    return {
      oom_kills: events ? (keyed(events).get('oom_kill') ?? 0) : 0,
      refused_forks: pids ? (keyed(pids).get('max') ?? 0) : 0,
    };
  }

  /**
   * Names the limits hit since the last call (or since creation): an OOM kill or a refused fork.
   * Undefined when none was; the text names the config key to raise. Runs after every tool call,
   * so without a report it reads the two counters first and the full report only when one rose.
   */
  limitNote(given?: CgroupReport): string | undefined {
    if (!given) {
      const h = this.hits();
      if (h.oom_kills <= this.seen.oom_kills && h.refused_forks <= this.seen.refused_forks) return undefined;
    }
    const report = given ?? this.report();
    const notes: string[] = [];
    const oom = report.memory?.oom_kills ?? 0;
    const forks = report.pids?.refused_forks ?? 0;
    if (oom > this.seen.oom_kills) {
      const mb = report.memory?.limit_bytes ? Math.round(report.memory.limit_bytes / 1048576) : this.limits?.memory_mb;
      notes.push(
        `memory limit hit: the kernel killed ${oom - this.seen.oom_kills} process(es) of the sandbox (limit ${mb} MiB, sandbox.limits.memory_mb; files in /workspace and /tmp count against it)`,
      );
    }
    if (forks > this.seen.refused_forks) {
      notes.push(
        `process limit hit: ${forks - this.seen.refused_forks} fork(s) refused (limit ${report.pids?.limit ?? this.limits?.processes} tasks, sandbox.limits.processes)`,
      );
    }
    this.seen = { oom_kills: oom, refused_forks: forks };
    return notes.length ? notes.join('; ') : undefined;
  }

  /** One attempt: kill what is in the group, remove the directories; true when all are gone. */
  removeSync(): boolean {
    const kill = this.mode === 'cgroup-v2' ? path.join(this.dirs[0]?.dir ?? '', 'cgroup.kill') : undefined;
    if (kill && fs.existsSync(kill)) {
      try {
        fs.writeFileSync(kill, '1');
      } catch {
        /* group already gone */
      }
    }
    for (const pid of this.pids()) signal(pid, 'SIGKILL');
    let done = true;
    for (const d of this.dirs) {
      try {
        fs.rmdirSync(d.dir);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') done = false;
      }
    }
    return done;
  }

  /**
   * Kills what remains (v2 cgroup.kill, else SIGKILL to every pid listed) and removes the group,
   * retrying while exiting tasks keep it busy. Returns the final report. Safe twice.
   */
  async remove(timeoutMs = 3000): Promise<CgroupReport> {
    const report = this.report();
    const until = this.clock.now() + timeoutMs;
    const killed = new Set(this.pids());
    while (!this.removeSync()) {
      for (const pid of this.pids()) killed.add(pid);
      if (this.clock.now() > until) {
        throw new RaasError(
          'sandbox_error',
          `cgroup ${this.dirs.map((d) => d.dir).join(', ')} still has processes ${this.pids().join(' ')} after ${timeoutMs} ms`,
        );
      }
      await sleep(20, undefined, this.clock);
    }
    // A killed task leaves the group's task list before it has finished exiting (the kernel's
    // cgroup_exit runs early in do_exit), so the directory can go while the process is still
    // listed as running for a moment. Wait for those to finish so that nothing outlives remove().
    while ([...killed].some(alive) && this.clock.now() <= until) await sleep(5, undefined, this.clock);
    return report;
  }
}
