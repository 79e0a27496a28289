import { afterAll, describe, expect, it } from 'vitest';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startRolloutServer } from '../../src/server/index.js';
import { systemClock } from '../../src/util/clock.js';
import { get, post, stagedHandler } from './helpers.js';

describe('results journal', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  });

  it('reloads results within result_ttl_s, drops expired ones and torn lines', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'raas-journal-'));
    dirs.push(dir);
    const cfg = {
      port: 0,
      log_level: 'silent' as const,
      result_ttl_s: 60,
      journal: { dir },
      llm: { backends: [{ address: 'http://127.0.0.1:9' }] },
    };
    let wall = 1_000_000;
    const a = await startRolloutServer(cfg, { handlers: [stagedHandler(systemClock)], wallNow: () => wall });
    const r = await post(`${a.url}/process`, { instance: { data_source: 'staged', instance_id: 'x' }, job_id: 'j-1' });
    expect(r.body.reward).toBe(1);
    await a.close();
    await writeFile(
      path.join(dir, 'results.jsonl'),
      (await readFile(path.join(dir, 'results.jsonl'), 'utf8')) + '{"job_id":"torn", "state":',
    );

    wall += 30_000;
    const b = await startRolloutServer(cfg, { handlers: [stagedHandler(systemClock)], wallNow: () => wall });
    expect((await get(`${b.url}/jobs/j-1`)).body).toMatchObject({ state: 'done', result: { instance_id: 'x' } });
    expect((await get(`${b.url}/jobs/torn`)).status).toBe(404);
    // An attach across the restart answers the stored result; with another instance it is refused, not silently answered.
    expect(
      (await post(`${b.url}/process`, { instance: { data_source: 'staged', instance_id: 'x' }, job_id: 'j-1', attach: true })).body,
    ).toEqual(r.body);
    expect(
      (await post(`${b.url}/process`, { instance: { data_source: 'staged', instance_id: 'other' }, job_id: 'j-1', attach: true })).status,
    ).toBe(409);
    wall += 31_000; // now past the ttl, also in memory
    expect((await get(`${b.url}/jobs/j-1`)).status).toBe(404);
    await b.close();
    const c = await startRolloutServer(cfg, { handlers: [stagedHandler(systemClock)], wallNow: () => wall });
    expect((await get(`${c.url}/jobs/j-1`)).status).toBe(404);
    await c.close();
    // Restarts compact the file to the live entries.
    expect((await readFile(path.join(dir, 'results.jsonl'), 'utf8')).trim()).toBe('');
  });
});
