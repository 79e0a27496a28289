import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { get, post } from './helpers.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const cli = path.join(root, 'dist/src/cli.js');
const fixture = path.join(root, 'test/server/fixtures/slow-handler.mjs');

/** Starts `raas serve` as a real process and waits for its URL. */
async function serve(args: string[]): Promise<{ child: ChildProcess; url: string; exited: Promise<number | null> }> {
  const child = spawn(
    process.execPath,
    [cli, 'serve', '--port', '0', '--log-level', 'silent', '--handler', fixture, '--llm', 'http://127.0.0.1:9', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.push(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let out = '';
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    void exited.then((code) => reject(new Error(`raas serve exited ${code}: ${err}`)));
  });
  return { child, url, exited };
}

const children: ChildProcess[] = [];
const dirs: string[] = [];

describe('raas serve as a process', () => {
  afterEach(() => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  });
  afterAll(async () => {
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  it('SIGTERM with jobs in flight answers every waiter and exits 0', async () => {
    const s = await serve([]);
    const held = Array.from({ length: 6 }, (_, i) =>
      post(`${s.url}/process`, { instance: { data_source: 'slow', [i % 2 ? 'run_ms' : 'init_ms']: 60_000 }, job_id: `term-${i}` }),
    );
    for (let i = 0; i < 100 && (await get(`${s.url}/status`)).body.in_stage < 6; i++) await new Promise((r) => setTimeout(r, 50));
    s.child.kill('SIGTERM');
    const answers = await Promise.all(held);
    for (const a of answers) expect(a).toMatchObject({ status: 200, body: { critical_error: 'cancelled' } });
    expect(await s.exited).toBe(0);
  }, 240_000);

  it('the journal answers GET /jobs/:id after a restart; a job in flight at a crash is 404', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'raas-journal-'));
    dirs.push(dir);
    const a = await serve(['--journal-dir', dir]);
    const done = await post(`${a.url}/process`, { instance: { data_source: 'slow', instance_id: 'kept' }, job_id: 'kept-1' });
    expect(done.body.reward).toBe(1);
    void post(`${a.url}/process`, { instance: { data_source: 'slow', run_ms: 60_000 }, job_id: 'lost-1' }).catch(() => undefined);
    for (let i = 0; i < 100 && (await get(`${a.url}/jobs/lost-1`)).body?.state !== 'run'; i++) await new Promise((r) => setTimeout(r, 50));
    a.child.kill('SIGKILL'); // a crash: no chance to write anything more
    await a.exited;

    const b = await serve(['--journal-dir', dir]);
    const kept = await get(`${b.url}/jobs/kept-1`);
    expect(kept.status).toBe(200);
    expect(kept.body).toMatchObject({ job_id: 'kept-1', state: 'done', result: { instance_id: 'kept', reward: 1 } });
    const lost = await get(`${b.url}/jobs/lost-1`);
    expect(lost.status).toBe(404);
    expect(lost.body.error.code).toBe('job_not_found');
    // Resubmitting a finished id with attach: true answers the stored result instead of running it again.
    const again = await post(`${b.url}/process`, {
      instance: { data_source: 'slow', instance_id: 'kept' },
      job_id: 'kept-1',
      attach: true,
    });
    expect(again.body).toEqual(done.body);
    // The lost job is resubmitted with the same id and runs.
    const rerun = await post(`${b.url}/process`, { instance: { data_source: 'slow' }, job_id: 'lost-1' });
    expect(rerun.body.critical_error).toBeNull();
    b.child.kill('SIGTERM');
    expect(await b.exited).toBe(0);
  }, 240_000);
});
