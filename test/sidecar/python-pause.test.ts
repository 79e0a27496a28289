import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

it('RaasSidecar.pause_generation / resume_generation / paused() (python3 -m unittest tests.test_pause, scripted sidecar)', () => {
  const r = spawnSync('/usr/bin/python3', ['-m', 'unittest', '-v', 'tests.test_pause'], {
    cwd: path.join(root, 'bridges/python'),
    env: { ...process.env, RAAS_NODE: process.execPath, PYTHONDONTWRITEBYTECODE: '1' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0) console.error(r.stdout, r.stderr);
  expect(r.stderr).toMatch(/\nOK/);
  expect(r.status).toBe(0);
}, 90_000);
