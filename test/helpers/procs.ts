// The process table, read from /proc: the suite's "nothing left running" assertions. Other
// engineers run sandboxes on this machine at the same time, so every check is scoped: descendants of
// a pid we started, pid namespaces of our sandboxes, or command lines naming our own sandbox root.
import fs from 'node:fs';

export interface Proc {
  pid: number;
  ppid: number;
  /** The state letter of /proc/<pid>/status (R, S, D, T, …). */
  state: string;
  uid: number;
  rssKb: number;
  cmd: string;
  /** The pid namespace (undefined when not ours to read). */
  ns?: string;
}

/** Every live (non-zombie) process. */
export function processTable(): Proc[] {
  const out: Proc[] = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = fs.readFileSync(`/proc/${name}/status`, 'utf8');
      const state = /^State:\s+(\S)/m.exec(status)?.[1] ?? '?';
      if (state === 'Z' || state === 'X') continue;
      const cmd = fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      out.push({
        pid: Number(name),
        ppid: Number(/^PPid:\s+(\d+)/m.exec(status)?.[1] ?? 0),
        state,
        uid: Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1),
        rssKb: Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0),
        cmd,
        ns: pidNs(Number(name)),
      });
    } catch {
      /* exited while scanning */
    }
  }
  return out;
}

/** Live descendants of `pid` (not `pid` itself). */
export function descendantsOf(pid: number, table = processTable()): Proc[] {
  const kids = new Map<number, Proc[]>();
  for (const p of table) kids.set(p.ppid, [...(kids.get(p.ppid) ?? []), p]);
  const out: Proc[] = [];
  const stack = [...(kids.get(pid) ?? [])];
  while (stack.length) {
    const p = stack.pop()!;
    out.push(p);
    stack.push(...(kids.get(p.pid) ?? []));
  }
  return out;
}

/** The pid namespace of a process, or undefined once it is gone. */
export function pidNs(pid: number): string | undefined {
  try {
    return fs.readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** Live processes whose pid namespace is one of `namespaces`. */
export function inNamespaces(namespaces: Iterable<string>): Proc[] {
  const want = new Set(namespaces);
  if (want.size === 0) return [];
  return processTable().filter((p) => p.ns !== undefined && want.has(p.ns));
}

/** Processes whose command line contains `needle` (e.g. our sandbox root in bwrap's arguments). */
export function withCommand(needle: string): Proc[] {
  return processTable().filter((p) => p.cmd.includes(needle) && p.pid !== process.pid);
}

/** Live processes whose environment has `name=value`: a marker a test sets on a process it starts
 * reaches every child that inherits the environment, so the check sees no other test's processes. */
export function withEnv(name: string, value: string): Proc[] {
  const want = `${name}=${value}`;
  return processTable().filter((p) => {
    if (p.pid === process.pid) return false;
    try {
      return fs.readFileSync(`/proc/${p.pid}/environ`, 'utf8').split('\0').includes(want);
    } catch {
      return false;
    }
  });
}

/** Polls `find` until it returns nothing or `ms` passes; returns what is left. */
export async function waitGone<T>(find: () => T[], ms = 5000): Promise<T[]> {
  const until = Date.now() + ms;
  for (;;) {
    const left = find();
    if (left.length === 0 || Date.now() > until) return left;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** True while `pid` exists and is not a zombie. */
export function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const s = stat.slice(stat.lastIndexOf(')') + 2)[0];
    return s !== 'Z' && s !== 'X';
  } catch {
    return false;
  }
}

/** Number of sandbox workspaces under a sandbox root (`<root>/ws/*`). */
export function workspaceCount(root: string): number {
  try {
    return fs.readdirSync(`${root}/ws`).length;
  } catch {
    return 0;
  }
}

/** True for the node tool server itself (bwrap's own command line also names main.js). */
export function isToolServer(p: Proc): boolean {
  return /^\S*node\s+\S*tool-server\/main\.js/.test(p.cmd);
}
