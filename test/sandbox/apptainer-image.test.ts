// Apptainer running an instance's own image. Apptainer is not installed here (no Debian package):
// these tests check the command line the runtime plans, flag by flag against Apptainer's own CLI
// (apptainer@917d6657 cmd/internal/cli/action_flags.go), and the tool server's side of it (the
// image's environment found inside, as under Apptainer) by running that part for real.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandboxRuntime, INSIDE, type Runtime } from '../../src/server/sandbox/index.js';
import { activateImage } from '../../src/server/tools/image-env.js';
import { busyboxImage, ociOf, sifOf } from '../helpers/images.js';
import { testRoot } from './helpers.js';

const root = testRoot('apptimg');
let rt: Runtime;
let sif: string;
let oci: string;

beforeAll(async () => {
  const dir = await busyboxImage();
  sif = await sifOf('busybox', dir);
  oci = await ociOf('busybox', dir);
  rt = createSandboxRuntime({ runtime: 'apptainer', root, apptainer: { binary: '/bin/true' } });
}, 120_000);
afterAll(async () => {
  await rt.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe("apptainer with the instance's own image (binary absent here: the exact command line)", () => {
  it("runs the .sif itself: no workspace bind, raas under /.raas read-only, the image's working directory", async () => {
    const p = rt.prepare();
    const { root: r, release } = await rt.roots.rootOf({ ref: sif, workdir: '/testbed' }, []);
    const dirs = { workspace: `${root}/ws/x`, run: `${root}/run/x` };
    const plan = rt.plan(p, dirs, { rootImage: { ref: sif, workdir: '/testbed' } }, undefined, undefined, r);
    release();
    expect(plan.file).toBe('/bin/true');
    const a = plan.args;
    // action_flags.go@917d6657: --containall 384, --writable-tmpfs 446, --bind src:dest:opts 119, --pwd 225, --no-privs 580, --no-eval 659.
    expect(a.slice(0, 6)).toEqual(['exec', '--containall', '--writable-tmpfs', '--net', '--network', 'none']);
    const binds = a.flatMap((x, i) => (x === '--bind' ? [a[i + 1]] : []));
    expect(binds).toEqual([
      `${dirs.run}:${INSIDE.run}`,
      expect.stringMatching(/\/image-node\/[0-9a-f]+:\/\.raas\/lib:ro$/),
      expect.stringMatching(/\/tool-server\/[0-9a-f]+:\/\.raas\/tool-server:ro$/),
    ]);
    expect(binds.some((b) => b.includes(':/workspace'))).toBe(false);
    expect(a[a.indexOf('--pwd') + 1]).toBe('/testbed');
    expect(a).toContain('--no-privs');
    const at = a.indexOf(sif);
    expect(a.slice(at + 1, at + 3)).toEqual(['/.raas/lib/node', '/.raas/tool-server/main.js']);
    const opts = JSON.parse(a.at(-1)!) as Record<string, unknown>;
    expect(opts).toMatchObject({ socket: INSIDE.socket, workspace: '/testbed', image_env: 'inherit' });
    // The image's PATH is Apptainer's to set (from /.singularity.d/env): ours is not sent.
    expect((opts.env as Record<string, string>).PATH).toBeUndefined();
    // The node bound in runs on the host's loader and libraries, whatever the image has.
    const node = binds[1]!.split(':')[0]!;
    expect(spawnSync('patchelf', ['--print-interpreter', path.join(node, 'node')], { encoding: 'utf8' }).stdout.trim()).toBe(
      '/.raas/lib/ld.so',
    );
  });

  it('an OCI layout is unpacked by the image cache first, and its Env sent (Apptainer would not read it from a plain tree)', async () => {
    const { root: r, release } = await rt.roots.rootOf({ ref: oci }, []);
    try {
      expect(r.dir).toMatch(new RegExp(`^${root}/rootfs/[0-9a-f]{32}/rootfs$`));
      expect(r.workdir).toBe('/testbed');
      const plan = rt.plan(
        rt.prepare(),
        { workspace: `${root}/ws/y`, run: `${root}/run/y` },
        { rootImage: { ref: oci } },
        undefined,
        undefined,
        r,
      );
      expect(plan.args).toContain(r.dir);
      const env = (JSON.parse(plan.args.at(-1)!) as { env: Record<string, string> }).env;
      expect(env.RAAS_IMAGE_MARK).toBe('from-the-image');
    } finally {
      release();
    }
  });

  it("inside, the tool server activates a SWE-bench image's conda testbed on the environment Apptainer gives it", () => {
    const tree = new Set(['/opt/miniconda3/envs/testbed/bin/python', '/bin/bash', '/opt/miniconda3/envs/testbed/bin/python3']);
    // PATH as apptainer build writes it for a SWE-bench image (dockerfiles/python.py@726c546:27: ENV PATH=/opt/miniconda3/bin:$PATH).
    const r = activateImage({ PATH: '/opt/miniconda3/bin:/usr/local/bin:/usr/bin:/bin', TZ: 'Etc/UTC' }, '/usr/bin:/bin', (p) =>
      tree.has(p),
    );
    expect(r).toEqual({
      shell: '/bin/bash',
      python: '/opt/miniconda3/envs/testbed/bin/python3',
      env: {
        PATH: '/opt/miniconda3/envs/testbed/bin:/opt/miniconda3/condabin:/opt/miniconda3/bin:/usr/local/bin:/usr/bin:/bin',
        TZ: 'Etc/UTC',
        CONDA_PREFIX: '/opt/miniconda3/envs/testbed',
        CONDA_DEFAULT_ENV: 'testbed',
        CONDA_SHLVL: '1',
        CONDA_PROMPT_MODIFIER: '(testbed) ',
        CONDA_EXE: '/opt/miniconda3/bin/conda',
        CONDA_PYTHON_EXE: '/opt/miniconda3/bin/python',
      },
    });
    expect(activateImage({}, '/usr/bin:/bin', () => false)).toEqual({ env: { PATH: '/usr/bin:/bin' }, shell: '/bin/sh' });
  });
});
