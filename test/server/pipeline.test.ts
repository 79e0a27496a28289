import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { ManualClock, TrackedSandbox, flush, get, post, stageLog, stagedHandler } from './helpers.js';

// Real fastify server on port 0 with a scripted handler whose stages sleep on a hand-driven clock.
describe('pipeline through the HTTP API', () => {
  const clock = new ManualClock();
  let srv: RolloutServer;
  const process = (instance: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
    post(`${srv.url}/process`, { instance: { data_source: 'staged', ...instance }, ...extra });

  beforeAll(async () => {
    srv = await startRolloutServer(
      {
        port: 0,
        log_level: 'silent',
        workers: { init: 2, run: 1, eval: 2 },
        max_queued_jobs: 3,
        llm: { backends: [{ address: 'http://127.0.0.1:9' }] },
      },
      { clock, handlers: [stagedHandler(clock)] },
    );
  });
  afterAll(async () => {
    await srv.close();
  });
  beforeEach(() => {
    stageLog.length = 0;
    TrackedSandbox.opened.length = 0;
  });

  it('moves a job through INIT, RUN and EVAL and answers with the merged result', async () => {
    const pending = process(
      { instance_id: 'i1', init_ms: 100, run_ms: 200, eval_ms: 300, runtime: true },
      { job_id: 'life-1', policy_version: 3 },
    );
    await clock.advance(700);
    const r = await pending;
    expect(r.status).toBe(200);
    expect(stageLog).toEqual(['life-1:init', 'life-1:run', 'life-1:eval']);
    const res = r.body;
    expect(res).toMatchObject({
      job_id: 'life-1',
      instance_id: 'i1',
      data_source: 'staged',
      critical_error: null,
      success: true,
      finish: true,
      end_properly: true,
      resolved: true,
      reward: 1,
      finish_reason: 'finish',
      policy_version: 3,
      num_turns: 1,
    });
    expect(res.messages[0].content).toBe('saw runtime=yes init={"stage":"init"}');
    expect(res.timing).toMatchObject({
      init_s: 0.1,
      run_s: 0.2,
      eval_s: 0.3,
      init_time: 0.1,
      run_time: 0.2,
      eval_time: 0.3,
      timeout_triggered: false,
    });
    expect(res.timing.counted_s).toBeCloseTo(0.6, 5);
    expect(res.timing.counted_elapsed).toBeCloseTo(0.6, 5);
    expect(res.timing.others_time).toBe(res.timing.queued_s);
    // The runtime was closed right after RUN, before EVAL.
    expect(TrackedSandbox.opened[0].closed).toBe(1);
    // Every ProRL key is present.
    for (const k of [
      'instance_id',
      'trajectory_id',
      'git_patch',
      'success',
      'finish',
      'messages',
      'tools',
      'end_properly',
      'resolved',
      'critical_error',
      'filter',
      'error',
    ])
      expect(res).toHaveProperty(k);
    const j = await get(`${srv.url}/jobs/life-1`);
    expect(j.body).toMatchObject({ job_id: 'life-1', state: 'done', result: { reward: 1 } });
  });

  it('ends the job on an INIT failure with the fallback result', async () => {
    const r = await process({ fail: 'init' }, { job_id: 'f-init' });
    expect(r.body).toMatchObject({
      critical_error: 'init',
      success: false,
      filter: true,
      error: 'init fallback: init failed on purpose',
      reward: 0,
    });
    expect(r.body.traceback).toMatch(/^Error: init failed on purpose\n\s+at /);
    expect(stageLog).toEqual(['f-init:init']);
    expect((await get(`${srv.url}/jobs/f-init`)).body.state).toBe('failed');
  });

  it('still runs EVAL after a RUN failure, and keeps the eval fallback on an EVAL failure', async () => {
    const r = await process({ fail: 'run', runtime: true }, { job_id: 'f-run' });
    expect(stageLog).toEqual(['f-run:init', 'f-run:run', 'f-run:eval']);
    // EVAL graded the fallback run as resolved with reward 1; a failed rollout still has reward 0.
    expect(r.body).toMatchObject({
      critical_error: 'run',
      error: 'run fallback: run failed on purpose',
      finish_reason: 'error',
      resolved: false,
      reward: 0,
      filter: true,
      details: { run_finish: 'error' },
    });
    expect(r.body.traceback).toContain('run failed on purpose');
    expect(TrackedSandbox.opened[0].closed).toBe(1);
    const e = await process({ fail: 'eval' }, { job_id: 'f-eval' });
    // The hook's reward -1 gives way to 0 too; the run itself succeeded.
    expect(e.body).toMatchObject({
      critical_error: 'eval',
      reward: 0,
      success: true,
      filter: true,
      error: 'eval fallback: eval failed on purpose',
    });
  });

  it('counts only in-stage time toward timeout_s, never queue waiting', async () => {
    // One RUN worker: "blocker" holds it for 10 s while "waiter" sits in the RUN queue.
    const blocker = process({ run_ms: 10_000 }, { job_id: 't-block' });
    await clock.advance(50);
    const waiter = process({ init_ms: 1_000, run_ms: 2_000, eval_ms: 1_000 }, { job_id: 't-wait', timeout_s: 5 });
    await clock.advance(10_000);
    await clock.advance(4_000);
    const w = await waiter;
    expect(w.body.critical_error).toBeNull();
    expect(w.body.timing.counted_s).toBeCloseTo(4, 5);
    expect(w.body.timing.queued_s).toBeGreaterThan(8);
    await blocker;
    // A stage that runs past the budget ends the job as timed out, with its partial trajectory.
    const slow = process({ init_ms: 1_000, run_ms: 60_000 }, { job_id: 't-slow', timeout_s: 3 });
    await clock.advance(3_100);
    const s = await slow;
    expect(s.body).toMatchObject({ critical_error: 'timeout', finish_reason: 'timeout', timing: { timeout_triggered: true } });
    expect(s.body.timing.counted_s).toBeCloseTo(3, 5);
    expect(s.body.messages).toHaveLength(1);
    expect((await get(`${srv.url}/jobs/t-slow`)).body.state).toBe('timed_out');
  });

  it('a reused job_id starts a new job; attach: true answers from the job that has the id', async () => {
    // Two plain submissions under one id are two jobs, each with its own answer.
    const a = process({ run_ms: 500 }, { job_id: 'same' });
    const b = process({ run_ms: 500 }, { job_id: 'same' });
    await clock.advance(600);
    await clock.advance(600);
    const [ra, rb] = await Promise.all([a, b]);
    expect(stageLog.filter((s) => s === 'same:run')).toHaveLength(2);
    expect([ra.body.job_id, rb.body.job_id]).toEqual(['same', 'same']);
    // attach: true answers from a finished job's stored result at once...
    const stored = await process({ run_ms: 500 }, { job_id: 'same', attach: true });
    expect([ra.body, rb.body]).toContainEqual(stored.body);
    expect(stageLog.filter((s) => s === 'same:run')).toHaveLength(2);
    // ...and joins a running one instead of starting another.
    const c = process({ run_ms: 500 }, { job_id: 'same' });
    for (let i = 0; i < 50 && (await get(`${srv.url}/jobs/same`)).body?.state !== 'run'; i++) await flush();
    let held = true;
    const d = process({ run_ms: 500 }, { job_id: 'same', attach: true }).finally(() => (held = false));
    await new Promise((r) => setTimeout(r, 100));
    expect(held).toBe(true); // waiting on the running job, not answered from the store
    expect((await get(`${srv.url}/status`)).body.pending_jobs).toBe(1);
    await clock.advance(600);
    const [rc, rd] = await Promise.all([c, d]);
    expect(rd.body).toEqual(rc.body);
    expect(stageLog.filter((s) => s === 'same:run')).toHaveLength(3);
    const conflict = await process({ run_ms: 1 }, { job_id: 'same', attach: true });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('job_conflict');
    const fresh = process({ run_ms: 1 }, { job_id: 'same' });
    for (let i = 0; i < 50 && stageLog.length < 12; i++) await clock.advance(50);
    expect((await fresh).status).toBe(200);
    expect(stageLog.filter((s) => s === 'same:run')).toHaveLength(4);
  });

  it.each([
    ['queued', { run_ms: 0 }, 'queued_init'],
    ['INIT', { init_ms: 60_000, runtime: true }, 'init'],
    ['RUN', { run_ms: 60_000, runtime: true }, 'run'],
    ['EVAL', { eval_ms: 60_000 }, 'eval'],
    ['a stage that ignores its signal', { hang: 'run', runtime: true }, 'run'],
  ])('cancel in %s releases the held answer at once', async (_label, instance, state) => {
    const id = `c-${state}-${Math.random().toString(36).slice(2, 7)}`;
    // Keep the INIT pool busy so a "queued" job stays queued.
    const holders =
      state === 'queued_init'
        ? [process({ init_ms: 60_000 }, { job_id: `${id}-h1` }), process({ init_ms: 60_000 }, { job_id: `${id}-h2` })]
        : [];
    await clock.advance(50);
    const held = process(instance, { job_id: id });
    for (let i = 0; i < 50 && (await get(`${srv.url}/jobs/${id}`)).body?.state !== state; i++) await clock.advance(50);
    expect((await get(`${srv.url}/jobs/${id}`)).body.state).toBe(state);
    const c = await post(`${srv.url}/cancel`, { job_id: id });
    expect(c.body).toEqual({ status: 'ok', job_id: id, cancelled: true, state: 'cancelled' });
    // The grace for a partial result (cancel_grace_ms, 100 ms on the job clock) is all it may take.
    await clock.advance(150);
    const r = await held;
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ job_id: id, critical_error: 'cancelled', finish_reason: 'cancelled' });
    expect((await get(`${srv.url}/jobs/${id}`)).body.state).toBe('cancelled');
    await flush();
    for (const s of TrackedSandbox.opened) expect(s.closed).toBe(1);
    if (state === 'run' && instance.hang === undefined) expect(r.body.messages).toHaveLength(1);
    for (const h of holders) void post(`${srv.url}/cancel`, { job_id: `${id}-h${holders.indexOf(h) + 1}` });
    await clock.advance(150);
    await Promise.all(holders);
  });

  it('a cancel that arrives while the RUN runtime is closing still ends the job (no waiter left hanging)', async () => {
    let release!: () => void;
    TrackedSandbox.closeGate = new Promise<void>((r) => (release = r));
    try {
      const pending = process({ runtime: true }, { job_id: 'cancel-in-close' });
      // Wait until RUN has ended and its runtime close is in progress (held by the gate).
      for (let i = 0; i < 200 && !(TrackedSandbox.opened[0]?.closed === 1 && stageLog.includes('cancel-in-close:run')); i++) await flush();
      expect(TrackedSandbox.opened[0].closed).toBe(1);
      const c = await post(`${srv.url}/cancel`, { job_id: 'cancel-in-close' });
      expect(c.body).toMatchObject({ cancelled: true });
      release();
      const r = await pending;
      expect(r.body).toMatchObject({ job_id: 'cancel-in-close', critical_error: 'cancelled' });
      expect((await get(`${srv.url}/jobs/cancel-in-close`)).body.state).toBe('cancelled');
      expect(stageLog).not.toContain('cancel-in-close:eval');
    } finally {
      TrackedSandbox.closeGate = undefined;
      release();
    }
  });

  it('/cancel of an unknown id answers 200 (as in ProRL); /jobs/:id answers 404 job_not_found', async () => {
    const c = await post(`${srv.url}/cancel`, { job_id: 'never-seen' });
    expect(c.status).toBe(200);
    expect(c.body).toEqual({ status: 'ok', job_id: 'never-seen', cancelled: false, state: 'unknown' });
    const j = await get(`${srv.url}/jobs/never-seen`);
    expect(j.status).toBe(404);
    expect(j.body).toEqual({
      error: { code: 'job_not_found', message: expect.stringContaining('never-seen') },
      detail: expect.any(String),
    });
  });

  it('answers 503 queue_full with Retry-After once max_queued_jobs wait', async () => {
    const ids = ['q1', 'q2', 'q3', 'q4', 'q5', 'q6'];
    const held = ids.map((id) => process({ init_ms: 60_000 }, { job_id: id }));
    await clock.advance(50);
    // 2 in INIT workers, 3 queued: the next one is refused.
    const r = await process({}, { job_id: 'q-over' });
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe('queue_full');
    expect(r.headers.get('retry-after')).toBe('1');
    for (const id of ids) await post(`${srv.url}/cancel`, { job_id: id });
    await clock.advance(150);
    const answers = await Promise.all(held);
    expect(answers.filter((a) => a.status === 503)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 200).every((a) => a.body.critical_error === 'cancelled')).toBe(true);
  });

  it('/stop cancels every job and closes every runtime; /start opens intake again', async () => {
    const held = [
      process({ run_ms: 60_000, runtime: true }, { job_id: 's1' }),
      process({ init_ms: 60_000, runtime: true }, { job_id: 's2' }),
      process({}, { job_id: 's3' }),
    ];
    await clock.advance(100);
    const stopping = post(`${srv.url}/stop`);
    await clock.advance(200);
    expect((await stopping).body).toEqual({ status: 'stopped' });
    const answers = await Promise.all(held);
    for (const a of answers) expect(a.body.critical_error === 'cancelled' || a.body.critical_error === null).toBe(true);
    expect(answers.filter((a) => a.body.critical_error === 'cancelled').length).toBeGreaterThanOrEqual(2);
    for (const s of TrackedSandbox.opened) expect(s.closed).toBe(1);
    const refused = await process({}, { job_id: 's4' });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('server_stopped');
    // The other routes ProRL guards answer 503 too while stopped.
    for (const r of [await get(`${srv.url}/status`), await post(`${srv.url}/cancel`, { job_id: 's4' }), await post(`${srv.url}/stop`)]) {
      expect(r.status).toBe(503);
      expect(r.body.detail).toMatch(/^Server is not running\. Please start the server first/);
    }
    expect((await post(`${srv.url}/start`)).body).toEqual({ status: 'running' });
    expect((await post(`${srv.url}/start`)).status).toBe(200);
    const ok = await process({}, { job_id: 's5' });
    expect(ok.body.critical_error).toBeNull();
    // Jobs the stop cancelled are forgotten once answered: their ids run anew when resubmitted.
    expect((await get(`${srv.url}/jobs/s1`)).status).toBe(404);
    const rerun = process({ run_ms: 100, runtime: true }, { job_id: 's1' });
    await clock.advance(200);
    expect((await rerun).body.critical_error).toBeNull();
    const st = await get(`${srv.url}/status`);
    expect(st.body).toMatchObject({
      status: 'running',
      running: true,
      pending_jobs: 0,
      jobs: 0,
      queued: 0,
      in_stage: 0,
      workers: { init: { size: 2, busy: 0 }, run: { size: 1 }, eval: { size: 2 } },
    });
  });

  it('answers 503 no_llm_backends while the pool is empty', async () => {
    await post(`${srv.url}/clear_llm_server`);
    const r = await process({}, { job_id: 'nb' });
    expect(r.status).toBe(503);
    expect(r.body.error.code).toBe('no_llm_backends');
    await post(`${srv.url}/add_llm_server`, { address: 'http://127.0.0.1:9' });
  });
});
