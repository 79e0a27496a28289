import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Runs `python -m unittest <args>` in bridges/python; resolves with its exit code and output. */
function unittest(python: string, args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(python, ['-m', 'unittest', ...args], {
      cwd: path.join(root, 'bridges/python'),
      env: { ...process.env, RAAS_NODE: process.execPath, PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (out += d.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, out }));
  });
}

/** A python3 with numpy (on PATH or /usr/bin), for the adapters' array path. */
function numpyPython(): string | undefined {
  for (const py of ['python3', '/usr/bin/python3']) {
    if (spawnSync(py, ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0) return py;
  }
  return undefined;
}

async function expectPass(python: string, args: string[]): Promise<void> {
  const r = await unittest(python, args);
  if (r.code !== 0) console.error(r.out);
  expect(r.out).toMatch(/\nOK/);
  expect(r.code).toBe(0);
}

describe('Python bridge (python3 -m unittest in bridges/python)', () => {
  it('adapters and the client against a real sidecar process (scripted backend)', async () => {
    await expectPass('/usr/bin/python3', ['-v', 'tests.test_compat', 'tests.test_adapters', 'tests.test_client']);
  }, 90_000);

  it('three steps on an embedded config through RaasSidecar, no process left', async () => {
    await expectPass('/usr/bin/python3', ['-v', 'tests.test_integration']);
  }, 240_000);

  it("conformance with veRL and NeMo RL on a real run, the logprobs modes, and the trackers' metric names", async () => {
    const r = await unittest('/usr/bin/python3', [
      '-v',
      'tests.test_conformance_verl',
      'tests.test_conformance_nemo_rl',
      'tests.test_logprobs_mode',
      'tests.test_tracking',
    ]);
    if (r.code !== 0) console.error(r.out);
    expect(r.out).toMatch(/\nOK/);
    // numpy and torch come from scripts/setup.sh: a skip here would hide the whole check.
    expect(r.out).not.toMatch(/skipped/);
    expect(r.code).toBe(0);
  }, 180_000);

  it("adaptive group sizes through veRL's and NeMo RL's advantage code on a real run (variable and fixed batches)", async () => {
    const r = await unittest('/usr/bin/python3', ['-v', 'tests.test_conformance_group_sizes']);
    if (r.code !== 0) console.error(r.out);
    expect(r.out).toMatch(/\nOK/);
    expect(r.out).not.toMatch(/skipped/);
    expect(r.code).toBe(0);
  }, 180_000);

  const py = numpyPython();
  it.runIf(py !== undefined)(
    'adapters give the same answers with numpy arrays',
    async () => {
      await expectPass(py!, ['tests.test_adapters']);
    },
    30_000,
  );
});
