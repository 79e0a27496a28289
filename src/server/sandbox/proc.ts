import fs from 'node:fs';

/** The process table as read from /proc: pid → parent pid. */
export function processTable(): Map<number, number> {
  const table = new Map<number, number>();
  for (const [pid, e] of processEntries()) table.set(pid, e.ppid);
  return table;
}

/** pid → parent pid and session id of every live (non-zombie) process. */
function processEntries(): Map<number, { ppid: number; sid: number }> {
  const table = new Map<number, { ppid: number; sid: number }>();
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      // The command name may contain spaces and parentheses: fields start after the last ')'.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (rest[0] === 'Z') continue;
      table.set(Number(name), { ppid: Number(rest[1]), sid: Number(rest[3]) });
    } catch {
      /* exited while scanning */
    }
  }
  return table;
}

/** Every live descendant of `pid` (not `pid` itself). */
export function descendants(pid: number): number[] {
  const table = processTable();
  const children = new Map<number, number[]>();
  for (const [p, pp] of table) {
    const list = children.get(pp) ?? [];
    list.push(p);
    children.set(pp, list);
  }
  const out: number[] = [];
  const stack = [...(children.get(pid) ?? [])];
  while (stack.length) {
    const p = stack.pop()!;
    out.push(p);
    stack.push(...(children.get(p) ?? []));
  }
  return out;
}

/** The pid namespace of a process (`pid:[inode]`), or undefined when it is gone or unreadable. */
export function pidNamespace(pid: number): string | undefined {
  try {
    return fs.readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

/** Live (non-zombie) processes in a pid namespace: the process-table check that a sandbox is gone. */
export function processesInNamespace(ns: string): number[] {
  const out: number[] = [];
  for (const pid of processTable().keys()) if (pidNamespace(pid) === ns) out.push(pid);
  return out;
}

/** True while `pid` exists and is not a zombie. */
export function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Sends a signal, ignoring processes that already exited. */
export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone */
  }
}

/**
 * Without a pid namespace (process runtime), what belongs to a sandbox: the tool server's descendants
 * plus every process in their sessions, which catches `(cmd &)` orphans reparented to init.
 */
export function sandboxTree(rootPid: number): number[] {
  const entries = processEntries();
  const tree = new Set([rootPid, ...descendants(rootPid)].filter((p) => entries.has(p)));
  const sids = new Set([...tree].map((p) => entries.get(p)!.sid));
  for (const [pid, e] of entries) if (sids.has(e.sid) && pid !== process.pid) tree.add(pid);
  return [...tree];
}
