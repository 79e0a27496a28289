import path from 'node:path';
import { RaasError } from '../../protocol/errors.js';
import { inImage, symlinkOnPath } from './image-paths.js';
import type { ImageRoot } from './runtimes/types.js';

/** The conda installs SWE-bench images keep their `testbed` environment in. */
const CONDA_ROOTS = ['/opt/miniconda3', '/opt/conda', '/root/miniconda3'];
/** The environment SWE-bench's images build and its eval script activates (`conda activate testbed`). */
const CONDA_ENV = 'testbed';

/**
 * What runs in an image, found on the host by reading the image's tree (never a sandbox's: the
 * cache's tree is the read-only lower layer no sandbox writes): the shell that applies limits, the
 * python interpreter, and the environment. An image with a conda `testbed` environment gets it
 * active as `conda activate testbed` leaves it, in the shell, the python tool and the test runs
 * alike. SWE-bench's images: the environment's prefix /opt/miniconda3/envs/testbed
 * (swebench/harness/dockerfiles/python.py@726c546:24-29,45, "conda activate testbed" in /root/.bashrc;
 * the eval script activates it the same way, test_spec/python.py@726c546:427-428).
 */
export function imageRootOf(
  img: { dir: string; env: Record<string, string>; workdir?: string },
  workdir: string | undefined,
  basePath: string,
): ImageRoot {
  const env: Record<string, string> = { ...img.env };
  let path_ = env.PATH ?? basePath;
  for (const conda of CONDA_ROOTS) {
    const prefix = `${conda}/envs/${CONDA_ENV}`;
    if (!inImage(img.dir, `${prefix}/bin/python`)) continue;
    // What `conda activate` exports (conda/activate.py: PATH, CONDA_PREFIX, CONDA_SHLVL,
    // CONDA_DEFAULT_ENV, CONDA_PROMPT_MODIFIER, CONDA_EXE, CONDA_PYTHON_EXE); the base's bin stays
    // behind the environment's, as after `source activate; conda activate testbed`.
    path_ = `${prefix}/bin:${conda}/condabin:${path_
      .split(':')
      .filter((d) => d !== `${prefix}/bin` && d !== `${conda}/condabin`)
      .join(':')}`;
    Object.assign(env, {
      CONDA_PREFIX: prefix,
      CONDA_DEFAULT_ENV: CONDA_ENV,
      CONDA_SHLVL: '1',
      CONDA_PROMPT_MODIFIER: `(${CONDA_ENV}) `,
      CONDA_EXE: `${conda}/bin/conda`,
      CONDA_PYTHON_EXE: `${conda}/bin/python`,
    });
    break;
  }
  env.PATH = path_;
  const shell = inImage(img.dir, '/bin/bash') ? '/bin/bash' : '/bin/sh';
  let python: string | undefined;
  for (const dir of path_.split(':').filter((d) => d.startsWith('/'))) {
    for (const name of ['python3', 'python']) {
      if (inImage(img.dir, `${dir}/${name}`)) {
        python = `${dir}/${name}`;
        break;
      }
    }
    if (python) break;
  }
  const wd = workdir ?? (img.workdir && img.workdir !== '/' ? img.workdir : '/workspace');
  return { dir: img.dir, workdir: path.posix.normalize(wd), shell, env, ...(python ? { python } : {}) };
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
