import os from 'node:os';
import { SandboxConfig, type SandboxConfigInput } from '../../protocol/config-sandbox.js';
import { CgroupManager, type CgroupDescription } from './cgroup.js';
import { DENIED_SYSCALLS } from './seccomp.js';

/** The cgroup mode this config gets here, found without creating anything (no probe). */
function limitsMode(c: SandboxConfig): CgroupDescription {
  if (c.runtime !== 'bwrap') return { mode: 'rlimit', controllers: [], parents: [], reason: `cgroups are used with the bwrap runtime only (sandbox.runtime is ${c.runtime})` };
  try {
    return CgroupManager.detect({ setting: c.cgroup, parent: c.cgroup_parent, probe: false }).describe();
  } catch (e) {
    return { mode: 'rlimit', controllers: [], parents: [], reason: (e as Error).message };
  }
}

/**
 * What isolation and which limits are in force for a sandbox config on this host: /status shows it
 * and the server logs it at start, so an operator can check rather than assume.
 */
export function describeSandbox(input: SandboxConfig | SandboxConfigInput = {}, inForce?: { limits?: CgroupDescription }): Record<string, unknown> {
  const c = SandboxConfig.parse(input);
  const root = process.getuid?.() === 0;
  const bwrap = c.runtime === 'bwrap';
  return {
    runtime: c.runtime,
    isolated: c.runtime !== 'process',
    user: bwrap ? (root ? c.user : os.userInfo().username) : os.userInfo().username,
    workspace: bwrap ? { kind: 'tmpfs private to the sandbox', size_mb: c.disk_mb } : { kind: 'host directory', root: c.root ?? null },
    max_read_bytes: c.max_read_bytes,
    data_dirs: c.data_dirs,
    seccomp: bwrap ? (c.seccomp ? { filter: 'on', denied_syscalls: DENIED_SYSCALLS.map((d) => d.name) } : { filter: 'off (sandbox.seccomp: false)' }) : c.runtime === 'apptainer' && c.apptainer.seccomp ? { filter: 'apptainer --security seccomp (EPERM for every denied call)', denied_syscalls: DENIED_SYSCALLS.map((d) => d.name) } : { filter: 'off' },
    nested_user_namespaces: bwrap ? 'disabled (--disable-userns)' : c.runtime === 'apptainer' ? 'allowed by apptainer' : 'host',
    tool_server: bwrap ? 'execute-only node: non-dumpable, not ptrace-able or readable through /proc by the task' : 'plain node',
    network: bwrap
      ? { default: 'none (own namespace with only lo)', network_true: 'slirp4netns in the sandbox\'s own namespace: outside reachable; host loopback, the host\'s own addresses and other sandboxes not' }
      : c.runtime === 'apptainer'
        ? { default: 'none (--net --network none)', network_true: 'the host network (apptainer), with a unique 127.x address' }
        : { default: 'the host network (no isolation)' },
    host_channel: bwrap ? 'inherited socketpair (no socket file, nothing of the host filesystem writable)' : 'unix socket file',
    limits: { ...c.limits, cgroup: inForce?.limits ?? limitsMode(c), rlimits: 'ulimit -v/-t/-u/-f on every process the tools start' },
  };
}
