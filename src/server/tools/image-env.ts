/**
 * What runs in an image: its shell, its python, and its environment with a conda `testbed`
 * environment active as `conda activate testbed` leaves it (SWE-bench's images keep the instance's
 * dependencies there: swebench/harness/dockerfiles/python.py@726c546:24-29,45, and its eval script
 * activates it, test_spec/python.py@726c546:427-428). `exists` answers for paths inside the image:
 * the host asks through the image's tree, the tool server (under Apptainer, where the host does not
 * unpack the image) asks its own filesystem.
 */

/** The conda installs SWE-bench images keep their `testbed` environment in. */
const CONDA_ROOTS = ['/opt/miniconda3', '/opt/conda', '/root/miniconda3'];
/** The environment SWE-bench's images build and its eval script activates. */
const CONDA_ENV = 'testbed';

/** The shell, interpreter and environment found in an image. */
export interface ImageEnv {
  env: Record<string, string>;
  /** The shell that applies limits (/bin/bash, else /bin/sh). */
  shell: string;
  /** The first python3 or python on PATH, if any. */
  python?: string;
}

/** Activates the image's conda `testbed` environment on top of `env` (where it has one) and finds its shell and python. */
export function activateImage(base: Record<string, string>, basePath: string, exists: (p: string) => boolean): ImageEnv {
  const env: Record<string, string> = { ...base };
  let path = env.PATH ?? basePath;
  for (const conda of CONDA_ROOTS) {
    const prefix = `${conda}/envs/${CONDA_ENV}`;
    if (!exists(`${prefix}/bin/python`)) continue;
    // What `conda activate` exports (conda/activate.py: PATH, CONDA_PREFIX, CONDA_SHLVL,
    // CONDA_DEFAULT_ENV, CONDA_PROMPT_MODIFIER, CONDA_EXE, CONDA_PYTHON_EXE); the base's bin stays
    // behind the environment's, as after `source activate; conda activate testbed`.
    path = `${prefix}/bin:${conda}/condabin:${path
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
  env.PATH = path;
  const shell = exists('/bin/bash') ? '/bin/bash' : '/bin/sh';
  let python: string | undefined;
  for (const dir of path.split(':').filter((d) => d.startsWith('/'))) {
    python = ['python3', 'python'].map((n) => `${dir}/${n}`).find(exists);
    if (python) break;
  }
  return { env, shell, ...(python ? { python } : {}) };
}
