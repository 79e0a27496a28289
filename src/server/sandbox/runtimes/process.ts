import os from 'node:os';
import path from 'node:path';
import type { SandboxConfig } from '../../../protocol/config-sandbox.js';
import type { CgroupOptions } from '../cgroup.js';
import type { SandboxIdentity } from '../host.js';
import type { LaunchPlan } from '../managed.js';
import type { SandboxDirs } from '../workspace.js';
import type { LaunchInput, RuntimeDescription, RuntimeStrategy, ToolServerView } from './types.js';

/**
 * No isolation: the tool server runs on the host as the server's user, in a host workspace, on the
 * host network with its own loopback address. For development and for hosts where nothing else
 * runs; the server warns when it is used.
 */
export class ProcessStrategy implements RuntimeStrategy {
  readonly kind = 'process' as const;
  readonly isolated = false;
  readonly hostWorkspace = true;
  readonly poolable = false;
  readonly seedsImages = false;

  constructor(private readonly c: SandboxConfig) {}

  locate(): { binary: string; identity: SandboxIdentity | undefined } {
    return { binary: this.c.node ?? process.execPath, identity: undefined };
  }

  installOptions(): { node?: string } {
    return {};
  }

  prepare(): void {}

  cgroupOptions(): CgroupOptions {
    return { setting: 'off' };
  }

  sharesHostNetwork(): boolean {
    return true;
  }

  check(): void {}

  view(dirs: SandboxDirs, seed?: string): ToolServerView {
    return {
      socket: path.join(dirs.run, 'tools.sock'),
      workspace: dirs.workspace,
      tmp_dir: dirs.run,
      home: dirs.workspace,
      ...(seed ? { seed_dir: seed } : {}),
    };
  }

  launch(i: LaunchInput): LaunchPlan {
    const p = i.prepared;
    return {
      file: p.node,
      args: [path.join(p.toolServer, 'main.js'), JSON.stringify(i.options)],
      env: i.nodeEnv,
      cwd: i.dirs.workspace,
      socket: i.socket,
    };
  }

  describe(): RuntimeDescription {
    return {
      user: os.userInfo().username,
      workspace: { kind: 'host directory', root: this.c.root ?? null },
      seccomp: { filter: 'off' },
      nested_user_namespaces: 'host',
      tool_server: 'plain node',
      network: { default: 'the host network (no isolation)' },
      host_channel: 'unix socket file',
      limits: {
        mode: 'rlimit',
        controllers: [],
        parents: [],
        reason: 'cgroups are used with the bwrap runtime only (sandbox.runtime is process)',
      },
    };
  }
}
