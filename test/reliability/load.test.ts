// Load: 1,000 concurrent /process on one rollout server (built-in chat handler, real simulated
// backend over HTTP). Every job ends with exactly one terminal result; afterwards the server's job,
// timer and listener maps are empty; RSS after a forced GC stays within 20% of its value before.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { observe } from './helpers/observe.js';
import { httpGet, httpPost, inProcessServer, internals, tempDir, until } from './helpers/servers.js';

const JOBS = 1000;
const WARMUP = 100;

/** A forced full GC without starting the worker with --expose-gc. */
function forceGc(): void {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  for (let i = 0; i < 3; i++) gc();
}

function timers(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
}

describe('load: 1,000 concurrent /process on one server', () => {
  let sim: SimHandle;
  let server: RolloutServer;
  const journal = tempDir('load-journal');
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

  beforeAll(async () => {
    sim = await startSim({ seed: 11, filler: { median_tokens: 24, max_tokens: 96 } });
    server = await inProcessServer({
      llm: { backends: [{ address: sim.url }] },
      journal: { dir: journal },
      workers: { init: 16, run: 64, eval: 16 },
    });
  });
  afterAll(async () => {
    agent.destroy();
    await server?.close();
    await sim?.close();
    fs.rmSync(journal, { recursive: true, force: true });
  });

  const connections = () => new Promise<number>((r) => server.app.server.getConnections((_e, c) => r(c)));
  const wave = async (prefix: string, n: number) => {
    const t0 = performance.now();
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        httpPost(
          `${server.url}/process`,
          {
            job_id: `${prefix}-${i}`,
            group_id: `${prefix}-g${Math.floor(i / 8)}`,
            instance: { data_source: 'chat', instance_id: `c${i % 50}`, turns: 1 + (i % 2), pass_rate: 0.5 },
            sampling_params: { seed: i, max_tokens_per_turn: 48 },
          },
          agent,
        ),
      ),
    );
    return { answers, seconds: (performance.now() - t0) / 1000 };
  };

  it('every job ends with exactly one terminal result; maps drain; RSS after GC within 20%', async () => {
    // Warm-up wave: JIT, connection pools, tokenizer caches; the baseline is taken after it.
    await wave('warm', WARMUP);
    await until(() => internals(server).liveJobs === 0, 'warm-up drained');
    // Client sockets closed before each measurement, so keep-alive timers do not count.
    agent.destroy();
    await until(async () => (await connections()) === 0, 'client connections closed');
    forceGc();
    const rssBefore = process.memoryUsage().rss;
    const heapBefore = process.memoryUsage().heapUsed;
    const timersBefore = timers();
    const httpServer = server.app.server;
    const listenersBefore = Object.fromEntries(httpServer.eventNames().map((e) => [String(e), httpServer.listenerCount(e)]));

    const { answers, seconds } = await wave('load', JOBS);

    // Exactly one terminal result per job: one 200 answer each, naming its own job id ...
    const statuses = new Map<number, number>();
    for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    const ids = answers.map((a) => a.body?.job_id);
    expect(Object.fromEntries(statuses)).toEqual({ 200: JOBS });
    expect(new Set(ids).size).toBe(JOBS);
    expect(answers.every((a, i) => a.body.job_id === `load-${i}` && a.body.critical_error === null)).toBe(true);
    // ... the same terminal state at GET /jobs/:id ...
    const states = new Map<string, number>();
    for (let i = 0; i < JOBS; i += 100) {
      const page = await Promise.all(Array.from({ length: 100 }, (_, k) => httpGet(`${server.url}/jobs/load-${i + k}`, agent)));
      for (const p of page) states.set(p.body?.state, (states.get(p.body?.state) ?? 0) + 1);
    }
    expect(Object.fromEntries(states)).toEqual({ done: JOBS });
    // ... counted once by /metrics, and journaled once.
    const metrics = (await httpGet(`${server.url}/metrics`, agent)).text;
    const done = Number(/raas_jobs_total\{state="done"\} (\d+)/.exec(metrics)?.[1]);
    expect(done).toBe(JOBS + WARMUP);
    await until(
      () => fs.readFileSync(path.join(journal, 'results.jsonl'), 'utf8').split('\n').filter(Boolean).length >= JOBS + WARMUP,
      'journal flushed',
      10_000,
    );
    const lines = fs
      .readFileSync(path.join(journal, 'results.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).job_id as string);
    const perId = new Map<string, number>();
    for (const id of lines) perId.set(id, (perId.get(id) ?? 0) + 1);
    expect([...perId.values()].every((n) => n === 1)).toBe(true);
    expect(lines.filter((id) => id.startsWith('load-')).length).toBe(JOBS);

    // The maps are empty: no live job, no queued job, no busy worker, no group binding, no backend load.
    const inside = internals(server);
    expect({ ...inside, finishedKept: 0 }).toEqual({
      liveJobs: 0,
      pendingCloses: 0,
      queued: 0,
      busyWorkers: 0,
      groupBindings: 0,
      activeOnBackends: 0,
      finishedKept: 0,
    });
    // Finished results stay answerable for result_ttl_s (by design), nothing else does.
    expect(inside.finishedKept).toBe(JOBS + WARMUP);
    agent.destroy();
    await until(async () => (await connections()) === 0, 'client connections closed');
    // Timers and listeners are back where they were (held /process answers add none once answered).
    await until(() => timers() <= timersBefore, `timers back to ${timersBefore} (now ${timers()})`, 5000);
    const listenersAfter = Object.fromEntries(httpServer.eventNames().map((e) => [String(e), httpServer.listenerCount(e)]));
    expect(listenersAfter).toEqual(listenersBefore);

    forceGc();
    const rssAfter = process.memoryUsage().rss;
    const heapAfter = process.memoryUsage().heapUsed;
    const growth = rssAfter / rssBefore - 1;
    observe({
      section: 'load',
      name: `${JOBS} concurrent /process (chat, simulated vLLM backend)`,
      observed: `${JOBS}/${JOBS} answered 200 with their own job_id in ${seconds.toFixed(1)} s (${(JOBS / seconds).toFixed(0)} jobs/s); GET /jobs/:id: ${JSON.stringify(Object.fromEntries(states))}; raas_jobs_total{done} ${done}; journal lines per id: 1; live/queued/busy/group/backend-active maps: ${JSON.stringify({ ...inside, finishedKept: undefined })}; timers ${timersBefore}→${timers()}; RSS after GC ${(rssBefore / 2 ** 20).toFixed(0)}→${(rssAfter / 2 ** 20).toFixed(0)} MiB (${(growth * 100).toFixed(1)}%), heap ${(heapBefore / 2 ** 20).toFixed(0)}→${(heapAfter / 2 ** 20).toFixed(0)} MiB`,
      figures: {
        jobs: JOBS,
        lost_jobs: JOBS - (states.get('done') ?? 0),
        duplicate_results: lines.length - perId.size,
        rss_growth_pct: Math.round(growth * 1000) / 10,
        jobs_per_s: Math.round(JOBS / seconds),
      },
    });
    expect(growth).toBeLessThan(0.2);
  }, 300_000);
});
