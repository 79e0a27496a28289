import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';
import { CONN_FD } from '../../tools/protocol.js';
import { IMAGE_LIB, installImageNode } from '../image-node.js';
import type { LaunchPlan } from '../managed.js';
import { bwrapHardeningArgs } from '../seccomp.js';
import type { SandboxSpec } from '../types.js';
import type { SandboxDirs } from '../workspace.js';
import { BwrapStrategy } from './bwrap.js';
import type { ImageRoot, LaunchInput, RuntimeDescription, ToolServerView } from './types.js';

/** The tool server's install inside an image-rooted sandbox (beside IMAGE_LIB, out of the image's way). */
const TOOL_SERVER = '/.raas/tool-server';
const SECCOMP_FD = 4;

/**
 * Run by `unshare -Urm` (a user and mount namespace of the sandbox user's own, nothing visible to
 * the host): a tmpfs of `sandbox.disk_mb` over the sandbox's mount point, the image read-only as
 * the lower layer of a kernel overlay whose upper layer is on that tmpfs, then bwrap with the
 * merged tree as its root. Every write lands in the tmpfs and ends with the namespace; the image
 * is never changed. Debian 12's bubblewrap 0.8.0 has no overlay options; overlayfs is allowed in a
 * user namespace since Linux 5.11.
 */
const OVERLAY_SCRIPT = [
  'set -e',
  'm=$1; size=$2; lower=$3; shift 3',
  'mount -t tmpfs -o "size=$size,mode=0755" raas-upper "$m"',
  'mkdir "$m/upper" "$m/work" "$m/root"',
  'mount -t overlay raas-root -o "lowerdir=$lower,upperdir=$m/upper,workdir=$m/work" "$m/root"',
  'exec "$@"',
].join('\n');

/**
 * bubblewrap rooted in the task's own image instead of the host's /usr and /etc: the image's
 * files, programs and environment, a private writable overlay over it, and every defence of the
 * host-rooted strategy (own namespaces, no network, seccomp, no nested user namespaces, cgroups,
 * the host channel an inherited socketpair). The task runs as uid 0 of its user namespace, which
 * owns the image's files (the image cache keeps them owned by the sandbox user), as in a rootless
 * container; it holds no capability. The tool server is the host's node, patched to load the
 * host's libraries from IMAGE_LIB, so the image needs no node, no libc and no shell of its own.
 */
export class BwrapImageStrategy extends BwrapStrategy {
  override readonly poolable = false;
  override readonly seedsImages = false;
  private nodeDir: string | undefined;

  override check(spec: SandboxSpec): void {
    if (spec.network === true) {
      throw new RaasError(
        'bad_request',
        'SandboxSpec.network with an image root is not supported yet: image-rooted sandboxes have no network; drop network or the image',
        { retryable: false },
      );
    }
    if (spec.image) {
      throw new RaasError('bad_request', 'SandboxSpec.image and an image root exclude each other: the root image already is the tree', {
        retryable: false,
      });
    }
  }

  override view(dirs: SandboxDirs, _seed?: string, root?: ImageRoot): ToolServerView {
    const workspace = root?.workdir ?? '/workspace';
    return { socket: '/run/raas/tools.sock', workspace, tmp_dir: '/tmp', home: workspace, conn_fd: CONN_FD, disk_mb: this.c.disk_mb };
  }

  override launch(i: LaunchInput): LaunchPlan {
    const { prepared: p, spec, root } = i;
    if (!root) throw new RaasError('sandbox_error', 'an image-rooted sandbox was started without its image');
    if (/[,:\n]/.test(root.dir)) {
      throw new RaasError('bad_request', `image root ${root.dir}: an overlay lower directory cannot contain "," ":" or a newline`, {
        retryable: false,
      });
    }
    this.nodeDir ??= installImageNode(p.root, p.node, [path.join(p.toolServer, 'node_modules/node-pty/build/Release/pty.node')]);
    const mount = path.join(p.root, 'ovl');
    const workspace = root.workdir;
    const a = ['--unshare-user', '--uid', '0', '--gid', '0', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try'];
    a.push('--unshare-net', '--die-with-parent', '--new-session', '--clearenv');
    a.push('--bind', path.join(mount, 'root'), '/');
    a.push('--proc', '/proc', '--dev', '/dev');
    a.push('--size', String(i.tmpSizeMb * 1024 * 1024), '--tmpfs', '/tmp');
    a.push('--ro-bind', this.nodeDir, IMAGE_LIB, '--ro-bind', p.toolServer, TOOL_SERVER);
    for (const b of spec.readOnly ?? []) a.push('--ro-bind', b.host, b.inside);
    a.push('--dir', workspace, '--chdir', workspace, '--hostname', 'sandbox');
    for (const [k, v] of Object.entries(i.nodeEnv)) a.push('--setenv', k, v);
    a.push('--json-status-fd', '3');
    a.push(...(this.seccompProgram ? bwrapHardeningArgs(SECCOMP_FD) : ['--disable-userns']));
    a.push(path.join(IMAGE_LIB, 'node'), path.join(TOOL_SERVER, 'main.js'), JSON.stringify(i.options));
    const size = `${this.c.disk_mb}m`;
    return {
      file: 'unshare',
      args: ['-Urm', '--propagation', 'private', '/bin/sh', '-c', OVERLAY_SCRIPT, 'raas-overlay', mount, size, root.dir, p.binary, ...a],
      env: { PATH: i.path },
      cwd: '/',
      uid: p.identity?.uid,
      gid: p.identity?.gid,
      socket: i.socket,
      statusFd: true,
      connFd: true,
      ...(this.seccompProgram ? { fdData: { [SECCOMP_FD]: this.seccompProgram } } : {}),
    };
  }

  override describe(): RuntimeDescription {
    return {
      ...super.describe(),
      workspace: {
        kind: "the task's image, read-only, under a private writable overlay (kernel overlayfs in the sandbox's user namespace)",
        size_mb: this.c.disk_mb,
      },
      network: { default: 'none (own namespace with only lo)', network_true: 'not supported with an image root' },
    };
  }
}
