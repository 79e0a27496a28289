// The Pipeline and its job lifecycle driven directly (no HTTP) with the scripted `staged` handler on a
// hand-driven clock: intake refusals, ids, attach, cancel in each state, GET /jobs/:id, stop/start,
// status counts, timing, the exception hooks, abandoned stages, and the runtime's life.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RaasError } from '../../src/protocol/errors.js';
import { LlmPoolConfig, ServerConfig } from '../../src/protocol/config-server.js';
import { HandlerRegistry } from '../../src/server/handlers/registry.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { BackendPool } from '../../src/server/llm/pool.js';
import { Pipeline, stoppedError } from '../../src/server/pipeline/pipeline.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { ManualClock, TrackedSandbox, flush, stageLog, stagedHandler, modelLessClients, parseResult } from './helpers.js';

interface Built {
  p: Pipeline;
  clock: ManualClock;
  warns: string[];
  ended: string[];
  stages: string[];
}

function build(over: Record<string, unknown> = {}, handlers: AgentHandler<any>[] = [], withBackend = true): Built {
  const clock = new ManualClock();
  const config = ServerConfig.parse({ workers: { init: 2, run: 2, eval: 2 }, cancel_grace_ms: 100, ...over });
  const pool = new BackendPool(LlmPoolConfig.parse({}), modelLessClients);
  if (withBackend) pool.add('http://127.0.0.1:9');
  const warns: string[] = [];
  const ended: string[] = [];
  const stages: string[] = [];
  const p = new Pipeline({
    config,
    registry: new HandlerRegistry([stagedHandler(clock), ...handlers]),
    pool,
    tokenizer: qwen3Tokenizer,
    clock,
    log: { debug() {}, info() {}, warn: (_o: unknown, m?: string) => warns.push(m ?? ''), error() {} },
    observer: { jobEnded: (s) => ended.push(s), stage: (s, sec) => stages.push(`${s}:${sec}`) },
  });
  return { p, clock, warns, ended, stages };
}

const staged = (i: Record<string, unknown> = {}) => ({ instance: { data_source: 'staged', ...i } });

describe('Pipeline', () => {
  let b: Built;
  beforeEach(() => {
    stageLog.length = 0;
    TrackedSandbox.opened.length = 0;
  });
  afterEach(async () => {
    await b?.p.close();
  });

  it('refuses work when stopped, without backends, and past max_queued_jobs, each with its code', async () => {
    b = build({ max_queued_jobs: 2, workers: { init: 1, run: 1, eval: 1 } });
    await b.p.submit(staged({ init_ms: 1000 }));
    await b.p.submit(staged());
    await b.p.submit(staged());
    expect(b.p.queued()).toBe(2);
    const full = await b.p.submit(staged()).catch((e: RaasError) => e);
    expect([full.code, full.message]).toEqual(['queue_full', 'max_queued_jobs (2) jobs are waiting: retry later']);
    b.p.state = 'stopped';
    expect(await b.p.submit(staged()).catch((e: RaasError) => e.code)).toBe('server_stopped');
    expect(stoppedError().message).toBe('Server is not running. Please start the server first. (POST /start opens intake.)');
    const empty = build({}, [], false);
    const e = await empty.p.submit(staged()).catch((x: RaasError) => x);
    expect([e.code, e.message]).toEqual([
      'no_llm_backends',
      'no LLM backend is registered: POST /add_llm_server {"address": "http://host:port"} first',
    ]);
    await empty.p.close();
  });

  it('runs a job through the three stages; its result times each stage, the queue wait and the counted time', async () => {
    b = build({ workers: { init: 1, run: 1, eval: 1 } });
    const first = await b.p.submit({
      ...staged({ instance_id: 'a', init_ms: 100, run_ms: 200, eval_ms: 300 }),
      job_id: 'a',
      policy_version: 2,
    });
    const second = await b.p.submit({ ...staged({ instance_id: 'b', init_ms: 100 }), job_id: 'b' });
    expect(first).toMatchObject({ jobId: 'a', attached: false });
    expect(b.p.status()).toMatchObject({
      status: 'running',
      running: true,
      jobs: 2,
      pending_jobs: 2,
      init: 1,
      run: 0,
      eval: 0,
      queued: 1,
      in_stage: 1,
      queues: { init: 1, run: 0, eval: 0 },
      workers: { init: { size: 1, busy: 1 }, run: { size: 1, busy: 0 }, eval: { size: 1, busy: 0 } },
      sandbox: null,
    });
    await b.clock.advance(700);
    const r = await parseResult(first.finished);
    expect(r).toMatchObject({
      job_id: 'a',
      reward: 1,
      resolved: true,
      policy_version: 2,
      finish_reason: 'finish',
      critical_error: null,
      filter: false,
    });
    expect(r.timing).toMatchObject({
      init_time: 0.1,
      run_time: 0.2,
      eval_time: 0.3,
      others_time: 0,
      counted_elapsed: 0.6,
      timeout_triggered: false,
      init_s: 0.1,
      run_s: 0.2,
      eval_s: 0.3,
      queued_s: 0,
      counted_s: 0.6,
    });
    const r2 = await parseResult(second.finished);
    expect(r2.timing.others_time).toBeCloseTo(0.5); // waited for the one worker of each stage: 0.1 + 0.1 + 0.3
    expect(b.ended).toEqual(['done', 'done']);
    expect(b.stages.filter((s) => !s.endsWith(':0'))).toEqual(['init:0.1', 'init:0.1', 'run:0.2', 'eval:0.3']);
    expect(b.p.status()).toMatchObject({ jobs: 0, in_stage: 0, queued: 0 });
    expect(JSON.parse(await b.p.get('a'))).toMatchObject({ job_id: 'a', state: 'done', result: { job_id: 'a' } });
  });

  it('makes an id when none is given; GET of a live job says its state; of an unknown id, how to resubmit', async () => {
    b = build();
    const s = await b.p.submit({ ...staged({ init_ms: 50 }), job_id: '' });
    expect(s.jobId).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(await b.p.get(s.jobId))).toEqual({ job_id: s.jobId, state: 'init' });
    const e = await b.p.get('nope').catch((x: RaasError) => x);
    expect([e.code, e.message]).toEqual([
      'job_not_found',
      'job_id "nope" is unknown (never seen, expired, or in flight at a restart): resubmit it with the same id and attach: true',
    ]);
    await b.clock.advance(100);
    await s.finished;
  });

  it('attach answers from the live job with the id (the newest with that instance) or the stored result; another instance is a conflict', async () => {
    b = build();
    const a = await b.p.submit({ ...staged({ instance_id: 'x', init_ms: 100 }), job_id: 'same' });
    const again = await b.p.submit({ ...staged({ instance_id: 'x', init_ms: 100 }), job_id: 'same', attach: true });
    expect(again.attached).toBe(true);
    expect(again.finished).toBe(a.finished);
    const c = await b.p
      .submit({ ...staged({ instance_id: 'x', init_ms: 100 }), job_id: 'same', attach: true, policy_version: 1 })
      .catch((e) => e);
    expect(c.attached).toBe(true);
    const other = await b.p.submit({ ...staged({ instance_id: 'y' }), job_id: 'same', attach: true }).catch((e: RaasError) => e);
    expect(other.code).toBe('job_conflict');
    expect(other.message).toBe(
      'attach: true, but job_id "same" belongs to a job with a different instance: use a new job_id, or drop attach to start a new job',
    );
    await b.clock.advance(200);
    const done = await a.finished;
    const stored = await b.p.submit({ ...staged({ instance_id: 'x', init_ms: 100 }), job_id: 'same', attach: true });
    expect(stored.attached).toBe(true);
    expect(await stored.finished).toBe(done);
    expect((await b.p.submit({ ...staged({ instance_id: 'z' }), job_id: 'same', attach: true }).catch((e: RaasError) => e)).code).toBe(
      'job_conflict',
    );
    // an id never seen starts a new job
    const fresh = await b.p.submit({ ...staged({ init_ms: 10 }), job_id: 'new', attach: true });
    expect(fresh.attached).toBe(false);
    await b.clock.advance(50);
    await fresh.finished;
  });

  it('two live jobs under one id each get their own result; /cancel ends both; a finished id answers its state', async () => {
    b = build({ workers: { init: 1, run: 1, eval: 1 } });
    const j1 = await b.p.submit({ ...staged({ init_ms: 500 }), job_id: 'dup' });
    const j2 = await b.p.submit({ ...staged({ init_ms: 500 }), job_id: 'dup' });
    expect(b.p.status().jobs).toBe(2);
    expect(b.p.cancel('dup')).toEqual({ status: 'ok', job_id: 'dup', cancelled: true, state: 'cancelled' });
    expect(b.p.queued()).toBe(0); // the queued one left its queue at once
    await b.clock.advance(10);
    const [r1, r2] = await Promise.all([parseResult(j1.finished), parseResult(j2.finished)]);
    expect([r1.critical_error, r2.critical_error]).toEqual(['cancelled', 'cancelled']);
    expect(b.p.cancel('dup')).toEqual({ status: 'ok', job_id: 'dup', cancelled: false, state: 'cancelled' });
    expect(b.p.cancel('never')).toEqual({ status: 'ok', job_id: 'never', cancelled: false, state: 'unknown' });
    expect(b.ended).toEqual(['cancelled', 'cancelled']);
  });

  it('a cancelled RUN keeps the partial trajectory the handler hands back; a timeout ends the job as timed_out', async () => {
    b = build();
    const j = await b.p.submit({ ...staged({ run_ms: 1000 }), job_id: 'c' });
    await b.clock.advance(100);
    b.p.cancel('c');
    await b.clock.advance(10);
    const r = await parseResult(j.finished);
    expect(r).toMatchObject({ critical_error: 'cancelled', finish_reason: 'cancelled', num_turns: 1 });
    expect(r.messages[0].content).toContain('saw runtime=no');
    const t = await b.p.submit({ ...staged({ run_ms: 5000 }), job_id: 't', timeout_s: 1 });
    await b.clock.advance(1100);
    const rt = await parseResult(t.finished);
    expect(rt).toMatchObject({ critical_error: 'timeout', finish_reason: 'timeout', timing: { timeout_triggered: true } });
    expect(JSON.parse(await b.p.get('t')).state).toBe('timed_out');
  });

  it('a stage that ignores its cancel is abandoned after cancel_grace_ms; its runtime is still closed', async () => {
    b = build({ cancel_grace_ms: 100 });
    const j = await b.p.submit({ ...staged({ hang: 'run', runtime: true }), job_id: 'h' });
    await b.clock.advance(10);
    b.p.cancel('h');
    await b.clock.advance(50);
    let done = false;
    void j.finished.then(() => (done = true));
    await flush();
    expect(done).toBe(false); // within the grace
    await b.clock.advance(100);
    const r = await parseResult(j.finished);
    expect(r.critical_error).toBe('cancelled');
    expect(TrackedSandbox.opened[0].closed).toBe(1);
  });

  it('the runtime INIT returns is handed to RUN and closed right after it; a failing close is logged, not fatal', async () => {
    b = build();
    const j = await b.p.submit({ ...staged({ runtime: true }), job_id: 'rt' });
    await b.clock.advance(10);
    const r = await parseResult(j.finished);
    expect(r.messages[0].content).toBe('saw runtime=yes init={"stage":"init"}');
    expect(TrackedSandbox.opened[0].closed).toBe(1);
    const bad = TrackedSandbox.prototype.close;
    TrackedSandbox.prototype.close = async function () {
      throw new Error('umount failed');
    };
    try {
      const k = await b.p.submit({ ...staged({ runtime: true }), job_id: 'rt2' });
      await b.clock.advance(10);
      expect((await parseResult(k.finished)).critical_error).toBeNull();
      expect(b.warns).toContain('closing the runtime sandbox failed');
    } finally {
      TrackedSandbox.prototype.close = bad;
    }
  });

  it('failures: INIT ends the job, RUN still runs EVAL, EVAL keeps its fallback; each records the error, its class and stack', async () => {
    b = build();
    const i = await parseResult((await b.p.submit(staged({ fail: 'init' }))).finished);
    expect(i).toMatchObject({ critical_error: 'init', error: 'init fallback: init failed on purpose', reward: 0 });
    expect(i.traceback).toMatch(/^Error: init failed on purpose\n\s+at /);
    const r = await parseResult((await b.p.submit(staged({ fail: 'run' }))).finished);
    expect(r).toMatchObject({ critical_error: 'run', error: 'run fallback: run failed on purpose', finish_reason: 'error', num_turns: 0 });
    expect(stageLog.filter((s) => s.endsWith(':eval'))).toHaveLength(1); // EVAL ran after the RUN failure
    const e = await parseResult((await b.p.submit(staged({ fail: 'eval' }))).finished);
    expect(e).toMatchObject({ critical_error: 'eval', error: 'eval fallback: eval failed on purpose', reward: 0, filter: true });
    expect(b.ended).toEqual(['failed', 'failed', 'failed']);
  });

  it('a hook that throws, a missing hook and a non-Error throw still end the job with a result', async () => {
    const base = stagedHandler(new ManualClock(), 'rough');
    const rough: AgentHandler<any> = {
      ...base,
      run: () => {
        throw 'a string';
      },
      runException: () => {
        throw new Error('hook broke');
      },
      evalException: undefined,
      finalResult: () => {
        throw new Error('final broke');
      },
      eval: async () => {
        throw new Error('eval broke');
      },
    };
    b = build({}, [rough]);
    const r = await parseResult((await b.p.submit({ instance: { data_source: 'rough' } })).finished);
    expect(r).toMatchObject({ critical_error: 'eval', error: 'Error: eval broke' });
    expect(b.warns).toEqual(['rough.runException threw', 'rough.finalResult threw']);
    const sync = {
      ...base,
      name: 'sync',
      init: () => {
        throw new TypeError('sync init');
      },
    } as AgentHandler<any>;
    const c = build({}, [sync]);
    const ri = await parseResult((await c.p.submit({ instance: { data_source: 'sync' } })).finished);
    expect(ri).toMatchObject({ critical_error: 'init', error: 'init fallback: sync init' });
    await c.p.close();
  });

  it('/stop cancels everything and forgets the ids (a resubmission runs anew); /start opens intake again; close is safe twice', async () => {
    b = build();
    const j = await b.p.submit({ ...staged({ run_ms: 1000 }), job_id: 's' });
    await b.clock.advance(10);
    const stopping = b.p.stop();
    expect(b.p.state).toBe('stopping');
    await b.clock.advance(10);
    await stopping;
    expect(b.p.state).toBe('stopped');
    const r = await parseResult(j.finished);
    expect(r.error).toBeNull();
    expect(r.critical_error).toBe('cancelled');
    expect(await b.p.get('s').catch((e: RaasError) => e.code)).toBe('job_not_found');
    b.p.start();
    expect(b.p.state).toBe('running');
    const again = await b.p.submit({ ...staged(), job_id: 's', attach: true });
    expect(again.attached).toBe(false);
    await again.finished;
    await b.p.close();
    await b.p.close();
    b.p.start(); // a closed pipeline stays closed
    expect(b.p.state).toBe('stopped');
  });

  it('a pipeline with autostart false starts stopped', async () => {
    b = build({ autostart: false });
    expect(b.p.status()).toMatchObject({ status: 'stopped', running: false });
  });
});
