// Finished results kept in memory are capped (`max_kept_results`): past the cap
// the oldest answer GET /jobs/:id, attach and /cancel from the results journal, across a restart
// too; without a journal they are forgotten. Real rollout servers on port 0 with the staged handler.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { systemClock } from '../../src/util/clock.js';
import { get, post, stagedHandler } from './helpers.js';

/** The pipeline's result store: how many results answer, how many are in memory. */
const store = (s: RolloutServer) => {
  const f = s.pipeline.footprint();
  return { size: f.kept, inMemory: f.kept_in_memory };
};

describe('kept results (max_kept_results)', () => {
  const dirs: string[] = [];
  const servers: RolloutServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });
  const serve = async (cfg: Record<string, unknown>) => {
    const s = await startRolloutServer(
      { port: 0, log_level: 'silent', llm: { backends: [{ address: 'http://127.0.0.1:9' }] }, ...cfg },
      { handlers: [stagedHandler(systemClock)] },
    );
    servers.push(s);
    return s;
  };
  const job = (i: number) => ({ instance: { data_source: 'staged', instance_id: `x${i}`, reward: i }, job_id: `k-${i}` });

  it('past the cap the oldest results answer from the journal (GET /jobs/:id, attach, /cancel), also after a restart', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'raas-kept-'));
    dirs.push(dir);
    const cfg = { max_kept_results: 3, journal: { dir } };
    const a = await serve(cfg);
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push((await post(`${a.url}/process`, job(i))).body);
    expect(store(a)).toMatchObject({ size: 10, inMemory: 3 });
    for (let i = 0; i < 10; i++)
      expect((await get(`${a.url}/jobs/k-${i}`)).body).toEqual({ job_id: `k-${i}`, state: 'done', result: answers[i] });
    // attach: true on the oldest id answers its stored result; another instance under it is refused.
    expect((await post(`${a.url}/process`, { ...job(0), attach: true })).body).toEqual(answers[0]);
    expect(
      (await post(`${a.url}/process`, { ...job(1), instance: { ...job(1).instance, instance_id: 'other' }, attach: true })).status,
    ).toBe(409);
    expect((await post(`${a.url}/cancel`, { job_id: 'k-0' })).body).toMatchObject({ cancelled: false, state: 'done' });
    // A rerun of an old id (no attach) is the newest result for it now.
    const rerun = (await post(`${a.url}/process`, job(1))).body;
    expect((await get(`${a.url}/jobs/k-1`)).body.result).toEqual(rerun);
    await a.close();

    const b = await serve(cfg);
    expect(store(b)).toMatchObject({ size: 10, inMemory: 3 });
    for (let i = 0; i < 10; i++) expect((await get(`${b.url}/jobs/k-${i}`)).body.result).toEqual(i === 1 ? rerun : answers[i]);
    const lines = (await readFile(path.join(dir, 'results.jsonl'), 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(10); // compacted at start: one line per id
  });

  it('without a journal, results past the cap are forgotten (404, and /cancel says unknown)', async () => {
    const a = await serve({ max_kept_results: 2 });
    for (let i = 0; i < 5; i++) await post(`${a.url}/process`, job(i));
    expect(store(a)).toMatchObject({ size: 2, inMemory: 2 });
    expect((await get(`${a.url}/jobs/k-2`)).status).toBe(404);
    expect((await get(`${a.url}/jobs/k-4`)).body).toMatchObject({ state: 'done' });
    expect((await post(`${a.url}/cancel`, { job_id: 'k-0' })).body).toMatchObject({ state: 'unknown' });
  });

  it('memory holds max_kept_results however many jobs ran', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'raas-kept-'));
    dirs.push(dir);
    const a = await serve({ max_kept_results: 50, journal: { dir } });
    const counts: number[] = [];
    for (let wave = 0; wave < 4; wave++) {
      await Promise.all(Array.from({ length: 100 }, (_, k) => post(`${a.url}/process`, job(wave * 100 + k))));
      counts.push(store(a).inMemory);
    }
    expect(counts).toEqual([50, 50, 50, 50]);
    expect(store(a).size).toBe(400);
    expect((await get(`${a.url}/jobs/k-0`)).body.result.instance_id).toBe('x0');
  });
});
