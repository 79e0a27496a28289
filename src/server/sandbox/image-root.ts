import fs from 'node:fs';
import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import { activateImage } from '../tools/image-env.js';
import { inImage, symlinkOnPath } from './image-paths.js';
import type { ImageRoot } from './runtimes/types.js';

/**
 * What runs in an image, found on the host by reading the image's tree (never a sandbox's: the
 * cache's tree is the read-only lower layer no sandbox writes), links resolved inside it: the
 * shell that applies limits, the python interpreter, and the environment with a conda `testbed`
 * environment active (activateImage).
 */
export function imageRootOf(
  img: { dir: string; env: Record<string, string>; workdir?: string },
  workdir: string | undefined,
  basePath: string,
): ImageRoot {
  const found = activateImage(img.env, basePath, (p) => inImage(img.dir, p) !== undefined);
  const wd = workdir ?? (img.workdir && img.workdir !== '/' ? img.workdir : '/workspace');
  const hasWorkspace = fs.lstatSync(path.join(img.dir, 'workspace'), { throwIfNoEntry: false }) !== undefined;
  return { dir: img.dir, workdir: path.posix.normalize(wd), hasWorkspace, ...found };
}

/**
 * Refuses an image whose tree has a symbolic link where the sandbox mounts something (`/tmp`,
 * `/proc`, `/dev`, `/.raas`, the workspace, a read-only bind) or on the way there: bubblewrap would
 * refuse to start on it anyway (it never follows such a link out of the new root), and this says why.
 */
export function checkImagePaths(ref: string, root: string, mounts: string[]): void {
  for (const m of mounts) {
    const link = symlinkOnPath(root, m);
    if (link) {
      throw new RaasError(
        'invalid_instance',
        `image ${ref}: ${link} is a symbolic link, and an image-rooted sandbox mounts ${m} there; make it a directory in the image`,
        { retryable: false },
      );
    }
  }
}

/**
 * Where /etc/resolv.conf of a network sandbox goes in an image: the file itself, or the target of a
 * link that stays inside the image (Debian's `../run/systemd/resolve/stub-resolv.conf`).
 */
export function imageResolvConf(root: string): string {
  const at = inImage(root, '/etc/resolv.conf', { wantTarget: true });
  return at ? `/${path.relative(root, at)}` : '/etc/resolv.conf';
}
