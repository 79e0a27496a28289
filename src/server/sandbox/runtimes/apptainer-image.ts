import path from 'node:path';
import { RaasError } from '../../../protocol/errors.js';
import { APPTAINER_IMAGE_MOUNTS, apptainerArgs } from '../apptainer.js';
import { INSIDE } from '../bwrap.js';
import { installImageNode } from '../image-node.js';
import type { LaunchPlan } from '../managed.js';
import type { SandboxDirs } from '../workspace.js';
import { ApptainerStrategy } from './apptainer.js';
import type { ImageRoot, LaunchInput, RuntimeDescription, ToolServerView } from './types.js';

/**
 * Apptainer running an instance's own image (its .sif as it is, an unpacked directory, or the tree
 * the image cache made of an OCI layout or docker archive) instead of sandbox.apptainer.image:
 * `--writable-tmpfs` over it (Apptainer's session tmpfs, `sessiondir max size` in apptainer.conf,
 * 64 MiB by default), the workspace inside the image, the host's node patched to its own loader
 * and libraries and the tool server bound read-only under /.raas, so the image needs no node. The
 * image's environment is what Apptainer gives the container (its /.singularity.d/env), with a
 * conda `testbed` environment activated by the tool server (image_env: inherit).
 */
export class ApptainerImageStrategy extends ApptainerStrategy {
  override readonly hostWorkspace = false;
  override readonly socketDir = true;
  override readonly poolable = false;
  private nodeDir: string | undefined;

  /** Installs the patched node (once, on the first image-rooted sandbox). */
  prepareImages(root: string, node: string, toolServer: string): void {
    this.nodeDir ??= installImageNode(root, node, [path.join(toolServer, 'node_modules/node-pty/build/Release/pty.node')]);
  }

  override view(_dirs: SandboxDirs, _seed?: string, root?: ImageRoot): ToolServerView {
    const workspace = root?.workdir ?? INSIDE.workspace;
    return { socket: INSIDE.socket, workspace, tmp_dir: '/tmp', home: workspace };
  }

  override launch(i: LaunchInput): LaunchPlan {
    const { prepared: p, dirs, spec, root } = i;
    if (!root) throw new RaasError('sandbox_error', 'an image-rooted sandbox was started without its image');
    if (!this.nodeDir) throw new RaasError('sandbox_error', 'image-rooted sandboxes were not prepared (prepareImages)');
    const args = apptainerArgs({
      binary: p.binary,
      image: root.dir,
      workspace: dirs.workspace,
      run: dirs.run,
      toolServer: p.toolServer,
      network: spec.network === true,
      fakeroot: this.c.apptainer.fakeroot,
      env: i.nodeEnv,
      extraArgs: [...(spec.readOnly ?? []).flatMap((b) => ['--bind', `${b.host}:${b.inside}:ro`]), ...this.c.apptainer.extra_args],
      hardening: { seccompProfile: this.profile, userns: this.c.apptainer.userns },
      imageRoot: { nodeDir: this.nodeDir, workdir: root.workdir },
      command: [
        path.join(APPTAINER_IMAGE_MOUNTS.lib, 'node'),
        path.join(APPTAINER_IMAGE_MOUNTS.toolServer, 'main.js'),
        JSON.stringify({ ...i.options, image_env: 'inherit' }),
      ],
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

  override describe(): RuntimeDescription {
    return {
      ...super.describe(),
      workspace: { kind: "the task's image under apptainer --writable-tmpfs (sessiondir max size)" },
      tool_server: "the host's node with the host's loader and libraries, bound read-only at /.raas",
    };
  }
}
