import fs from 'node:fs';
import path from 'node:path';
import { networkBwrapArgs } from './network.js';

/** Where things appear inside a bwrap sandbox. */
export const INSIDE = {
  workspace: '/workspace',
  run: '/run/raas',
  toolServer: '/opt/raas/tool-server',
  /** An image tree, bound read-only and copied into the workspace by the tool server at start. */
  seed: '/opt/raas/seed',
  /** Unused by bwrap sandboxes (they talk over an inherited socketpair); kept for apptainer. */
  socket: '/run/raas/tools.sock',
} as const;

export interface BwrapArgsInput {
  /**
   * Size of the workspace, a tmpfs private to the sandbox (sandbox.disk_mb): the host has no path
   * into it, and it disappears with the sandbox.
   */
  diskMb: number;
  /** Bind this host directory as the workspace instead (image builds only: trusted setup scripts). */
  bindWorkspace?: string;
  /** An image tree bound read-only at INSIDE.seed (the tool server copies it into the workspace). */
  seed?: string;
  /** Extra hardening arguments (--disable-userns, --seccomp FD), placed before the command. */
  hardening?: string[];
  toolServer: string;
  node: string;
  python?: string;
  /** User-mode networking (slirp4netns) in the sandbox's own network namespace; never the host's. */
  network: boolean;
  /** Where the generated resolv.conf of network sandboxes lives (readable by the sandbox user). */
  netDir?: string;
  /** The fd bwrap holds open as `--sync-fd` for the network helper's lifetime. */
  syncFd?: number;
  tmpSizeMb: number;
  env: Record<string, string>;
  roBinds?: string[];
  /** Per-sandbox read-only binds (SandboxSpec.readOnly). */
  readOnly?: Array<{ host: string; inside: string }>;
  /** The command run inside (node tool-server/main.js ...). */
  command: string[];
}

/** Top-level directories that are symlinks into /usr on merged-/usr systems, binds otherwise. */
const SYSTEM_LINKS = ['/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];

/**
 * The bwrap command line: own user, pid, ipc, uts, cgroup and network namespaces (a task that asks
 * for network gets user-mode networking in its own namespace, never the host's loopback); read-only /usr and /etc; the workspace a size-capped tmpfs of its own (nothing of the
 * host's filesystem is writable); a size-capped tmpfs /tmp; `/` remounted read-only; cleared
 * environment; --die-with-parent and --new-session. The tool server reaches the host only through
 * the socketpair it inherits.
 */
export function bwrapArgs(i: BwrapArgsInput): string[] {
  const a = ['--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try'];
  a.push('--unshare-net');
  a.push('--die-with-parent', '--new-session', '--clearenv');
  a.push('--ro-bind', '/usr', '/usr');
  for (const p of SYSTEM_LINKS) {
    let st: fs.Stats;
    try {
      st = fs.lstatSync(p);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) a.push('--symlink', fs.readlinkSync(p), p);
    else if (st.isDirectory()) a.push('--ro-bind', p, p);
  }
  a.push('--ro-bind', '/etc', '/etc');
  if (i.network) a.push(...networkBwrapArgs(i.netDir!));
  a.push('--proc', '/proc', '--dev', '/dev');
  a.push('--size', String(i.tmpSizeMb * 1024 * 1024), '--tmpfs', '/tmp');
  // Interpreters outside /usr (nvm, pyenv installs) need their prefix visible, read-only.
  for (const bin of [i.node, i.python]) {
    const prefix = bin ? outsideUsrPrefix(bin) : undefined;
    if (prefix) a.push('--ro-bind', prefix, prefix);
  }
  for (const p of i.roBinds ?? []) a.push('--ro-bind', p, p);
  for (const b of i.readOnly ?? []) a.push('--ro-bind', b.host, b.inside);
  a.push('--ro-bind', i.toolServer, INSIDE.toolServer);
  if (i.seed) a.push('--ro-bind', i.seed, INSIDE.seed);
  if (i.bindWorkspace) a.push('--bind', i.bindWorkspace, INSIDE.workspace);
  else a.push('--size', String(i.diskMb * 1024 * 1024), '--perms', '0755', '--tmpfs', INSIDE.workspace);
  a.push('--remount-ro', '/');
  a.push('--chdir', INSIDE.workspace, '--hostname', 'sandbox');
  for (const [k, v] of Object.entries(i.env)) a.push('--setenv', k, v);
  a.push('--json-status-fd', '3');
  if (i.network) a.push('--sync-fd', String(i.syncFd));
  a.push(...(i.hardening ?? []));
  a.push(...i.command);
  return a;
}

/** For a binary outside /usr, the directory to bind so it runs (its install prefix). */
function outsideUsrPrefix(bin: string): string | undefined {
  let real: string;
  try {
    real = fs.realpathSync(bin);
  } catch {
    return undefined;
  }
  if (real.startsWith('/usr/') || SYSTEM_LINKS.some((l) => real.startsWith(l + '/'))) return undefined;
  // <prefix>/bin/node → <prefix>
  return path.dirname(path.dirname(real));
}
