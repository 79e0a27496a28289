import { inImage } from './image-node.js';
import type { ImageRoot } from './runtimes/types.js';

/** The conda installs SWE-bench images keep their `testbed` environment in. */
const CONDA_ROOTS = ['/opt/miniconda3', '/opt/conda', '/root/miniconda3'];
/** The environment SWE-bench's images build and its eval script activates (`conda activate testbed`). */
const CONDA_ENV = 'testbed';

/**
 * What runs in an image, found on the host by reading the image's tree (never a sandbox's): the
 * shell that applies limits, the python interpreter, and the environment. An image with a conda
 * `testbed` environment (SWE-bench: environment.yml's `prefix: /opt/miniconda3/envs/testbed`,
 * swebench/resources/swebench-og/astropy__astropy/12907/environment.yml@7a21e05:52) gets it active
 * as `conda activate testbed` leaves it: its bin first on PATH, CONDA_PREFIX and CONDA_DEFAULT_ENV,
 * in the shell, the python tool and the test runs alike.
 */
export function imageRootOf(
  img: { dir: string; env: Record<string, string>; workdir?: string },
  workdir: string | undefined,
  basePath: string,
): ImageRoot {
  const env: Record<string, string> = { ...img.env };
  let path = env.PATH ?? basePath;
  for (const conda of CONDA_ROOTS) {
    const prefix = `${conda}/envs/${CONDA_ENV}`;
    if (!inImage(img.dir, `${prefix}/bin/python`)) continue;
    path = `${prefix}/bin:${conda}/condabin:${path}`;
    Object.assign(env, { CONDA_PREFIX: prefix, CONDA_DEFAULT_ENV: CONDA_ENV, CONDA_SHLVL: '1', CONDA_EXE: `${conda}/bin/conda` });
    break;
  }
  env.PATH = path;
  const shell = inImage(img.dir, '/bin/bash') ? '/bin/bash' : '/bin/sh';
  let python: string | undefined;
  for (const dir of path.split(':').filter((d) => d.startsWith('/'))) {
    for (const name of ['python3', 'python']) {
      if (inImage(img.dir, `${dir}/${name}`)) {
        python = `${dir}/${name}`;
        break;
      }
    }
    if (python) break;
  }
  return { dir: img.dir, workdir: workdir ?? (img.workdir && img.workdir !== '/' ? img.workdir : '/workspace'), shell, env, ...(python ? { python } : {}) };
}
