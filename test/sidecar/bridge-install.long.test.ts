import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { docBlocks } from '../docs/blocks.js';

// The Python bridge installs the way docs/python.md says on Debian 12's own python3, whose pip
// refuses to install into the system (PEP 668, /usr/lib/python3.11/EXTERNALLY-MANAGED): the block is
// run as written, in a temporary folder holding the checkout's bridges/, with /usr/bin first on PATH,
// and with no index (nothing may be downloaded).
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(path.join(tmpdir(), 'raas-bridge-install-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const block = docBlocks(path.join(ROOT, 'docs/python.md')).find((b) => b.notExecuted?.includes('bridge-install.test.ts'));

it.skipIf(!existsSync('/usr/bin/python3'))(
  "installs with docs/python.md's commands on the system python3, and the installed bridge runs a sidecar",
  () => {
    expect(block, 'docs/python.md has the install block').toBeDefined();
    symlinkSync(path.join(ROOT, 'bridges'), path.join(dir, 'bridges'));
    const env = {
      ...process.env,
      PATH: `/usr/bin:/bin:${process.env.PATH}`,
      PIP_NO_INDEX: '1',
      PYTHONPATH: '',
      PIP_DISABLE_PIP_VERSION_CHECK: '1',
    };
    // What a user meets first: the system pip refuses.
    const plain = spawnSync('python3', ['-m', 'pip', 'install', '-e', 'bridges/python'], {
      cwd: dir,
      env,
      encoding: 'utf8',
      timeout: 120_000,
    });
    if (existsSync('/usr/lib/python3.11/EXTERNALLY-MANAGED')) expect(plain.stderr + plain.stdout).toMatch(/externally-managed-environment/);
    const r = spawnSync('bash', ['-euo', 'pipefail', '-c', block!.code], { cwd: dir, env, encoding: 'utf8', timeout: 300_000 });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(r.stdout).toContain('raas_bridge ok');
    // The installed package is this checkout's (editable), and it drives a real sidecar.
    const use = spawnSync(
      path.join(dir, '.venv/bin/python'),
      [
        '-c',
        [
          'import raas_bridge',
          'from raas_bridge import RaasSidecar',
          `with RaasSidecar(${JSON.stringify(path.join(ROOT, 'configs/demo.yaml'))}) as rs: print(raas_bridge.__file__, rs.info["batch_size"])`,
        ].join('\n'),
      ],
      { cwd: dir, env: { ...env, RAAS_CLI: path.join(ROOT, 'dist/src/cli.js') }, encoding: 'utf8', timeout: 120_000 },
    );
    expect(use.status, use.stderr).toBe(0);
    expect(use.stdout.trim()).toBe(`${path.join(ROOT, 'bridges/python/raas_bridge/__init__.py')} 4`);
    expect(readFileSync(path.join(dir, '.venv/pyvenv.cfg'), 'utf8')).toMatch(/include-system-site-packages = true/);
  },
  400_000,
);
