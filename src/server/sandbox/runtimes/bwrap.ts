import { createHash } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';
import type { SandboxConfig } from '../../../protocol/config-sandbox.js';
import { CONN_FD } from '../../tools/protocol.js';
import { bwrapArgs, INSIDE } from '../bwrap.js';
import { CgroupManager, type CgroupDescription, type CgroupOptions } from '../cgroup.js';
import { findBinary, isRoot, resolveIdentity, type SandboxIdentity } from '../host.js';
import type { LaunchPlan } from '../managed.js';
import { checkUserNet } from '../network.js';
import { SANDBOX_NODE } from '../prepare.js';
import { bwrapHardeningArgs, DENIED_SYSCALLS, seccompProgram } from '../seccomp.js';
import type { SandboxSpec } from '../types.js';
import type { SandboxDirs } from '../workspace.js';
import type { LaunchInput, RuntimeDescription, RuntimeStrategy, ToolServerView } from './types.js';

/** The fd bwrap reads the seccomp program from (3 is the status fd, CONN_FD the host channel). */
const SECCOMP_FD = 4;
/** The fd bwrap holds as `--sync-fd` for a network sandbox: the helper exits when it closes. */
const SYNC_FD = 5;
/** The pipe bwrap reads its options from (`--args`), once it is in the sandbox's cgroup. */
const ARGS_FD = 6;

/**
 * bubblewrap: own user, pid, ipc, uts, cgroup and network namespaces, a private tmpfs workspace,
 * seccomp, the tool server run from an execute-only node and reached over an inherited socketpair,
 * per-sandbox cgroups, and slirp4netns for a task that asks for network.
 */
export class BwrapStrategy implements RuntimeStrategy {
  readonly kind = 'bwrap' as const;
  readonly isolated = true;
  readonly hostWorkspace = false;
  readonly poolable: boolean = true;
  readonly seedsImages: boolean = true;
  protected seccompProgram: Buffer | undefined;
  private netChecked = false;

  constructor(protected readonly c: SandboxConfig) {}

  locate(): { binary: string; identity: SandboxIdentity | undefined } {
    const binary = findBinary(this.c.bwrap);
    if (!binary) {
      throw new RaasError(
        'sandbox_unavailable',
        `bubblewrap ("${this.c.bwrap}") is not installed or not on PATH: run scripts/setup.sh or "apt-get install bubblewrap", or set sandbox.runtime`,
        { retryable: false },
      );
    }
    return { binary, identity: resolveIdentity(this.c.user) };
  }

  // The task's processes (same uid) can neither ptrace the tool server nor open its /proc files:
  // a non-readable binary makes it non-dumpable.
  installOptions(node: string): { node?: string } {
    return { node };
  }

  prepare(): void {
    this.seccompProgram = this.c.seccomp ? seccompProgram() : undefined;
  }

  cgroupOptions(identity: SandboxIdentity | undefined): CgroupOptions {
    return { setting: this.c.cgroup, parent: this.c.cgroup_parent, identity };
  }

  // Never the host's: a network sandbox gets slirp4netns in its own namespace.
  sharesHostNetwork(): boolean {
    return false;
  }

  check(spec: SandboxSpec, identity: SandboxIdentity | undefined): void {
    if (spec.network !== true || this.netChecked) return;
    checkUserNet('slirp4netns', identity ?? {});
    this.netChecked = true;
  }

  view(dirs: SandboxDirs, seed?: string): ToolServerView {
    return {
      socket: INSIDE.socket,
      workspace: INSIDE.workspace,
      tmp_dir: '/tmp',
      home: INSIDE.workspace,
      conn_fd: CONN_FD,
      ...(seed ? { seed_dir: INSIDE.seed } : {}),
      // A bound workspace (an image build) lives on the host's disk, not on a sized tmpfs.
      ...(dirs.bound ? {} : { disk_mb: this.c.disk_mb }),
    };
  }

  launch(i: LaunchInput): LaunchPlan {
    const { prepared: p, dirs, spec } = i;
    const network = spec.network === true;
    const command = [path.join(INSIDE.toolServer, SANDBOX_NODE), path.join(INSIDE.toolServer, 'main.js'), JSON.stringify(i.options)];
    const options = bwrapArgs({
      diskMb: this.c.disk_mb,
      bindWorkspace: dirs.bound ? dirs.workspace : undefined,
      seed: i.seed,
      toolServer: p.toolServer,
      node: p.node,
      python: this.c.python,
      network,
      netDir: path.join(p.root, 'net'),
      syncFd: SYNC_FD,
      tmpSizeMb: i.tmpSizeMb,
      env: i.nodeEnv,
      roBinds: this.c.ro_binds,
      readOnly: spec.readOnly,
      hardening: this.seccompProgram ? bwrapHardeningArgs(SECCOMP_FD) : ['--disable-userns'],
      command: [],
    });
    return {
      // bwrap reads its options from a pipe and starts nothing before it has them: on cgroup v2 it
      // is spawned directly as the sandbox user and the server joins it to the group first (off
      // the event loop, while bwrap loads); on v1 the shell wrapper, cheaper there, has joined
      // before exec (runtime.ts). bwrap takes the command only from its argv. A server gone before
      // the write leaves bwrap no options: an empty root where the command does not exist, so it
      // exits. A tag of the sandbox root stays
      // on the argv so that `ps` (and the process-table checks) can tell whose bwrap it is: a tag,
      // not the path, since the task reads bwrap's argv as /proc/1/cmdline. The options'
      // --clearenv drops the variable before anything runs.
      file: p.binary,
      args: ['--setenv', 'RAAS_SANDBOX_TAG', rootTag(p.root), '--args', String(ARGS_FD), ...command],
      argsFd: { fd: ARGS_FD, args: options },
      env: { PATH: i.path },
      // Not the server's working directory: bwrap (the sandbox's pid 1) keeps its cwd and
      // environment, both readable from inside through /proc/1.
      cwd: '/',
      uid: p.identity?.uid,
      gid: p.identity?.gid,
      socket: i.socket,
      statusFd: true,
      connFd: true,
      ...(this.seccompProgram ? { fdData: { [SECCOMP_FD]: this.seccompProgram } } : {}),
      ...(network ? { network: { syncFd: SYNC_FD, uid: p.identity?.uid, gid: p.identity?.gid } } : {}),
    };
  }

  describe(): RuntimeDescription {
    return {
      user: isRoot() ? this.c.user : os.userInfo().username,
      workspace: { kind: 'tmpfs private to the sandbox', size_mb: this.c.disk_mb },
      seccomp: this.c.seccomp
        ? { filter: 'on', denied_syscalls: DENIED_SYSCALLS.map((d) => d.name) }
        : { filter: 'off (sandbox.seccomp: false)' },
      nested_user_namespaces: 'disabled (--disable-userns)',
      tool_server: 'execute-only node: non-dumpable, not ptrace-able or readable through /proc by the task',
      network: {
        default: 'none (own namespace with only lo)',
        network_true:
          "slirp4netns in the sandbox's own namespace: outside reachable; host loopback, the host's own addresses and other sandboxes not",
      },
      host_channel: 'inherited socketpair (no socket file, nothing of the host filesystem writable)',
      limits: this.limitsMode(),
    };
  }

  /** The cgroup mode this config gets here, found without creating anything (no probe). */
  private limitsMode(): CgroupDescription {
    try {
      return CgroupManager.detect({ setting: this.c.cgroup, parent: this.c.cgroup_parent, probe: false }).describe();
    } catch (e) {
      return { mode: 'rlimit', controllers: [], parents: [], reason: (e as Error).message };
    }
  }
}

/**
 * What names a sandbox root on bwrap's argv (`RAAS_SANDBOX_TAG`): 16 hex digits of its SHA-256,
 * so `ps` can attribute a bwrap to its server's root without the task learning host paths.
 */
export function rootTag(root: string): string {
  return createHash('sha256').update(root).digest('hex').slice(0, 16);
}
