import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';
import { CONN_FD } from '../../tools/protocol.js';
import { findBinary, type SandboxIdentity } from '../host.js';
import { IMAGE_LIB, installImageNode } from '../image-node.js';
import { imageResolvConf } from '../image-root.js';
import type { LaunchPlan } from '../managed.js';
import { checkUserNet, networkBwrapArgs } from '../network.js';
import { bwrapHardeningArgs } from '../seccomp.js';
import type { SandboxSpec } from '../types.js';
import type { SandboxDirs } from '../workspace.js';
import { BwrapStrategy } from './bwrap.js';
import { overlayScript, probeOverlay, type OverlayKind } from './overlay.js';
import type { ImageRoot, LaunchInput, RuntimeDescription, ToolServerView } from './types.js';

/** Where raas's own files appear in an image-rooted sandbox: a read-only tmpfs holding two read-only binds. */
export const IMAGE_RAAS = '/.raas';
/** The tool server's install inside an image-rooted sandbox (beside IMAGE_LIB). */
const TOOL_SERVER = `${IMAGE_RAAS}/tool-server`;
const SECCOMP_FD = 4;
const SYNC_FD = 5;

/**
 * bubblewrap rooted in the task's own image instead of the host's /usr and /etc: the image's
 * files, programs and environment under a private writable overlay (overlay.ts), and every defence
 * of the host-rooted strategy (own namespaces, no network unless asked, seccomp, no nested user
 * namespaces, cgroups, the host channel an inherited socketpair). The task runs as uid 0 of its
 * user namespace, which owns the image's files (the cache gives them to the sandbox user), as in a
 * rootless container, with every capability dropped. The tool server is the host's node, patched
 * to load the host's loader and libraries from IMAGE_LIB, so the image needs no node, no libc and
 * no shell of its own; raas's files sit on a read-only mount the task cannot rename or replace.
 */
export class BwrapImageStrategy extends BwrapStrategy {
  override readonly poolable = false;
  override readonly seedsImages = false;
  private nodeDir: string | undefined;
  private overlay: OverlayKind | undefined;
  private netOk = false;
  private unshare = 'unshare';

  /** Probes the overlay kind and installs the patched node (once, on the first image-rooted sandbox). */
  prepareImages(root: string, node: string, toolServer: string, identity: SandboxIdentity | undefined): void {
    this.prepare();
    this.unshare = findBinary('unshare') ?? 'unshare';
    this.overlay ??= probeOverlay(this.c.image_roots.overlay, root, identity);
    this.nodeDir ??= installImageNode(root, node, [path.join(toolServer, 'node_modules/node-pty/build/Release/pty.node')]);
  }

  /** The overlay kind in use (after prepareImages). */
  overlayKind(): OverlayKind | undefined {
    return this.overlay;
  }

  override check(spec: SandboxSpec, identity: SandboxIdentity | undefined): void {
    if (spec.image) {
      throw new RaasError('bad_request', 'SandboxSpec.image and rootImage exclude each other: the root image already is the tree', {
        retryable: false,
      });
    }
    if (spec.network === true && !this.netOk) {
      checkUserNet('slirp4netns', identity ?? {});
      this.netOk = true;
    }
  }

  override view(_dirs: SandboxDirs, _seed?: string, root?: ImageRoot): ToolServerView {
    const workspace = root?.workdir ?? '/workspace';
    return { socket: '/run/raas/tools.sock', workspace, tmp_dir: '/tmp', home: workspace, conn_fd: CONN_FD, disk_mb: this.c.disk_mb };
  }

  override launch(i: LaunchInput): LaunchPlan {
    const { prepared: p, spec, root } = i;
    if (!root) throw new RaasError('sandbox_error', 'an image-rooted sandbox was started without its image');
    if (!this.overlay || !this.nodeDir) throw new RaasError('sandbox_error', 'image-rooted sandboxes were not prepared (prepareImages)');
    if (/[,:\n]/.test(root.dir)) {
      throw new RaasError('bad_request', `image root ${root.dir}: an overlay lower directory cannot contain "," ":" or a newline`, {
        retryable: false,
      });
    }
    const network = spec.network === true;
    const a = ['--unshare-user', '--uid', '0', '--gid', '0', '--cap-drop', 'ALL'];
    a.push('--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--unshare-net');
    a.push('--die-with-parent', '--new-session', '--clearenv');
    a.push('--bind', path.join(p.root, 'ovl', 'root'), '/');
    a.push('--proc', '/proc', '--dev', '/dev');
    a.push('--size', String(i.tmpSizeMb * 1024 * 1024), '--tmpfs', '/tmp');
    // A mount point cannot be renamed, and this tmpfs is read-only once the binds are in: nothing the
    // task does replaces a file the tool server loads later.
    a.push('--tmpfs', IMAGE_RAAS, '--ro-bind', this.nodeDir, IMAGE_LIB, '--ro-bind', p.toolServer, TOOL_SERVER, '--remount-ro', IMAGE_RAAS);
    if (network) a.push(...networkBwrapArgs(path.join(p.root, 'net'), 'slirp4netns', imageResolvConf(root.dir)));
    for (const b of spec.readOnly ?? []) a.push('--ro-bind', b.host, b.inside);
    a.push('--dir', root.workdir);
    // Tools and prompts that say /workspace reach the image's workspace too, when the image has no /workspace of its own.
    if (root.workdir !== '/workspace' && !root.hasWorkspace) a.push('--symlink', root.workdir, '/workspace');
    a.push('--chdir', root.workdir, '--hostname', 'sandbox');
    for (const [k, v] of Object.entries(i.nodeEnv)) a.push('--setenv', k, v);
    a.push('--json-status-fd', '3');
    if (network) a.push('--sync-fd', String(SYNC_FD));
    a.push(...(this.seccompProgram ? bwrapHardeningArgs(SECCOMP_FD) : ['--disable-userns']));
    a.push(path.join(IMAGE_LIB, 'node'), path.join(TOOL_SERVER, 'main.js'), JSON.stringify(i.options));
    const script = overlayScript(this.overlay);
    return {
      file: this.unshare,
      args: [
        '-Urm',
        '--propagation',
        'private',
        '/bin/sh',
        '-c',
        script,
        'raas-overlay',
        path.join(p.root, 'ovl'),
        `${this.c.disk_mb}m`,
        root.dir,
      ].concat([p.binary, ...a]),
      env: { PATH: i.path },
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

  override describe(): RuntimeDescription {
    const base = super.describe();
    return {
      ...base,
      workspace: {
        kind: `the task's image, read-only, under a private writable overlay (${this.overlay === 'fuse' ? 'fuse-overlayfs' : 'kernel overlayfs'} in the sandbox's user namespace, on a tmpfs)`,
        size_mb: this.c.disk_mb,
      },
      tool_server: `${base.tool_server}; the host's node with the host's loader and libraries, on a read-only mount at ${IMAGE_RAAS}`,
    };
  }
}
