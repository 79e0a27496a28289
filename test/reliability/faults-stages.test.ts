// Faults inside the pipeline: a handler (loaded by path through handler_modules) throwing in each
// stage, with and without its exception hooks throwing too; a stage hanging past timeout_s (with and
// without honouring its signal); a client disconnecting mid-/process. Every job answers once with
// the documented critical_error, the workers survive, and the maps drain.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { observe } from './helpers/observe.js';
import { inProcessServer, internals, postJson, request, until } from './helpers/servers.js';

describe('faults: handler failures, hangs and client disconnects', () => {
  let server: RolloutServer;
  let sim: SimHandle;

  beforeAll(async () => {
    sim = await startSim({
      seed: 2,
      latency: { decode_ms_per_token: 25 },
      filler: { median_tokens: 40, sigma: 0, min_tokens: 40, max_tokens: 40 },
    });
    // One worker per stage: a stage that took its worker down would block every later job.
    server = await inProcessServer({
      workers: { init: 1, run: 1, eval: 1 },
      cancel_grace_ms: 100,
      llm: { backends: [{ address: sim.url }] },
    });
  });
  afterAll(async () => {
    await server?.close();
    await sim?.close();
  });

  const faulty = (id: string, fields: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    postJson(`${server.url}/process`, { job_id: id, instance: { data_source: 'rel-faulty', ...fields }, ...extra }, { timeoutMs: 30_000 });

  for (const stage of ['init', 'run', 'eval'] as const) {
    for (const variant of ['error', 'hooks throw too', 'non-Error value'] as const) {
      it(`a handler throwing in ${stage} (${variant}) ends the job with critical_error "${stage}"`, async () => {
        const fields = { throw_in: stage, hooks_throw: variant === 'hooks throw too', throw_value: variant === 'non-Error value' };
        const r = await faulty(`throw-${stage}-${variant.replace(/\W+/g, '_')}`, fields);
        expect(r.status).toBe(200);
        // As in ProRL (openhands/nvidia/utils.py@40c1d8a:397-548): a failed rollout is filtered and earns 0; an
        // EVAL failure keeps the run's success.
        expect(r.body).toMatchObject({ critical_error: stage, success: stage === 'eval', filter: true, reward: 0 });
        expect(r.body.error).toContain(variant === 'non-Error value' ? `${stage} threw a string` : `${stage} exploded on purpose`);
        if (variant === 'error') expect(r.body.error).toContain(`${stage} fallback`);
        // A failed RUN still goes to EVAL (its reward then counts as 0); a failed INIT or EVAL ends there.
        const state = (await request(`${server.url}/jobs/${r.body.job_id}`)).body.state;
        expect(state).toBe('failed');
        // The single worker of each stage is still there: a normal job passes right after.
        const ok = await faulty(`after-${stage}-${variant.replace(/\W+/g, '_')}`, {});
        expect(ok.body).toMatchObject({ critical_error: null, reward: 1 });
        observe({
          section: 'faults',
          name: `handler throws in ${stage} (${variant})`,
          observed: `answer 200, state ${state}, critical_error "${r.body.critical_error}", error "${r.body.error}"; the next job on the same single worker finished normally`,
          figures: { jobs: 2, lost_jobs: 0 },
        });
      });
    }
  }

  for (const stage of ['init', 'run', 'eval'] as const) {
    for (const honour of [true, false]) {
      it(`${stage} hanging (${honour ? 'honours' : 'ignores'} its signal) ends with critical_error "timeout" after timeout_s`, async () => {
        const t0 = performance.now();
        const r = await faulty(`hang-${stage}-${honour}`, { hang: stage, honour_signal: honour }, { timeout_s: 0.5 });
        const s = (performance.now() - t0) / 1000;
        expect(r.body).toMatchObject({ critical_error: 'timeout', finish_reason: 'timeout' });
        expect(r.body.timing.timeout_triggered).toBe(true);
        expect(s).toBeLessThan(10);
        expect((await request(`${server.url}/jobs/${r.body.job_id}`)).body.state).toBe('timed_out');
        const ok = await faulty(`after-hang-${stage}-${honour}`, {});
        expect(ok.body.critical_error).toBe(null);
        observe({
          section: 'faults',
          name: `${stage.toUpperCase()} hanging, ${honour ? 'honouring' : 'ignoring'} its AbortSignal (timeout_s 0.5)`,
          observed: `answered after ${s.toFixed(2)} s with critical_error "timeout", counted_s ${r.body.timing.counted_s.toFixed(2)}, state timed_out; the stage's single worker served the next job`,
          figures: { jobs: 2, lost_jobs: 0, hung_jobs: 0 },
        });
      });
    }
  }

  it('a client disconnecting mid-/process: the job continues and its result is at GET /jobs/:id', async () => {
    const ac = new AbortController();
    const held = postJson(
      `${server.url}/process`,
      { job_id: 'disconnect-1', instance: { data_source: 'chat', turns: 2 }, sampling_params: { seed: 4 } },
      { signal: ac.signal },
    ).catch((e: Error) => e);
    await until(async () => (await request(`${server.url}/jobs/disconnect-1`)).body?.state === 'run', 'job in RUN');
    ac.abort();
    const err = await held;
    expect(err).toBeInstanceOf(Error);
    const mid = (await request(`${server.url}/jobs/disconnect-1`)).body.state;
    expect(['run', 'queued_eval', 'eval', 'done']).toContain(mid);
    await until(
      async () => (await request(`${server.url}/jobs/disconnect-1`)).body?.state === 'done',
      'job done after the disconnect',
      20_000,
    );
    const j = (await request(`${server.url}/jobs/disconnect-1`)).body;
    expect(j.result).toMatchObject({ job_id: 'disconnect-1', critical_error: null, num_turns: 2 });
    // A resubmission with the same id and attach: true answers from the finished job instead of running it again.
    const again = await postJson(`${server.url}/process`, {
      job_id: 'disconnect-1',
      attach: true,
      instance: { data_source: 'chat', turns: 2 },
      sampling_params: { seed: 4 },
    });
    expect(again.body.tokens).toEqual(j.result.tokens);
    observe({
      section: 'faults',
      name: 'client disconnects mid-/process',
      observed: `the held request was aborted while the job was in RUN (state then "${mid}"); the job finished: GET /jobs/disconnect-1 → state done, ${j.result.num_turns} turns, critical_error null; resubmitting the id returned the same tokens`,
      figures: { jobs: 1, lost_jobs: 0 },
    });
  });

  it('afterwards nothing is held: no live job, queue, busy worker or backend binding', async () => {
    await until(() => internals(server).liveJobs === 0, 'drained');
    const i = internals(server);
    expect({ ...i, finishedKept: 0 }).toEqual({
      liveJobs: 0,
      pendingCloses: 0,
      queued: 0,
      busyWorkers: 0,
      groupBindings: 0,
      activeOnBackends: 0,
      finishedKept: 0,
    });
  });
});
