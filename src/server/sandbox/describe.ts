import { SandboxConfig, type SandboxConfigInput } from '../../protocol/config-sandbox.js';
import type { CgroupDescription } from './cgroup.js';
import { defaultRoot } from './host.js';
import { strategyFor } from './runtimes/index.js';

/**
 * What isolation and which limits are in force for a sandbox config on this host: /status shows it
 * and the server logs it at start, so an operator can check rather than assume.
 */
export function describeSandbox(
  input: SandboxConfig | SandboxConfigInput = {},
  inForce?: { limits?: CgroupDescription },
): Record<string, unknown> {
  const c = SandboxConfig.parse(input);
  const st = strategyFor(c);
  const { limits, ...isolation } = st.describe();
  const { user, workspace, seccomp, nested_user_namespaces, tool_server, network, host_channel } = isolation;
  return {
    runtime: c.runtime,
    isolated: st.isolated,
    user,
    workspace,
    max_read_bytes: c.max_read_bytes,
    data_dirs: c.data_dirs,
    seccomp,
    nested_user_namespaces,
    tool_server,
    network,
    host_channel,
    limits: { ...c.limits, cgroup: inForce?.limits ?? limits, rlimits: 'ulimit -v/-t/-u/-f on every process the tools start' },
    // Sandboxes rooted in an image (SandboxSpec.rootImage): where images are unpacked, and the writable layer over them.
    image_roots: {
      cache_dir: c.image_roots.cache_dir ?? `${c.root ?? defaultRoot()}/rootfs`,
      budget_gb: c.image_roots.budget_gb,
      overlay: c.image_roots.overlay,
    },
  };
}
