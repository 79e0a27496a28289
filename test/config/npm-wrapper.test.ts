import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { waitGone, withEnv } from '../helpers/procs.js';

// `npm run raas -- serve` and `npx raas serve` run raas as npm → sh -c → node; npm forwards SIGTERM
// to the shell only (@npmcli/run-script lib/signal-manager.js), which dies without passing it on. A
// user's `kill $!` of the wrapper must still stop raas: nothing it started may outlive it.
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cache = mkdtempSync(path.join(tmpdir(), 'raas-npx-cache-'));
const MARK = 'RAAS_TEST_NPM_WRAPPER';
afterAll(async () => {
  rmSync(cache, { recursive: true, force: true });
});

/** Starts `cmd args` like `cmd args &` in a shell, waits for the server's line, SIGTERMs the wrapper, and returns what is left. */
async function killWrapper(cmd: string, args: string[]): Promise<{ out: string; left: number[] }> {
  const mark = randomUUID();
  // npx links this checkout into its cache: a private cache, offline, so no test touches ~/.npm or the network.
  const env = { ...process.env, [MARK]: mark, npm_config_cache: cache, npm_config_offline: 'true', npm_config_update_notifier: 'false' };
  const child = spawn(cmd, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d));
  child.stderr.on('data', (d: Buffer) => (out += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => /listening on http/.test(out) && (clearInterval(timer), resolve()), 50);
    child.once('exit', (code) => (clearInterval(timer), reject(new Error(`${cmd} exited ${code} before listening:\n${out}`))));
  });
  const raas = withEnv(MARK, mark).filter((p) => /cli\.js|\.bin\/raas/.test(p.cmd));
  expect(raas.length, out).toBeGreaterThan(0);
  child.kill('SIGTERM');
  const left = await waitGone(() => withEnv(MARK, mark), 20_000);
  for (const p of left) process.kill(p.pid, 'SIGKILL');
  return { out, left: left.map((p) => p.pid) };
}

describe('raas started through npm or npx stops when the wrapper is sent SIGTERM', () => {
  it('npm run raas -- serve', async () => {
    const r = await killWrapper('npm', ['run', 'raas', '--', 'serve', '--port', '0']);
    expect(r.left, r.out).toEqual([]);
  }, 90_000);

  it('npx raas serve', async () => {
    const r = await killWrapper('npx', ['raas', 'serve', '--port', '0']);
    expect(r.left, r.out).toEqual([]);
  }, 90_000);
});
