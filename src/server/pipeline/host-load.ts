import { readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';

/** What the host has in use now: busy cores (since the previous sample) and memory. */
export interface HostLoad {
  /** Cores the whole host kept busy on average since the previous sample (0 … cores). */
  busyCores: number;
  /** Cores this server and its processes (sandboxes, tool servers, tests they run) kept busy since the previous sample. */
  ownCores: number;
  /**
   * The share of the time this server's event loop was busy since the previous sample (0–1): a
   * Node server saturates its one loop long before it can use every core.
   */
  eventLoop: number;
  cores: number;
  /** Memory in use (total minus available), MiB. */
  usedMb: number;
  totalMb: number;
}

/** Samples the host's load; the autosizer takes one so tests can give it any load. */
export type HostSampler = () => HostLoad;

/**
 * The real host: CPU from the kernel's per-core tick counters (os.cpus(), i.e. /proc/stat) between
 * two calls, and this server's own share from its process tree's tick counters; memory from /proc/meminfo's MemAvailable (what can be allocated without swapping,
 * page cache included), else os.freemem().
 */
export function hostSampler(): HostSampler {
  let last = ticks();
  let lastOwn = { ticks: treeTicks(process.pid), at: performance.now() };
  let lastLoop = performance.eventLoopUtilization();
  return () => {
    const loop = performance.eventLoopUtilization();
    const eventLoop = performance.eventLoopUtilization(loop, lastLoop).utilization;
    lastLoop = loop;
    const now = ticks();
    const total = now.total - last.total;
    const idle = now.idle - last.idle;
    last = now;
    const own = { ticks: treeTicks(process.pid), at: performance.now() };
    const seconds = (own.at - lastOwn.at) / 1000;
    const ownCores = seconds > 0 ? Math.max(0, own.ticks - lastOwn.ticks) / CLK_TCK / seconds : 0;
    lastOwn = own;
    const cores = Math.max(1, now.cores);
    const totalMb = os.totalmem() / 2 ** 20;
    return {
      busyCores: total > 0 ? (cores * (total - idle)) / total : 0,
      ownCores,
      eventLoop,
      cores,
      usedMb: totalMb - availableMb(),
      totalMb,
    };
  };
}

function ticks(): { total: number; idle: number; cores: number } {
  let total = 0;
  let idle = 0;
  const cpus = os.cpus();
  for (const c of cpus) {
    const t = c.times;
    total += t.user + t.nice + t.sys + t.idle + t.irq;
    idle += t.idle;
  }
  return { total, idle, cores: cpus.length };
}

/** Kernel clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on every Linux build). */
const CLK_TCK = 100;

/**
 * CPU ticks of `root` and every live descendant (utime + stime), plus what their reaped children
 * used (cutime + cstime): a sandbox that ended between two samples is counted through the
 * process that waited for it. 0 where /proc does not exist.
 */
function treeTicks(root: number): number {
  const stats = new Map<number, { ppid: number; ticks: number }>();
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return 0;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // Fields after the command name (which may hold spaces and parentheses): state is [0], ppid [1], utime [11] … cstime [14].
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      stats.set(Number(name), { ppid: Number(f[1]), ticks: Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]) });
    } catch {
      // exited while we read
    }
  }
  const children = new Map<number, number[]>();
  for (const [pid, e] of stats) children.set(e.ppid, [...(children.get(e.ppid) ?? []), pid]);
  let sum = 0;
  const stack = [root];
  while (stack.length) {
    const pid = stack.pop()!;
    sum += stats.get(pid)?.ticks ?? 0;
    stack.push(...(children.get(pid) ?? []));
  }
  return sum;
}

function availableMb(): number {
  try {
    const m = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'));
    if (m) return Number(m[1]) / 1024;
  } catch {
    // not Linux: the kernel's free figure is the best there is
  }
  return os.freemem() / 2 ** 20;
}
