// Faults of the LLM backends under the built-in chat handler: a backend answering 500, garbage,
// a wrong shape, resetting connections or answering too slowly; a backend process SIGKILLed while
// jobs are in RUN. Alone, such a backend ends each job with critical_error "run" in bounded time;
// next to a healthy one, jobs move and finish. Nothing hangs, and the server's maps drain.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { badBackend, type BadMode } from './helpers/bad-backend.js';
import { observe } from './helpers/observe.js';
import { inProcessServer, internals, postJson, request, simProcess, until, type ServeProcess } from './helpers/servers.js';

const chat = (id: string, turns = 1) => ({
  job_id: id,
  instance: { data_source: 'chat', turns },
  sampling_params: { seed: 1, max_tokens_per_turn: 40 },
});
const moves = async (url: string) => Number(/raas_backend_moves_total (\d+)/.exec((await request(`${url}/metrics`)).text)?.[1] ?? 0);

describe('faults: misbehaving LLM backends', () => {
  let server: RolloutServer;
  let good: SimHandle;

  beforeAll(async () => {
    good = await startSim({ seed: 3, filler: { median_tokens: 16, max_tokens: 40 } });
    // A small retry budget and request timeout keep each fault's bound short.
    server = await inProcessServer({ llm: { retries: 1, backoff_base_ms: 20, backoff_max_ms: 50, request_timeout_s: 1, max_moves: 3 } });
  });
  afterAll(async () => {
    await server?.close();
    await good?.close();
  });

  const modes: BadMode[] = ['http_500', 'garbage', 'wrong_shape', 'reset', 'slow'];
  for (const mode of modes) {
    it(`backend ${mode}: alone, jobs end with critical_error "run"; beside a healthy one, they move and finish`, async () => {
      const bad = await badBackend(mode);
      try {
        await postJson(`${server.url}/clear_llm_server`, {});
        await postJson(`${server.url}/add_llm_server`, { address: bad.url });
        const t0 = performance.now();
        const alone = await Promise.all(
          [0, 1, 2].map((i) => postJson(`${server.url}/process`, chat(`${mode}-alone-${i}`), { timeoutMs: 30_000 })),
        );
        const aloneS = (performance.now() - t0) / 1000;
        // The error names what the backend did, so an operator can tell a crash from a slow backend (D4).
        const cause: Record<BadMode, RegExp> = {
          http_500: /500/,
          garbage: /non-JSON/,
          wrong_shape: /without choices/,
          reset: /reset|socket|closed|fetch failed|ECONN/i,
          slow: /no answer within/,
        };
        for (const a of alone) {
          expect(a.status).toBe(200);
          expect(a.body).toMatchObject({ critical_error: 'run', finish_reason: 'error', success: false });
          expect(a.body.error).toMatch(/backend|LLM/i);
          expect(a.body.error).toMatch(cause[mode]);
        }
        const movesBefore = await moves(server.url);
        await postJson(`${server.url}/add_llm_server`, { address: good.url });
        const t1 = performance.now();
        const mixed = await Promise.all(
          Array.from({ length: 8 }, (_, i) => postJson(`${server.url}/process`, chat(`${mode}-mixed-${i}`), { timeoutMs: 30_000 })),
        );
        const mixedS = (performance.now() - t1) / 1000;
        const movedBy = (await moves(server.url)) - movesBefore;
        expect(mixed.map((m) => m.body.critical_error)).toEqual(Array(8).fill(null));
        expect(new Set(mixed.map((m) => m.body.backend))).toEqual(new Set([good.url]));
        expect((await request(`${server.url}/health`)).status).toBe(200);
        await until(() => internals(server).liveJobs === 0 && internals(server).activeOnBackends === 0, 'maps drained');
        observe({
          section: 'faults',
          name: `LLM backend answering ${mode.replace('_', ' ')}`,
          observed: `alone: 3/3 jobs ended critical_error "run" in ${aloneS.toFixed(1)} s, error "${String(alone[0].body.error).slice(0, 160)}"; beside a healthy sim: 8/8 done on the healthy backend in ${mixedS.toFixed(1)} s, ${movedBy} moved (raas_backend_moves_total); bad backend saw ${bad.hits} generation requests`,
          figures: { jobs: 11, lost_jobs: 0, hung_jobs: 0 },
        });
      } finally {
        await postJson(`${server.url}/clear_llm_server`, {});
        await bad.close();
      }
    }, 60_000);
  }
});

describe('faults: an LLM backend process SIGKILLed mid-RUN', () => {
  let server: RolloutServer;
  const sims: ServeProcess[] = [];
  const cfgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-rel-sim-'));
  // ~40 tokens at 50 ms each: every turn lasts about 2 s, long enough to kill the backend inside it.
  const simCfg = path.join(cfgDir, 'sim.yaml');
  fs.writeFileSync(
    simCfg,
    'seed: 5\nlatency:\n  decode_ms_per_token: 50\nfiller:\n  median_tokens: 40\n  sigma: 0\n  min_tokens: 40\n  max_tokens: 40\n',
  );

  beforeAll(async () => {
    server = await inProcessServer({ llm: { retries: 1, backoff_base_ms: 20, backoff_max_ms: 50, request_timeout_s: 10, max_moves: 3 } });
  });
  afterAll(async () => {
    await server?.close();
    for (const s of sims) await s.kill();
    fs.rmSync(cfgDir, { recursive: true, force: true });
  });

  it('alone: every job ends with critical_error "run", none hangs', async () => {
    const a = await simProcess(['--config', simCfg]);
    sims.push(a);
    await postJson(`${server.url}/add_llm_server`, { address: a.url });
    const t0 = performance.now();
    const pending = [0, 1, 2, 3].map((i) => postJson(`${server.url}/process`, chat(`kill-alone-${i}`), { timeoutMs: 30_000 }));
    await until(async () => (await request(`${server.url}/status`)).body.run === 4, 'jobs in RUN');
    await new Promise((r) => setTimeout(r, 300));
    const exit = await a.kill('SIGKILL');
    const answers = await Promise.all(pending);
    const seconds = (performance.now() - t0) / 1000;
    expect(exit.signal).toBe('SIGKILL');
    for (const r of answers) expect(r.body).toMatchObject({ critical_error: 'run', finish_reason: 'error' });
    await until(() => internals(server).liveJobs === 0 && internals(server).activeOnBackends === 0, 'maps drained');
    observe({
      section: 'faults',
      name: 'LLM backend SIGKILLed mid-RUN (only backend)',
      observed: `4/4 jobs in RUN ended critical_error "run" ${seconds.toFixed(1)} s after submission; error "${String(answers[0].body.error).slice(0, 160)}"`,
      figures: { jobs: 4, lost_jobs: 0, hung_jobs: 0 },
    });
    await postJson(`${server.url}/clear_llm_server`, {});
  }, 150_000);

  it('beside a live backend: jobs on the killed one move with their prompt ids and finish', async () => {
    const a = await simProcess(['--config', simCfg]);
    sims.push(a);
    const b = await simProcess(['--config', simCfg]);
    sims.push(b);
    await postJson(`${server.url}/add_llm_server`, { address: a.url });
    await postJson(`${server.url}/add_llm_server`, { address: b.url });
    const movesBefore = await moves(server.url);
    const pending = Array.from({ length: 6 }, (_, i) =>
      postJson(`${server.url}/process`, chat(`kill-move-${i}`, 2), { timeoutMs: 60_000 }),
    );
    await until(
      async () => (await request(`${server.url}/status`)).body.backends.every((x: { active: number }) => x.active > 0),
      'both backends busy',
    );
    await new Promise((r) => setTimeout(r, 300));
    await a.kill('SIGKILL');
    const answers = await Promise.all(pending);
    const moved = (await moves(server.url)) - movesBefore;
    expect(answers.map((r) => r.body.critical_error)).toEqual(Array(6).fill(null));
    expect(answers.every((r) => r.body.backend === b.url)).toBe(true);
    expect(moved).toBeGreaterThan(0);
    observe({
      section: 'faults',
      name: 'LLM backend SIGKILLed mid-RUN (a second backend alive)',
      observed: `6/6 jobs finished without critical_error, all last served by the live backend; ${moved} job(s) moved off the killed backend (raas_backend_moves_total)`,
      figures: { jobs: 6, lost_jobs: 0, hung_jobs: 0 },
    });
  }, 150_000);
});
