import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function unittest(python: string, args: string[]): ReturnType<typeof spawnSync> {
  return spawnSync(python, ['-m', 'unittest', ...args], {
    cwd: path.join(root, 'bridges/python'),
    env: { ...process.env, RAAS_NODE: process.execPath, PYTHONDONTWRITEBYTECODE: '1' },
    encoding: 'utf8',
    timeout: 45_000,
  });
}

/** A python3 on PATH that has numpy, when /usr/bin/python3 has none (the adapters' array path). */
function numpyPython(): string | undefined {
  for (const py of ['python3', '/usr/bin/python3']) {
    if (spawnSync(py, ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0) return py;
  }
  return undefined;
}

describe('Python bridge (python3 -m unittest)', () => {
  it('passes its unittest suite: adapters, client against a real sidecar process, demo integration', () => {
    const r = unittest('/usr/bin/python3', ['discover', '-s', 'tests', '-t', '.', '-v']);
    if (r.status !== 0) console.error(r.stdout, r.stderr);
    expect(r.error).toBeUndefined();
    expect(r.stderr).toMatch(/\nOK/);
    expect(r.status).toBe(0);
  }, 50_000);

  const py = numpyPython();
  it.runIf(py !== undefined)('adapters give the same answers with numpy arrays', () => {
    const r = unittest(py!, ['tests.test_adapters']);
    if (r.status !== 0) console.error(r.stdout, r.stderr);
    expect(r.status).toBe(0);
  });
});
