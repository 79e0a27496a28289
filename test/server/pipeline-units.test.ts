// The pipeline's parts on their own: the job state machine, the stage pools, the result a job
// answers with (ProRL's rules), the store of finished results (ttl, max_kept_results, journal), the
// intake's checks, and the sandboxes of a stage.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RaasError } from '../../src/protocol/errors.js';
import { ProcessRequest } from '../../src/protocol/process.js';
import { HandlerRegistry } from '../../src/server/handlers/registry.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { Job, isTerminal, transition } from '../../src/server/pipeline/job.js';
import { StageLimiter } from '../../src/server/pipeline/limiter.js';
import { buildResult, fallbackRun, prorlFilter, trimTrailing } from '../../src/server/pipeline/result.js';
import { ResultStore } from '../../src/server/pipeline/results.js';
import { ResultsJournal } from '../../src/server/pipeline/journal.js';
import { admissionEnv, admit, instanceHash } from '../../src/server/pipeline/intake.js';
import { LazySandboxRuntime, StageSandboxes } from '../../src/server/pipeline/sandboxes.js';
import { PausableTimer } from '../../src/server/pipeline/timer.js';
import { seedOf } from '../../src/util/hash.js';
import { ManualClock, TrackedSandbox } from './helpers.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const Inst = z.looseObject({
  data_source: z.string().optional(),
  instance_id: z.union([z.string(), z.number()]).optional(),
  trajectory_id: z.number().optional(),
  n: z.number().default(1),
  m: z.string().optional(),
});
const handler: AgentHandler<z.infer<typeof Inst>> = {
  name: 'unit',
  instance: Inst,
  async init() {
    return {};
  },
  async run() {
    return fallbackRun('finish');
  },
  async eval() {
    return { reward: 1, resolved: true };
  },
};

function job(body: Record<string, unknown> = {}, instance: unknown = undefined): Job {
  const request = ProcessRequest.parse({ instance: { data_source: 'unit', instance_id: 'i1' }, ...body });
  return new Job(request.job_id || 'gen', 'key', request, handler, instance ?? request.instance, 0);
}

const timing = {
  init_time: 0,
  run_time: 0,
  eval_time: 0,
  others_time: 0,
  counted_elapsed: 0,
  timeout_triggered: false,
  queued_s: 0,
  init_s: 0,
  run_s: 0,
  eval_s: 0,
  counted_s: 0,
};

describe('job state machine', () => {
  it('allows only the documented edges and names an illegal one', () => {
    const j = job({ job_id: 'j1' });
    expect(j.state).toBe('queued_init');
    expect(() => transition(j, 'run')).toThrow('job j1: illegal transition queued_init -> run');
    for (const s of ['init', 'queued_run', 'run', 'queued_eval', 'eval', 'done'] as const) transition(j, s);
    expect(j.terminal).toBe(true);
    expect(() => transition(j, 'cancelled')).toThrow('illegal transition done -> cancelled');
    expect(['done', 'failed', 'cancelled', 'timed_out'].every((s) => isTerminal(s as never))).toBe(true);
    expect(['queued_init', 'init', 'run', 'eval', 'queued_eval'].some((s) => isTerminal(s as never))).toBe(false);
  });

  it('seeds from sampling_params.seed and the job id, reproducibly; fresh per job without one', () => {
    const a = job({ job_id: 'x', sampling_params: { seed: 5 } });
    expect(a.seed).toBe(seedOf(5, 'x'));
    expect(job({ job_id: 'x', sampling_params: { seed: 5 } }).seed, 'the same (seed, job_id) gives the same seed in another job').toBe(
      a.seed,
    );
    expect(job({ job_id: 'y', sampling_params: { seed: 5 } }).seed).not.toBe(a.seed);
    const fresh = new Set(Array.from({ length: 8 }, () => job().seed));
    expect(fresh.size).toBeGreaterThan(1);
    expect(a.info).toEqual({
      id: 'x',
      instance: { data_source: 'unit', instance_id: 'i1' },
      samplingParams: { seed: 5 },
      groupId: undefined,
      policyVersion: undefined,
      seed: a.seed,
    });
    expect(a.info).toBe(a.info);
  });

  it('aborts once: the signal and its listeners see the first reason', () => {
    const j = job();
    const heard: string[] = [];
    j.signal.addEventListener('abort', () => heard.push((j.signal.reason as Error).message));
    j.abort(new Error('first'));
    j.abort(new Error('second'));
    expect(j.isAborted).toBe(true);
    expect((j.reason as Error).message).toBe('first');
    expect(heard).toEqual(['first']);
  });
});

describe('StageLimiter', () => {
  const tick = () => new Promise((r) => setImmediate(r));
  it('grants at most `size` slots at once, FIFO; an aborted waiter leaves the queue with its reason and never starts; a release is idempotent', async () => {
    const lim = new StageLimiter('run', 2);
    const started: string[] = [];
    const releases = new Map<string, () => void>();
    const ctl = new Map<string, AbortController>();
    const outcomes = new Map<string, string>();
    for (const id of ['a', 'b', 'c', 'd', 'e']) {
      const c = new AbortController();
      ctl.set(id, c);
      lim.acquire(c.signal).then(
        (rel) => {
          started.push(id);
          releases.set(id, rel);
        },
        (err: Error) => outcomes.set(id, err.message),
      );
    }
    await tick();
    expect(started).toEqual(['a', 'b']);
    expect([lim.busy, lim.depth]).toEqual([2, 3]);
    ctl.get('d')!.abort(new Error('cancelled d'));
    await tick();
    expect(outcomes.get('d')).toBe('cancelled d');
    expect(lim.depth).toBe(2);
    releases.get('a')!();
    releases.get('a')!();
    await tick();
    expect(started).toEqual(['a', 'b', 'c']);
    expect(lim.busy).toBe(2);
    releases.get('c')!();
    await tick();
    expect(started).toEqual(['a', 'b', 'c', 'e']);
    expect(lim.depth).toBe(0);
    releases.get('b')!();
    releases.get('e')!();
    expect(lim.busy).toBe(0);
    // An abort after the grant changes nothing.
    ctl.get('e')!.abort(new Error('late'));
    expect(outcomes.has('e')).toBe(false);
  });

  it('a limiter of size 0 keeps every waiter queued until its signal aborts; an aborted signal is refused at once', async () => {
    const lim = new StageLimiter('eval', 0);
    const a = new AbortController();
    const p = lim.acquire(a.signal);
    expect(lim.depth).toBe(1);
    a.abort(new Error('gone'));
    await expect(p).rejects.toThrow('gone');
    expect(lim.depth).toBe(0);
    await expect(lim.acquire(a.signal)).rejects.toThrow('gone');
    expect(lim.depth).toBe(0);
  });

  it('stays FIFO across thousands of waiters (its queue is compacted as it goes)', async () => {
    const lim = new StageLimiter('init', 1);
    const order: number[] = [];
    const all = Array.from({ length: 3000 }, (_, i) =>
      lim.acquire(new AbortController().signal).then((rel) => {
        order.push(i);
        rel();
      }),
    );
    await Promise.all(all);
    expect(order).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    // What was granted is dropped now and then: the backing array never holds 3000 spent waiters.
    expect(lim.backlog).toBeLessThanOrEqual(1024);
  });
});

describe('PausableTimer', () => {
  it('a timeout that comes due while counting, with time still left (a pause moved the deadline), re-arms for the rest', async () => {
    const clock = new ManualClock();
    let fired = 0;
    const t = new PausableTimer(1000, clock, () => fired++);
    t.resume();
    await clock.advance(400, 1);
    t.pause();
    await clock.advance(1, 1);
    t.resume(); // the timeout armed at 0 comes due at 1000 with 999 ms counted
    await clock.advance(599, 1);
    expect(t.elapsedMs()).toBe(999);
    expect(fired).toBe(0);
    await clock.advance(1, 1);
    expect(fired).toBe(1);
    const u = new PausableTimer(1000, clock, () => fired++);
    u.resume();
    await clock.advance(300, 1);
    u.pause();
    await clock.advance(200, 1);
    u.resume(); // due at +1000 with 800 counted: must come back at +1200
    await clock.advance(600, 50);
    expect(fired).toBe(1);
    await clock.advance(150, 50);
    expect(fired).toBe(2);
  });

  it('holds at most one clock timer per job: none while paused once due, none after dispose', async () => {
    const clock = new ManualClock();
    const t = new PausableTimer(1000, clock, () => {});
    t.resume();
    expect(clock.pending).toBe(1);
    await clock.advance(100, 50);
    t.pause();
    t.resume(); // the armed timeout stays; no second one
    t.pause();
    expect(clock.pending).toBe(1);
    await clock.advance(2000, 50); // it comes due while paused: nothing is armed until resume
    expect(clock.pending).toBe(0);
    t.resume();
    expect(clock.pending).toBe(1);
    t.dispose();
    expect(clock.pending).toBe(0);
  });

  it('resuming while counting changes nothing', async () => {
    const clock = new ManualClock();
    const t = new PausableTimer(10_000, clock, () => {});
    t.resume();
    await clock.advance(100, 50);
    t.resume();
    await clock.advance(100, 50);
    expect(t.elapsedMs()).toBe(200);
    t.dispose();
  });

  it('re-arms for what is left after a pause, fires once at the limit, and never after dispose', async () => {
    const clock = new ManualClock();
    let fired = 0;
    const t = new PausableTimer(1000, clock, () => fired++);
    expect(t.running).toBe(false);
    t.resume();
    t.resume(); // no double counting
    expect(t.running).toBe(true);
    await clock.advance(600);
    t.pause();
    t.pause();
    expect(t.elapsedMs()).toBe(600);
    await clock.advance(5000); // paused: nothing counts, nothing fires
    expect(fired).toBe(0);
    t.resume();
    await clock.advance(399);
    expect(fired).toBe(0);
    expect(t.elapsedMs()).toBe(999);
    await clock.advance(1, 1);
    expect(fired).toBe(1);
    expect(t.expired).toBe(true);
    expect(t.running).toBe(false);
    expect(t.elapsedMs()).toBe(1000);
    t.resume(); // an expired timer does not start again
    expect(t.running).toBe(false);
    const d = new PausableTimer(100, clock, () => fired++);
    d.resume();
    await clock.advance(50);
    d.dispose();
    expect(d.elapsedMs()).toBe(50);
    d.resume();
    await clock.advance(500);
    expect(fired).toBe(1);
    expect(d.running).toBe(false);
  });
});

describe('buildResult', () => {
  it("ProRL's success needs the agent's own finish; end_properly needs no critical error; a run without artifacts has no git_patch", () => {
    const ran = (finish: string, state: 'done' | 'failed', critical: null | 'eval' = null) => {
      const j = job();
      j.state = state;
      j.criticalError = critical;
      j.run = {
        messages: [{ role: 'assistant', content: 'a' }],
        tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
        finish_reason: finish,
      } as never;
      return buildResult(j, { eval: { reward: 1, resolved: true } }, timing);
    };
    expect(ran('max_iterations', 'done')).toMatchObject({ success: false, finish: false, end_properly: true, git_patch: null, reward: 1 });
    expect(ran('finish', 'failed', 'eval')).toMatchObject({
      success: true,
      finish: true,
      end_properly: false,
      reward: 0,
      resolved: false,
      filter: true,
    });
    const init = job();
    init.state = 'failed';
    init.criticalError = 'init';
    expect(buildResult(init, {}, timing)).toMatchObject({
      finish_reason: 'error',
      success: false,
      end_properly: false,
      messages: [],
      trailing_messages: [],
    });
  });

  it('a finished job: run, eval and hook patches merged in that order; ProRL success, finish, end_properly and filter', () => {
    const j = job({ job_id: 'r1', policy_version: 4 }, { data_source: 'unit', instance_id: 'norm', trajectory_id: 2 });
    j.state = 'done';
    j.run = {
      messages: [
        { role: 'user', content: 'q' },
        { role: 'assistant', content: 'a', token_ids: [1], logprobs: [-1] },
        { role: 'tool', content: 'obs', input_ids: [5] },
      ],
      tokens: { prompt_ids: [1], response_ids: [2], response_mask: [1], logprobs: [-1] },
      finish_reason: 'finish',
      artifacts: { git_patch: 'diff --git' },
      tools: [{ name: 't' }],
    } as never;
    j.patches.push({ filter: true, resolved: false });
    const r = buildResult(j, { eval: { reward: 0.5, resolved: true, details: { k: 1 } } }, timing);
    expect(r).toMatchObject({
      instance_id: 'norm',
      trajectory_id: 2,
      git_patch: 'diff --git',
      job_id: 'r1',
      data_source: 'unit',
      policy_version: 4,
      reward: 0.5,
      resolved: false,
      success: true,
      finish: true,
      end_properly: true,
      critical_error: null,
      error: null,
      finish_reason: 'finish',
      num_turns: 1,
      tools: [{ name: 't' }],
      details: { k: 1 },
      backend: null,
      weight_versions: [],
    });
    expect(r.filter).toBe(false); // recomputed by ProRL's rule: success means no filter
    expect(r.timing).toBe(timing);
    // messages end with the last assistant one; token fields only on request
    expect(r.messages).toEqual([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'a' },
    ]);
    expect(r.trailing_messages).toEqual([{ role: 'tool', content: 'obs' }]);
    expect('traceback' in r).toBe(false);
    const withIds = job({ sampling_params: { return_message_ids: true } });
    withIds.state = 'done';
    withIds.run = j.run;
    const ri = buildResult(withIds, {}, timing);
    expect(ri.messages[1]).toEqual({ role: 'assistant', content: 'a', token_ids: [1], logprobs: [-1] });
    expect(ri.trailing_messages).toEqual([{ role: 'tool', content: 'obs', input_ids: [5] }]);
    const tl = job({ sampling_params: { token_level_generation: true } });
    tl.state = 'done';
    tl.run = j.run;
    expect(buildResult(tl, {}, timing).messages[1].token_ids).toEqual([1]);
  });

  it('a failed, cancelled or timed-out job: reward 0, not resolved, filtered, its critical error and finish reason', () => {
    const f = job({}, {});
    f.state = 'failed';
    f.criticalError = 'run';
    f.errorMessage = 'Error: boom';
    f.traceback = 'Error: boom\n  at x';
    f.run = fallbackRun();
    const r = buildResult(f, { eval: { reward: 1, resolved: true } }, timing);
    expect(r).toMatchObject({
      instance_id: 'i1',
      trajectory_id: null,
      reward: 0,
      resolved: false,
      success: false,
      filter: true,
      end_properly: false,
      critical_error: 'run',
      error: 'Error: boom',
      traceback: 'Error: boom\n  at x',
      finish_reason: 'error',
      git_patch: null,
    });
    const c = job();
    c.state = 'cancelled';
    expect(buildResult(c, {}, timing)).toMatchObject({
      critical_error: 'cancelled',
      finish_reason: 'cancelled',
      filter: true,
      finish: false,
      num_turns: 0,
    });
    const t = job();
    t.state = 'timed_out';
    t.run = {
      ...fallbackRun('finish'),
      messages: [
        { role: 'assistant', content: 'x' },
        { role: 'assistant', content: 'y' },
      ],
      num_turns: undefined,
    } as never;
    expect(buildResult(t, { eval: { reward: 1, resolved: true } }, timing)).toMatchObject({
      critical_error: 'timeout',
      finish_reason: 'timeout',
      reward: 0,
      num_turns: 2,
      success: true,
    });
  });

  it("filter_reason: ProRL's rule names the critical error or not_finished; a handler's reason marks a clean job and never replaces a critical error", () => {
    const done = (finish: 'finish' | 'max_iterations'): ReturnType<typeof job> => {
      const j = job();
      j.state = 'done';
      j.run = fallbackRun(finish);
      return j;
    };
    expect(buildResult(done('finish'), { eval: { reward: 1, resolved: true } }, timing)).toMatchObject({
      filter: false,
      filter_reason: null,
    });
    expect(buildResult(done('max_iterations'), { eval: { reward: 0, resolved: false } }, timing)).toMatchObject({
      filter: true,
      filter_reason: 'not_finished',
    });
    // The handler's reason wins over ProRL's not_finished and marks a job ProRL's rule keeps; the reward stays.
    expect(
      buildResult(done('max_iterations'), { eval: { reward: 1, resolved: true, filter_reason: 'resolved_at_max_iterations' } }, timing),
    ).toMatchObject({ filter: true, filter_reason: 'resolved_at_max_iterations', reward: 1 });
    expect(buildResult(done('finish'), { eval: { reward: 0, resolved: false, filter_reason: 'grader_tampered' } }, timing)).toMatchObject({
      filter: true,
      filter_reason: 'grader_tampered',
      reward: 0,
    });
    const t = done('finish');
    t.state = 'timed_out';
    expect(buildResult(t, { eval: { reward: 0, resolved: false, filter_reason: 'eval_timeout' } }, timing)).toMatchObject({
      filter: true,
      filter_reason: 'timeout',
      critical_error: 'timeout',
    });
  });

  it('end_properly for every normal finish; success as a hook sets it; an init failure is never a success', () => {
    for (const fr of ['finish', 'max_iterations', 'max_response_tokens', 'max_model_len'] as const) {
      const j = job();
      j.state = 'done';
      j.run = fallbackRun(fr);
      const r = buildResult(j, {}, timing);
      expect(r.end_properly).toBe(true);
      expect(r.finish).toBe(fr === 'finish');
      expect(r.success).toBe(fr === 'finish');
    }
    const e = job();
    e.state = 'done';
    e.run = fallbackRun('error');
    expect(buildResult(e, {}, timing).end_properly).toBe(false);
    const h = job();
    h.state = 'done';
    h.run = fallbackRun('error');
    h.patches.push({ success: true });
    expect(buildResult(h, {}, timing).success).toBe(true);
    const i = job();
    i.state = 'failed';
    i.criticalError = 'init';
    i.run = fallbackRun('finish');
    expect(buildResult(i, {}, timing).success).toBe(false);
  });

  it('names the backend and the weight version of every turn from the job session; strips each token field on its own', () => {
    const j = job({}, { data_source: 'unit' });
    j.state = 'done';
    j.session = {
      backend: 'http://b:1',
      turns: [
        { backend: 'http://a:1', weight_version: 'v1' },
        { backend: 'http://b:1', weight_version: 'v2' },
      ],
    } as never;
    j.run = {
      ...fallbackRun('finish'),
      num_turns: undefined,
      messages: [
        { role: 'user', content: 'u', input_ids: [1] },
        { role: 'assistant', content: 'a', logprobs: [-1] },
        { role: 'assistant', content: 'b', token_ids: [2] },
      ],
    } as never;
    const r = buildResult(j, {}, timing);
    expect(r.backend).toBe('http://b:1');
    expect(r.weight_versions).toEqual(['v1', 'v2']);
    expect(r.instance_id).toBe('i1'); // the submitted instance's id when the handler's view has none
    expect(r.messages).toEqual([
      { role: 'user', content: 'u' },
      { role: 'assistant', content: 'a' },
      { role: 'assistant', content: 'b' },
    ]);
    expect(r.num_turns).toBe(2); // counted from the assistant messages when the run does not say
    expect(r.tools).toEqual([]);
    expect('details' in r).toBe(false);
  });

  it('a job cancelled before it ran answers with the whole default result', () => {
    const j = job({ job_id: 'q' }, { data_source: 'unit' });
    j.state = 'cancelled';
    expect(buildResult(j, {}, timing)).toEqual({
      instance_id: 'i1',
      trajectory_id: null,
      git_patch: null,
      success: false,
      finish: false,
      messages: [],
      tools: [],
      end_properly: false,
      resolved: false,
      critical_error: 'cancelled',
      filter: true,
      filter_reason: 'cancelled',
      error: null,
      job_id: 'q',
      data_source: 'unit',
      reward: 0,
      finish_reason: 'cancelled',
      backend: null,
      policy_version: null,
      weight_versions: [],
      num_turns: 0,
      timing,
      tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
      trailing_messages: [],
    });
    expect(fallbackRun()).toEqual({
      messages: [],
      tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
      finish_reason: 'error',
      artifacts: {},
      num_turns: 0,
    });
  });

  it("a patch that does not set success leaves ProRL's rule in force; an eval without details adds none", () => {
    const j = job();
    j.state = 'done';
    j.run = { ...fallbackRun('finish'), artifacts: { git_patch: 42 } } as never;
    j.patches.push({ filter: true });
    const r = buildResult(j, { eval: { reward: 1, resolved: true } }, timing);
    expect(r.success).toBe(true);
    expect(r.git_patch).toBeNull(); // only a string is a patch
    expect('details' in r).toBe(false);
    const f = job();
    f.state = 'done';
    f.run = fallbackRun('finish');
    f.patches.push({ success: false }, { reward: 0.5 });
    expect(buildResult(f, {}, timing).success).toBe(false);
  });

  it("ProRL's filter and trimming rules", () => {
    expect(prorlFilter({ critical_error: 'eval', success: true, error: null })).toBe(true);
    expect(prorlFilter({ critical_error: null, success: true, error: 'x' })).toBe(false);
    expect(prorlFilter({ critical_error: null, success: false, error: 'AgentToolCallError: bad json' })).toBe(false);
    expect(prorlFilter({ critical_error: null, success: false, error: 'other' })).toBe(true);
    expect(prorlFilter({ critical_error: null, success: false, error: null })).toBe(true);
    const a = { role: 'assistant', content: 'a' } as const;
    const u = { role: 'user', content: 'u' } as const;
    const m = [u, a];
    expect(trimTrailing(m)).toEqual({ kept: m, trailing: [] });
    expect(trimTrailing(m).kept).toBe(m);
    expect(trimTrailing([u, a, u, u])).toEqual({ kept: [u, a], trailing: [u, u] });
    expect(trimTrailing([u, u])).toEqual({ kept: [], trailing: [u, u] });
    expect(trimTrailing([])).toEqual({ kept: [], trailing: [] });
  });
});

describe('ResultStore', () => {
  it('answers within result_ttl_s only; sweep drops the expired', async () => {
    let now = 0;
    const s = new ResultStore({ ttlMs: 1000, max: 10, wallNow: () => now });
    s.put('a', 'done', '{"a":1}', 0, { i: 1 });
    now = 1000;
    expect(s.record('a')?.state).toBe('done'); // at the ttl: still answers
    expect(await s.json('a', s.record('a')!)).toBe('{"a":1}');
    now = 1001;
    expect(s.record('a')).toBeUndefined();
    expect(s.size).toBe(0);
    s.put('b', 'failed', '{}', 1001, {});
    s.put('c', 'done', '{}', 2000, {});
    now = 2500;
    s.sweep();
    expect(s.size).toBe(1);
    expect(s.record('c')?.state).toBe('done');
  });

  it('keeps the newest max_kept_results in memory; without a journal older ones are forgotten; a re-stored id is the newest', () => {
    const s = new ResultStore({ ttlMs: 1e9, max: 2, wallNow: () => 0 });
    s.put('a', 'done', 'A', 0, {});
    s.put('b', 'done', 'B', 0, {});
    s.put('a', 'failed', 'A2', 0, {}); // a again: now the newest
    s.put('c', 'done', 'C', 0, {});
    expect(s.inMemory).toBe(2);
    expect(s.record('b')).toBeUndefined();
    expect(s.record('a')?.state).toBe('failed');
    expect(s.record('c')?.json).toBe('C');
    for (let i = 0; i < 5000; i++) s.put(`x${i}`, 'done', 'X', 0, {});
    expect(s.inMemory).toBe(2);
    expect(s.size).toBe(2);
    expect(s.record('x4999')?.json).toBe('X');
    expect(s.record('x4998')?.json).toBe('X');
    // The order list of what entered memory is cut back as results leave it.
    expect(s.orderLength).toBeLessThanOrEqual(1030);
  });

  it('stays within max_kept_results when the same ids are stored again and again (its order list is compacted)', () => {
    const s = new ResultStore({ ttlMs: 1e9, max: 3, wallNow: () => 0 });
    const order = () => s.orderLength;
    let longest = 0;
    for (let i = 0; i < 5000; i++) {
      s.put(`r${i % 3}`, 'done', String(i), 0, {});
      longest = Math.max(longest, order());
    }
    expect(s.inMemory).toBe(3);
    // Stale entries (ids stored again) are filtered out once they outnumber the live ones by 1024.
    expect(longest).toBeLessThanOrEqual(2 * 3 + 1024 + 1);
    expect(order()).toBeLessThan(1031);
    for (let i = 0; i < 3000; i++) s.put(`n${i}`, 'done', String(i), 0, {});
    expect(s.inMemory).toBe(3);
    expect(['n2997', 'n2998', 'n2999'].map((id) => s.record(id)?.json)).toEqual(['2997', '2998', '2999']);
    expect(s.record('r0')).toBeUndefined();
  });

  it('an id stored once, then outlived by thousands of re-stores of another, is still the oldest when the cap bites', () => {
    const s = new ResultStore({ ttlMs: 1e9, max: 3, wallNow: () => 0 });
    s.put('a', 'done', 'A', 0, {});
    for (let i = 0; i < 2500; i++) s.put('r', 'done', String(i), 0, {}); // the order list is cut back twice meanwhile
    for (const id of ['x', 'y', 'z']) s.put(id, 'done', id, 0, {});
    expect(['a', 'r', 'x', 'y', 'z'].map((id) => s.record(id)?.json)).toEqual([undefined, undefined, 'x', 'y', 'z']);
  });

  it('with a journal, results past the cap answer from their journal line, also after a reopen', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'raas-store-'));
    dirs.push(dir);
    const journal = new ResultsJournal(dir);
    const s = new ResultStore({ ttlMs: 1e9, max: 1, journal, wallNow: () => 5 });
    await s.open();
    s.put('a', 'done', JSON.stringify({ job_id: 'a' }), 1, { i: 'a' });
    s.put('b', 'done', JSON.stringify({ job_id: 'b' }), 2, { i: 'b' });
    expect(s.inMemory).toBe(1);
    expect(s.size).toBe(2);
    const ra = s.record('a')!;
    expect(ra.json).toBeUndefined();
    expect(ra.hash).toBe(instanceHash({ i: 'a' }));
    expect(await s.json('a', ra)).toBe(JSON.stringify({ job_id: 'a' }));
    await journal.close();
    const again = new ResultStore({ ttlMs: 1e9, max: 1, journal: new ResultsJournal(dir), wallNow: () => 5 });
    await again.open();
    expect(again.inMemory).toBe(1);
    expect(again.size).toBe(2);
    expect(again.record('b')?.json).toBe(JSON.stringify({ job_id: 'b' }));
    expect(await again.json('a', again.record('a')!)).toBe(JSON.stringify({ job_id: 'a' }));
    // without a journal a record with no JSON has nothing to answer with
    expect(await new ResultStore({ ttlMs: 1, max: 1, wallNow: () => 0 }).json('a', { state: 'done', endedAt: 0 })).toBeUndefined();
  });
});

describe('intake', () => {
  const registry = new HandlerRegistry([
    handler,
    { ...handler, name: 'checked', checkInstance: (i: any) => (i.n > 5 ? { ...i, n: 5 } : undefined) } as AgentHandler<any>,
  ]);

  it('resolves the handler, validates the instance with its schema and keeps what checkInstance returns', async () => {
    const a = await admit({ instance: { data_source: 'unit', instance_id: 3, extra: 'kept' }, job_id: 'j' }, registry);
    expect(a.handler.name).toBe('unit');
    expect(a.instance).toEqual({ data_source: 'unit', instance_id: 3, extra: 'kept', n: 1 });
    expect((await admit({ instance: { data_source: 'checked', n: 9 } }, registry)).instance).toMatchObject({ n: 5 });
    expect((await admit({ instance: { data_source: 'checked', n: 2 } }, registry)).instance).toMatchObject({ n: 2 });
    const ignored: string[] = [];
    await admit({ instance: { data_source: 'unit' }, stray: 1, job_id: 'k' }, registry, admissionEnv(), (k) => ignored.push(k));
    expect(ignored).toEqual(['stray']);
    // Without a listener, stray keys are dropped all the same.
    expect((await admit({ instance: { data_source: 'unit' }, stray: 1 }, registry)).request).not.toHaveProperty('stray');
  });

  it('names the handlers when data_source names none, and says what a missing one means', async () => {
    const e1 = await admit({ instance: { data_source: 'nope' } }, registry).catch((e: RaasError) => e);
    expect([e1.code, e1.message]).toEqual([
      'unknown_data_source',
      'instance.data_source "nope" names no handler: use one of "checked", "unit"',
    ]);
    const e2 = await admit({ instance: {} }, registry).catch((e: RaasError) => e);
    expect(e2.message).toBe(
      'instance.data_source is missing, which means "swebench" (as in ProRL), and no handler has that name: use one of "checked", "unit"',
    );
    expect((await admit({ instance: { task: 'unit' } }, registry)).handler.name).toBe('unit');
  });

  it('turns schema issues, a throwing schema and a failing checkInstance into invalid_instance naming the field', async () => {
    const e = await admit({ instance: { data_source: 'unit', n: 'x', m: 3 } }, registry).catch((x: RaasError) => x);
    expect(e.code).toBe('invalid_instance');
    expect(e.message).toBe(
      'unit instance: instance.n: Invalid input: expected number, received string; instance.m: Invalid input: expected string, received number',
    );
    const throwing = new HandlerRegistry([
      {
        ...handler,
        name: 'throws',
        instance: {
          '~standard': {
            version: 1,
            vendor: 'x',
            validate: () => {
              throw new Error('schema exploded');
            },
          },
        },
      } as never,
    ]);
    const t = await admit({ instance: { data_source: 'throws' } }, throwing).catch((x: RaasError) => x);
    expect([t.code, t.message]).toEqual(['invalid_instance', 'throws instance: schema exploded']);
    expect((t.cause as Error).message).toBe('schema exploded'); // the original stays attached for the log
    const asyncSchema = new HandlerRegistry([
      {
        ...handler,
        name: 'async',
        instance: {
          '~standard': { version: 1, vendor: 'x', validate: async (v: unknown) => ({ value: { ...(v as object), async: true } }) },
        },
      } as never,
    ]);
    expect((await admit({ instance: { data_source: 'async' } }, asyncSchema)).instance).toMatchObject({ async: true });
    const own = new RaasError('invalid_instance', 'repo not found: mount it');
    const checks = new HandlerRegistry([
      {
        ...handler,
        name: 'own',
        checkInstance: () => {
          throw own;
        },
      },
      {
        ...handler,
        name: 'plain',
        checkInstance: async () => {
          throw new Error('disk too small');
        },
      },
    ] as never);
    expect(await admit({ instance: { data_source: 'own' } }, checks).catch((x) => x)).toBe(own);
    const p = await admit({ instance: { data_source: 'plain' } }, checks).catch((x: RaasError) => x);
    expect([p.code, p.message]).toEqual(['invalid_instance', 'plain instance: disk too small']);
    expect((p.cause as Error).message).toBe('disk too small');
  });

  it('admissionEnv reads data_dirs and disk_mb, and falls back to the defaults for a section that does not parse', () => {
    const env = admissionEnv({ data_dirs: ['/data'], disk_mb: 2 });
    expect(env).toEqual({ dataDirs: ['/data'], maxFileBytes: 2 * 1024 * 1024 });
    expect(admissionEnv({ disk_mb: 'lots' })).toEqual(admissionEnv());
  });

  it('instanceHash tells instances apart and is stable', () => {
    expect(instanceHash({ a: 1 })).toBe(instanceHash({ a: 1 }));
    expect(instanceHash({ a: 1 })).not.toBe(instanceHash({ a: 2 }));
    expect(instanceHash({ a: 1 })).toHaveLength(16);
  });
});

describe('stage sandboxes', () => {
  it('a sandbox that opens after its stage ended is closed at once; closeAll keeps the runtime and survives a failing close', async () => {
    const opened: TrackedSandbox[] = [];
    const runtime = {
      open: async () => {
        const s = new TrackedSandbox();
        opened.push(s);
        return s;
      },
    } as unknown as LazySandboxRuntime;
    const ss = new StageSandboxes(runtime, { signal: new AbortController().signal });
    const keep = await ss.open({} as never);
    const other = await ss.open({} as never);
    other.close = async () => {
      throw new Error('already gone');
    };
    expect(ss.count).toBe(2);
    await ss.closeAll(keep);
    expect(keep.closed).toBe(0);
    const late = ss.open({} as never);
    await expect(late).rejects.toThrow('the stage ended before the sandbox opened');
    expect(opened.at(-1)!.closed).toBe(1);
    const ended = new StageSandboxes(runtime, { signal: new AbortController().signal });
    ended.end();
    await expect(ended.open({} as never)).rejects.toMatchObject({ code: 'cancelled' });
  });

  it('a closed runtime refuses new sandboxes; describe() is null before the sandbox settings were read', async () => {
    const rt = new LazySandboxRuntime({}, { debug() {}, info() {}, warn() {}, error() {} } as never);
    expect(rt.describe()).toBeNull();
    await rt.close();
    await expect(rt.open({} as never)).rejects.toMatchObject({ code: 'sandbox_unavailable', message: 'the server is shutting down' });
  });
});
