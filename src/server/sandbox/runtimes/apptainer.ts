import os from 'node:os';
import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';
import type { SandboxConfig } from '../../../protocol/config-sandbox.js';
import { apptainerArgs, findApptainer, installApptainerSeccomp } from '../apptainer.js';
import { INSIDE } from '../bwrap.js';
import type { CgroupOptions } from '../cgroup.js';
import { isRoot, resolveIdentity, type SandboxIdentity } from '../host.js';
import type { LaunchPlan } from '../managed.js';
import { DENIED_SYSCALLS } from '../seccomp.js';
import type { SandboxSpec } from '../types.js';
import type { SandboxDirs } from '../workspace.js';
import type { LaunchInput, RuntimeDescription, RuntimeStrategy, ToolServerView } from './types.js';

/**
 * Apptainer (HPC clusters without user namespaces for bwrap): `apptainer exec --containall` of the
 * configured .sif, the workspace a bound host directory, the tool server on a socket file, the
 * host network with a unique loopback address for a task that asks for network.
 */
export class ApptainerStrategy implements RuntimeStrategy {
  readonly kind = 'apptainer' as const;
  readonly isolated = true;
  readonly hostWorkspace: boolean = true;
  readonly socketDir: boolean = false;
  readonly poolable: boolean = true;
  readonly seedsImages = false;
  protected profile: string | undefined;

  constructor(protected readonly c: SandboxConfig) {}

  locate(): { binary: string; identity: SandboxIdentity | undefined } {
    const binary = findApptainer(this.c.apptainer.binary);
    if (!binary)
      throw new RaasError(
        'sandbox_unavailable',
        'neither apptainer nor singularity is on PATH: load the module (e.g. "module load apptainer") or set sandbox.apptainer.binary',
        { retryable: false },
      );
    // As root, apptainer runs as the sandbox user too (a container started by root is uid 0).
    return { binary, identity: isRoot() ? resolveIdentity(this.c.user) : undefined };
  }

  installOptions(): { node?: string } {
    return {};
  }

  prepare(root: string): void {
    this.profile = this.c.apptainer.seccomp ? installApptainerSeccomp(root) : undefined;
  }

  cgroupOptions(): CgroupOptions {
    return { setting: 'off' };
  }

  sharesHostNetwork(spec: SandboxSpec): boolean {
    return spec.network === true;
  }

  check(): void {}

  view(dirs: SandboxDirs, seed?: string): ToolServerView {
    return {
      socket: INSIDE.socket,
      workspace: INSIDE.workspace,
      tmp_dir: '/tmp',
      home: INSIDE.workspace,
      ...(seed ? { seed_dir: seed } : {}),
    };
  }

  launch(i: LaunchInput): LaunchPlan {
    const { prepared: p, dirs, spec } = i;
    if (!this.c.apptainer.image) {
      throw new RaasError(
        'sandbox_unavailable',
        'sandbox.apptainer.image is required for sandboxes without an image of their own: the .sif file they run from',
        { retryable: false },
      );
    }
    const args = apptainerArgs({
      binary: p.binary,
      image: this.c.apptainer.image,
      workspace: dirs.workspace,
      run: dirs.run,
      toolServer: p.toolServer,
      network: spec.network === true,
      fakeroot: this.c.apptainer.fakeroot,
      env: i.nodeEnv,
      extraArgs: [...(spec.readOnly ?? []).flatMap((b) => ['--bind', `${b.host}:${b.inside}:ro`]), ...this.c.apptainer.extra_args],
      hardening: { seccompProfile: this.profile, userns: this.c.apptainer.userns },
      command: ['node', path.join(INSIDE.toolServer, 'main.js'), JSON.stringify(i.options)],
    });
    return {
      file: p.binary,
      args,
      env: { PATH: process.env.PATH ?? i.path },
      uid: p.identity?.uid,
      gid: p.identity?.gid,
      socket: i.socket,
    };
  }

  describe(): RuntimeDescription {
    return {
      user: os.userInfo().username,
      workspace: { kind: 'host directory', root: this.c.root ?? null },
      seccomp: this.c.apptainer.seccomp
        ? { filter: 'apptainer --security seccomp (EPERM for every denied call)', denied_syscalls: DENIED_SYSCALLS.map((d) => d.name) }
        : { filter: 'off' },
      nested_user_namespaces: 'allowed by apptainer',
      tool_server: 'plain node',
      network: { default: 'none (--net --network none)', network_true: 'the host network (apptainer), with a unique 127.x address' },
      host_channel: 'unix socket file',
      limits: {
        mode: 'rlimit',
        controllers: [],
        parents: [],
        reason: 'cgroups are used with the bwrap runtime only (sandbox.runtime is apptainer)',
      },
    };
  }
}
