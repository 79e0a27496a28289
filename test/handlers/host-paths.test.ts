import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { checkDataFile, readCheckedFile } from '../../src/server/handlers/swe/tarball.js';
import { call, scriptPolicy } from '../agent/script-policy.js';
import { readJsonl } from './helpers.js';

// A client-supplied host path (instance.tarball) is read by the server, which runs as root: it is
// accepted only inside sandbox.data_dirs, as a regular file, checked at /process before any sandbox
// starts. Real rollout server (bwrap), real simulated backend, real files, FIFOs and symlinks.
const row = readJsonl('swe.jsonl')[0]! as {
  files: Record<string, string>;
  FAIL_TO_PASS: string[];
  PASS_TO_PASS: string[];
  gold_patch: string;
};
const FIX = {
  old_str: '    mid = len(s) // 2\n    return s[mid]\n',
  new_str: '    mid = len(s) // 2\n    if len(s) % 2 == 0:\n        return (s[mid - 1] + s[mid]) / 2\n    return s[mid]\n',
};

describe('instance.tarball is read only inside sandbox.data_dirs (rollout server + simulated backend + bwrap)', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-hp-'));
  const data = path.join(tmp, 'data');
  const outside = path.join(tmp, 'outside');
  const root = `${process.getuid?.() === 0 ? '/var/tmp' : '/tmp'}/raas-t-hp-${process.pid}`;
  let sim: SimHandle;
  let srv: RolloutServer;

  async function post(body: unknown): Promise<{ status: number; body: any }> {
    const res = await fetch(`${srv.url}/process`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  }
  const instance = (tarball: string, script = 'none') => ({
    data_source: 'swe',
    problem_statement: `median is wrong for even lengths. SCRIPT:${script}`,
    tarball,
    FAIL_TO_PASS: row.FAIL_TO_PASS,
    PASS_TO_PASS: row.PASS_TO_PASS,
  });

  beforeAll(async () => {
    fs.mkdirSync(path.join(data, 'repos'), { recursive: true });
    fs.mkdirSync(path.join(outside, 'repo'), { recursive: true });
    for (const [rel, text] of Object.entries(row.files)) {
      fs.mkdirSync(path.dirname(path.join(outside, 'repo', rel)), { recursive: true });
      fs.writeFileSync(path.join(outside, 'repo', rel), text);
    }
    execFileSync('tar', ['-czf', path.join(outside, 'repo.tar.gz'), '-C', path.join(outside, 'repo'), '.']);
    fs.copyFileSync(path.join(outside, 'repo.tar.gz'), path.join(data, 'repos', 'stats.tar.gz'));
    fs.symlinkSync(path.join(outside, 'repo.tar.gz'), path.join(data, 'link-out.tar.gz'));
    fs.symlinkSync('/etc/shadow', path.join(data, 'shadow.tar'));
    fs.symlinkSync(path.join(data, 'repos', 'stats.tar.gz'), path.join(data, 'link-in.tar.gz'));
    fs.symlinkSync(outside, path.join(data, 'dir-out'));
    execFileSync('mkfifo', [path.join(data, 'fifo.tar')]);
    sim = await startSim(
      { seed: 1 },
      {
        policies: [
          scriptPolicy({
            fix: [call('str_replace_editor', { command: 'str_replace', path: '/workspace/stats/core.py', ...FIX }), call('finish', {})],
          }),
        ],
      },
    );
    srv = await startRolloutServer({ port: 0, log_level: 'silent', sandbox: { runtime: 'bwrap', root, data_dirs: [data] } });
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
    fs.rmSync(root, { recursive: true, force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('answers 400 invalid_instance for paths outside, devices, FIFOs, directories and escaping symlinks, naming the allowed directories and the key', async () => {
    const cases: Array<[string, RegExp]> = [
      [path.join(outside, 'repo.tar.gz'), /outside the server's data directories/],
      ['/etc/shadow', /outside/],
      ['/dev/zero', /outside/],
      ['../outside/repo.tar.gz', /outside/],
      [path.join(data, 'link-out.tar.gz'), /outside/],
      [path.join(data, 'shadow.tar'), /outside/],
      [path.join(data, 'dir-out', 'repo.tar.gz'), /outside/],
      [path.join(data, 'absent.tar.gz'), /does not exist/],
      [path.join(data, 'fifo.tar'), /a FIFO, not a regular file/],
      [path.join(data, 'repos'), /a directory, not a regular file/],
    ];
    const t0 = Date.now();
    for (const [tarball, why] of cases) {
      const r = await post({ instance: instance(tarball) });
      expect(r.status, tarball).toBe(400);
      expect(r.body.error.code, tarball).toBe('invalid_instance');
      expect(r.body.error.message, tarball).toMatch(/^instance\.tarball: /);
      expect(r.body.error.message, tarball).toMatch(why);
      if (/outside|does not exist/.test(why.source)) {
        expect(r.body.error.message).toContain(JSON.stringify(data));
        expect(r.body.error.message).toContain('sandbox.data_dirs');
      }
    }
    // Nothing hung on the FIFO or streamed /dev/zero, and no sandbox was ever started.
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(fs.existsSync(root)).toBe(false);
  });

  it('accepts a tarball inside a data directory (absolute, relative, or through a symlink that stays inside) and grades it', async () => {
    // No backend is needed to be admitted: without one, /process answers 503 only after admission.
    for (const tarball of [path.join(data, 'repos', 'stats.tar.gz'), 'repos/stats.tar.gz', path.join(data, 'link-in.tar.gz')]) {
      const r = await post({ instance: instance(tarball) });
      expect(r.status, tarball).toBe(503);
      expect(r.body.error.code).toBe('no_llm_backends');
    }
    expect(
      (
        await fetch(`${srv.url}/add_llm_server`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ address: sim.url, api: 'vllm' }),
        })
      ).status,
    ).toBe(200);
    const r = await post({ instance: instance('repos/stats.tar.gz', 'fix'), sampling_params: { enable_thinking: false } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ critical_error: null, reward: 1, resolved: true });
    expect(r.body.git_patch).toBe(row.gold_patch);
  }, 60_000);
});

describe('data files: the checked path is what INIT reads', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-hp-unit-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('answers the real path, caps the size, and refuses a path that is no longer the checked one', async () => {
    const data = path.join(tmp, 'data');
    fs.mkdirSync(path.join(data, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(data, 'sub', 'a.tar'), 'x'.repeat(100));
    fs.symlinkSync(path.join(data, 'sub'), path.join(data, 'alias'));
    const policy = { dataDirs: [data], maxBytes: 1000 };
    const real = await checkDataFile(path.join(data, 'alias', 'a.tar'), 'instance.tarball', policy);
    expect(real).toBe(fs.realpathSync(path.join(data, 'sub', 'a.tar')));
    expect((await readCheckedFile(real, 'instance.tarball')).toString()).toBe('x'.repeat(100));
    await expect(checkDataFile('sub/a.tar', 'instance.tarball', { ...policy, maxBytes: 50 })).rejects.toThrow(
      /100 bytes, larger than a sandbox's disk \(sandbox\.disk_mb/,
    );
    // A path with a symlinked component is not the one /process answered: INIT refuses it.
    await expect(readCheckedFile(path.join(data, 'alias', 'a.tar'), 'instance.tarball')).rejects.toThrow(
      /path changed while it was checked/,
    );
    // The checked file swapped for a symlink to a secret after /process: refused, not followed.
    fs.rmSync(path.join(data, 'sub', 'a.tar'));
    fs.symlinkSync('/etc/shadow', path.join(data, 'sub', 'a.tar'));
    await expect(readCheckedFile(real, 'instance.tarball')).rejects.toThrow(/it is a symbolic link/);
    await expect(readCheckedFile('relative.tar', 'instance.tarball')).rejects.toThrow(/not the absolute path/);
  });
});
