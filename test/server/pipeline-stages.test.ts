// What one stage of a job owes the rest, driven through the Pipeline on a hand-driven clock with
// handlers scripted per test: the sandboxes a stage opens (ctx.sandboxes) are closed when it ends and
// before the job moves on, except the runtime INIT hands to RUN; an abandoned stage answers at once
// and its closes go on in the background, which stop() waits for; a cancel that lands while a stage's
// sandboxes close still ends the job; the error, traceback and hooks of a failed stage; the timers a
// stage leaves; a paused server's hold stops the job's clock. The sandboxes are TrackedSandbox
// objects (real objects that count their closes), handed out by the pipeline's own sandbox opener.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { CancelledError } from '../../src/protocol/errors.js';
import { LlmPoolConfig, ServerConfig } from '../../src/protocol/config-server.js';
import { ProcessRequest } from '../../src/protocol/process.js';
import { HandlerRegistry } from '../../src/server/handlers/registry.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { BackendPool, gateOf } from '../../src/server/llm/pool.js';
import { Job, type Stage } from '../../src/server/pipeline/job.js';
import { Pipeline, type PipelineObserver } from '../../src/server/pipeline/pipeline.js';
import { fallbackRun } from '../../src/server/pipeline/result.js';
import { LazySandboxRuntime } from '../../src/server/pipeline/sandboxes.js';
import { StageLimiter } from '../../src/server/pipeline/limiter.js';
import { runJob, type LifecycleEnv } from '../../src/server/pipeline/lifecycle.js';
import { PausableTimer } from '../../src/server/pipeline/timer.js';
import { sleep } from '../../src/util/clock.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { ManualClock, TrackedSandbox, flush, stagedHandler, modelLessClients, parseResult } from './helpers.js';

const Inst = z.looseObject({ data_source: z.string() });
type Ctx = any;

/** A handler whose stages the test writes; the defaults return at once. */
function scripted(
  name: string,
  over: Partial<Record<'init' | 'run' | 'eval', (ctx: Ctx) => Promise<unknown>>> & Partial<AgentHandler<any>> = {},
): AgentHandler<any> {
  return {
    name,
    instance: Inst,
    init: async () => ({}),
    run: async () => fallbackRun('finish'),
    eval: async () => ({ reward: 1, resolved: true }),
    ...over,
  } as AgentHandler<any>;
}

interface Warn {
  obj: Record<string, unknown>;
  msg: string;
}

interface Built {
  p: Pipeline;
  clock: ManualClock;
  warns: Warn[];
  debugs: Warn[];
  pool: BackendPool;
}

function build(handlers: AgentHandler<any>[], over: Record<string, unknown> = {}, observer: PipelineObserver | undefined = {}): Built {
  const clock = new ManualClock();
  const config = ServerConfig.parse({ workers: { init: 2, run: 2, eval: 2 }, cancel_grace_ms: 100, ...over });
  const pool = new BackendPool(LlmPoolConfig.parse({}), modelLessClients);
  pool.add('http://127.0.0.1:9');
  const warns: Warn[] = [];
  const debugs: Warn[] = [];
  const p = new Pipeline({
    config,
    registry: new HandlerRegistry([stagedHandler(clock), ...handlers]),
    pool,
    tokenizer: qwen3Tokenizer,
    clock,
    log: {
      debug: (obj: any, msg?: string) => debugs.push({ obj, msg: msg ?? '' }),
      info() {},
      warn: (obj: any, msg?: string) => warns.push({ obj, msg: msg ?? '' }),
      error() {},
    },
    observer,
  });
  // The sandboxes handlers open through ctx.sandboxes: objects that count their closes.
  p.sandboxes.open = async () => new TrackedSandbox();
  return { p, clock, warns, debugs, pool };
}

const settled = (p: Promise<unknown>) => {
  const s = { done: false };
  void p.then(
    () => (s.done = true),
    () => (s.done = true),
  );
  return s;
};

describe('the sandboxes of a stage', () => {
  let b: Built;
  beforeEach(() => {
    TrackedSandbox.opened.length = 0;
    TrackedSandbox.closeGate = undefined;
  });
  afterEach(async () => {
    TrackedSandbox.closeGate = undefined;
    await b?.p.close();
  });

  it('are closed when the stage ends, except the runtime INIT returns, which lives until RUN ended; one opener per stage however often it is read', async () => {
    const seen: string[] = [];
    const h = scripted('boxes', {
      async init(ctx) {
        const a = await ctx.sandboxes.open({});
        const rt = await ctx.sandboxes.open({}); // a second read of ctx.sandboxes: the same opener
        seen.push(`init: ${'run' in ctx} ${'llm' in ctx}`);
        return { runtime: rt, metadata: { a: a.id } };
      },
      async run(ctx) {
        const [a, rt] = TrackedSandbox.opened;
        seen.push(`run: a closed ${a!.closed}, runtime closed ${rt!.closed}, ctx.runtime is it ${ctx.runtime === rt}`);
        await ctx.sandboxes.open({});
        return fallbackRun('finish');
      },
      async eval(ctx) {
        const [, rt, c] = TrackedSandbox.opened;
        seen.push(`eval: runtime closed ${rt!.closed}, run's closed ${c!.closed}, no runtime ${ctx.runtime === undefined}`);
        return { reward: 1, resolved: true };
      },
    });
    b = build([h]);
    const r = await parseResult((await b.p.submit({ instance: { data_source: 'boxes' } })).finished);
    expect(r.critical_error).toBeNull();
    expect(seen).toEqual([
      'init: false false',
      'run: a closed 1, runtime closed 0, ctx.runtime is it true',
      "eval: runtime closed 1, run's closed 1, no runtime true",
    ]);
    expect(TrackedSandbox.opened.map((s) => s.closed)).toEqual([1, 1, 1]);
  });

  it('an INIT that returns nothing hands RUN an empty init and no runtime', async () => {
    let init: unknown = 'unset';
    const h = scripted('bare', {
      init: async () => undefined,
      async run(ctx) {
        init = ctx.init;
        expect(ctx.runtime).toBeUndefined();
        return fallbackRun('finish');
      },
    });
    b = build([h]);
    const r = await parseResult((await b.p.submit({ instance: { data_source: 'bare' } })).finished);
    expect(r.critical_error).toBeNull();
    expect(init).toEqual({});
  });

  it("the next stage starts, and the job answers, only once the stage's sandboxes are closed", async () => {
    const open = (stage: 'init' | 'eval') =>
      scripted(`close-${stage}`, {
        [stage]: async (ctx: Ctx) => {
          await ctx.sandboxes.open({});
          return stage === 'init' ? {} : { reward: 1, resolved: true };
        },
      });
    b = build([open('init'), open('eval')]);
    for (const stage of ['init', 'eval'] as const) {
      TrackedSandbox.opened.length = 0;
      let release!: () => void;
      TrackedSandbox.closeGate = new Promise<void>((r) => (release = r));
      const j = await b.p.submit({ instance: { data_source: `close-${stage}` }, job_id: stage });
      const s = settled(j.finished);
      await flush();
      expect(TrackedSandbox.opened.map((x) => x.closed)).toEqual([1]); // closing, not yet closed
      expect(s.done).toBe(false);
      expect(JSON.parse(await b.p.get(stage)).state).toBe(stage); // RUN, or the answer, waits
      release();
      expect((await parseResult(j.finished)).critical_error).toBeNull();
    }
  });

  it('a cancel that lands while the stage closes its sandboxes ends the job as cancelled; the next stage never runs', async () => {
    const ran: string[] = [];
    const h = scripted('latecancel', {
      async init(ctx) {
        await ctx.sandboxes.open({});
        return {};
      },
      async run() {
        ran.push('run');
        return fallbackRun('finish');
      },
    });
    b = build([h]);
    let release!: () => void;
    TrackedSandbox.closeGate = new Promise<void>((r) => (release = r));
    const j = await b.p.submit({ instance: { data_source: 'latecancel' }, job_id: 'lc' });
    await flush();
    expect(TrackedSandbox.opened[0]!.closed).toBe(1); // INIT returned; its sandbox is closing
    expect(b.p.cancel('lc').cancelled).toBe(true);
    release();
    const r = await parseResult(j.finished);
    expect(r).toMatchObject({ critical_error: 'cancelled', finish_reason: 'cancelled', num_turns: 0, messages: [] });
    expect(ran).toEqual([]);
  });

  it('an EVAL that returned, cancelled while its sandboxes close, ends the job as cancelled, not done', async () => {
    const h = scripted('evalcancel', {
      async eval(ctx) {
        await ctx.sandboxes.open({});
        return { reward: 1, resolved: true };
      },
    });
    b = build([h]);
    let release!: () => void;
    TrackedSandbox.closeGate = new Promise<void>((r) => (release = r));
    const j = await b.p.submit({ instance: { data_source: 'evalcancel' }, job_id: 'ec' });
    await flush();
    expect(JSON.parse(await b.p.get('ec')).state).toBe('eval');
    b.p.cancel('ec');
    release();
    expect(await parseResult(j.finished)).toMatchObject({ critical_error: 'cancelled', reward: 0, resolved: false });
  });

  it('an INIT that returns a runtime after its cancel hands over nothing: the runtime is closed before the job answers', async () => {
    const h = scripted('deaf', {
      async init(ctx) {
        const s = await ctx.sandboxes.open({});
        await sleep(50, undefined, b.clock); // ignores its signal, but returns within the grace
        return { runtime: s, metadata: { late: true } };
      },
    });
    b = build([h]);
    let release!: () => void;
    TrackedSandbox.closeGate = new Promise<void>((r) => (release = r));
    const j = await b.p.submit({ instance: { data_source: 'deaf' }, job_id: 'd' });
    await flush();
    b.p.cancel('d');
    await b.clock.advance(60);
    const s = settled(j.finished);
    await flush();
    expect(TrackedSandbox.opened[0]!.closed).toBe(1);
    expect(s.done).toBe(false); // the close of the would-be runtime is awaited
    release();
    const r = await parseResult(j.finished);
    expect(r).toMatchObject({ critical_error: 'cancelled', messages: [], num_turns: 0, finish_reason: 'cancelled' });
    expect(TrackedSandbox.opened[0]!.closed).toBe(1);
  });

  it('an abandoned stage answers at once; its sandboxes and runtime close in the background, and stop() waits for them', async () => {
    const h = scripted('hangs', {
      async init(ctx) {
        return { runtime: await ctx.sandboxes.open({}) };
      },
      async run(ctx) {
        await ctx.sandboxes.open({});
        return new Promise(() => undefined); // ignores its signal for good
      },
    });
    b = build([h]);
    const j = await b.p.submit({ instance: { data_source: 'hangs' }, job_id: 'h' });
    await flush();
    expect(TrackedSandbox.opened).toHaveLength(2);
    let release!: () => void;
    TrackedSandbox.closeGate = new Promise<void>((r) => (release = r));
    b.p.cancel('h');
    await b.clock.advance(150);
    const r = await parseResult(j.finished); // answered while both closes still wait
    expect(r).toMatchObject({ critical_error: 'cancelled', messages: [], num_turns: 0, finish_reason: 'cancelled' });
    expect(TrackedSandbox.opened.map((s) => s.closed)).toEqual([1, 1]);
    const stopping = settled(b.p.stop());
    await flush();
    expect(stopping.done).toBe(false);
    release();
    await flush();
    expect(stopping.done).toBe(true);
  });

  it('a sandbox an abandoned stage opens afterwards is closed at once and its open fails as cancelled', async () => {
    let go!: () => void;
    const late = new Promise<void>((r) => (go = r));
    let outcome: unknown;
    const h = scripted('laggard', {
      async run(ctx) {
        await late; // ignores its signal
        outcome = await ctx.sandboxes.open({}).then(
          () => 'opened',
          (e: { code?: string; message: string }) => `${e.code}: ${e.message}`,
        );
        return fallbackRun('finish');
      },
    });
    b = build([h]);
    const j = await b.p.submit({ instance: { data_source: 'laggard' }, job_id: 'l' });
    await flush();
    b.p.cancel('l');
    await b.clock.advance(150);
    expect((await parseResult(j.finished)).critical_error).toBe('cancelled');
    go();
    await flush();
    expect(outcome).toBe('cancelled: the stage ended before the sandbox opened');
    expect(TrackedSandbox.opened.map((s) => s.closed)).toEqual([1]);
  });

  it('a job cancelled while it waits for RUN closes the runtime its INIT returned', async () => {
    const h = scripted('queued', {
      async init(ctx) {
        return { runtime: await ctx.sandboxes.open({}) };
      },
    });
    b = build([h], { workers: { init: 2, run: 1, eval: 1 } });
    const blocker = await b.p.submit({ instance: { data_source: 'staged', run_ms: 1000 }, job_id: 'busy' });
    await flush();
    const j = await b.p.submit({ instance: { data_source: 'queued' }, job_id: 'q' });
    await flush();
    expect(JSON.parse(await b.p.get('q')).state).toBe('queued_run');
    b.p.cancel('q');
    expect((await parseResult(j.finished)).critical_error).toBe('cancelled');
    await flush();
    expect(TrackedSandbox.opened[0]!.closed).toBe(1);
    await b.clock.advance(1000);
    await blocker.finished;
  });
});

describe('a stage that fails or ends', () => {
  let b: Built;
  afterEach(async () => {
    await b?.p.close();
  });

  it('a RUN that throws a non-Error keeps its text as error and traceback; an Error without a stack gives "Name: message"', async () => {
    const text = scripted('text', { run: () => Promise.reject('plain words') });
    const nostack = scripted('nostack', {
      run: () => {
        const e = new RangeError('no stack here');
        e.stack = undefined;
        return Promise.reject(e);
      },
    });
    b = build([text, nostack]);
    const r1 = await parseResult((await b.p.submit({ instance: { data_source: 'text' } })).finished);
    expect(r1).toMatchObject({ critical_error: 'run', error: 'plain words', traceback: 'plain words', finish_reason: 'error' });
    const r2 = await parseResult((await b.p.submit({ instance: { data_source: 'nostack' } })).finished);
    expect(r2).toMatchObject({ critical_error: 'run', error: 'RangeError: no stack here', traceback: 'RangeError: no stack here' });
  });

  it("finalResult's patch is applied; a handler without finalResult needs none; warnings name the job and carry the error", async () => {
    const patched = scripted('patched', { finalResult: () => ({ success: false, details: { judged: 'by hand' } }) });
    const plain = scripted('plain');
    const loud = scripted('loud', {
      run: () => Promise.reject(new Error('run broke')),
      runException: () => {
        throw new Error('hook broke');
      },
      finalResult: () => {
        throw new Error('final broke');
      },
    });
    b = build([patched, plain, loud]);
    const r = await parseResult((await b.p.submit({ instance: { data_source: 'patched' }, job_id: 'pa' })).finished);
    expect(r).toMatchObject({ success: false, details: { judged: 'by hand' }, critical_error: null, reward: 1 });
    const q = await parseResult((await b.p.submit({ instance: { data_source: 'plain' }, job_id: 'pl' })).finished);
    expect(q).toMatchObject({ success: true, critical_error: null });
    expect(b.warns).toEqual([]);
    await (await b.p.submit({ instance: { data_source: 'loud' }, job_id: 'lo' })).finished;
    expect(b.warns.map((w) => [w.msg, w.obj.job, (w.obj.err as Error).message])).toEqual([
      ['loud.runException threw', 'lo', 'hook broke'],
      ['loud.finalResult threw', 'lo', 'final broke'],
    ]);
  });

  it('a failing runtime close is logged with the job and the error', async () => {
    const h = scripted('badclose', {
      async init() {
        const s = new TrackedSandbox();
        s.close = async () => {
          throw new Error('umount failed');
        };
        return { runtime: s };
      },
    });
    b = build([h]);
    const r = await parseResult((await b.p.submit({ instance: { data_source: 'badclose' }, job_id: 'bc' })).finished);
    expect(r.critical_error).toBeNull();
    expect(b.warns.map((w) => [w.msg, w.obj.job, (w.obj.err as Error).message])).toEqual([
      ['closing the runtime sandbox failed', 'bc', 'umount failed'],
    ]);
  });

  it('a stage that ends within its grace after a cancel, by returning or by throwing, leaves no timer behind', async () => {
    const slow = (fail: boolean) => async () => {
      await sleep(30, undefined, b.clock); // ignores the signal, ends within cancel_grace_ms
      if (fail) throw new Error('gave up');
      return fallbackRun('cancelled');
    };
    b = build([scripted('returns', { run: slow(false) }), scripted('throws', { run: slow(true) })]);
    for (const name of ['returns', 'throws']) {
      const j = await b.p.submit({ instance: { data_source: name }, job_id: name });
      await flush();
      b.p.cancel(name);
      // The handler's sleep, the grace and the job's timeout, besides the results sweep (result_ttl_s).
      expect(b.clock.pending).toBe(4);
      await b.clock.advance(40);
      expect((await parseResult(j.finished)).critical_error).toBe('cancelled');
      expect(b.clock.pending).toBe(1);
    }
  });

  it('without an observer, or with one that counts nothing, jobs run as usual', async () => {
    for (const observer of [undefined, {}]) {
      b = build([scripted('quiet')], {}, observer);
      const r = await parseResult((await b.p.submit({ instance: { data_source: 'quiet' } })).finished);
      expect(r).toMatchObject({ critical_error: null, reward: 1 });
      await b.p.close();
    }
  });

  it("time a paused server holds a job's model call does not count toward its timeout_s", async () => {
    const h = scripted('held', {
      async run(ctx) {
        await ctx.llm.maxModelLen(ctx.signal); // waits while generation is paused
        return fallbackRun('finish');
      },
    });
    b = build([h]);
    await gateOf(b.pool).pause('drain', 0);
    try {
      const j = await b.p.submit({ instance: { data_source: 'held' }, job_id: 'held', timeout_s: 1 });
      await b.clock.advance(3000);
      expect(JSON.parse(await b.p.get('held')).state).toBe('run');
      gateOf(b.pool).resume();
      const r = await parseResult(j.finished);
      expect(r).toMatchObject({ critical_error: null, finish_reason: 'finish', timing: { timeout_triggered: false } });
      expect(r.timing.counted_elapsed).toBeLessThan(1);
    } finally {
      gateOf(b.pool).resume();
    }
  });
});

describe('a job is never lost', () => {
  let b: Built;
  afterEach(async () => {
    await b?.p.close();
  });

  // JSON.stringify throws on a BigInt, on a cycle and on a structure nested past V8's stack; each
  // used to strand the waiters (the state was set before the answer was serialized).
  const nested = (depth: number): unknown => {
    let v: unknown = 1;
    for (let i = 0; i < depth; i++) v = [v];
    return v;
  };
  const cyclic = (): unknown => {
    const o: Record<string, unknown> = {};
    o.self = o;
    return o;
  };
  it.each([
    ['a BigInt', () => 1n],
    ['a cycle', cyclic],
    ['arrays nested 200,000 deep', () => nested(200_000)],
  ])(
    "an EVAL result holding %s answers every waiter with critical_error, the serializer's message and reward 0, and leaves nothing counted",
    async (_what, bad) => {
      b = build([scripted('bad', { eval: async () => ({ reward: 1, resolved: true, details: { answer: bad() } }) })]);
      const s = await b.p.submit({ instance: { data_source: 'bad' }, job_id: 'lost' });
      const attached = await b.p.submit({ instance: { data_source: 'bad' }, job_id: 'lost', attach: true });
      const r = await parseResult(s.finished);
      expect(r.critical_error).toBe('eval');
      expect(r.reward).toBe(0);
      expect(r.error).toMatch(/the result could not be serialized \(.+\)/);
      expect(r.job_id).toBe('lost');
      expect(await attached.finished).toBe(await s.finished);
      expect(b.p.status()).toMatchObject({ jobs: 0, in_stage: 0, queued: 0 });
      expect(JSON.parse(await b.p.get('lost'))).toMatchObject({ state: 'done', result: { critical_error: 'eval' } });
    },
  );
});

describe('runJob on its own', () => {
  function env() {
    const clock = new ManualClock();
    const config = ServerConfig.parse({ cancel_grace_ms: 100, workers: { init: 1, run: 1, eval: 1 } });
    const pool = new BackendPool(LlmPoolConfig.parse({}), modelLessClients);
    pool.add('http://127.0.0.1:9');
    const background: Promise<unknown>[] = [];
    const log = { debug() {}, info() {}, warn() {}, error() {} };
    const e: LifecycleEnv = {
      config,
      pool,
      tokenizer: qwen3Tokenizer,
      clock,
      log,
      limiters: { init: new StageLimiter('init', 1), run: new StageLimiter('run', 1), eval: new StageLimiter('eval', 1) },
      sandboxes: new LazySandboxRuntime({}, log),
      background: (p) => background.push(p),
    };
    return { e, clock, background };
  }
  function job(h: AgentHandler<any>, clock: ManualClock): Job {
    const request = ProcessRequest.parse({ instance: { data_source: h.name }, job_id: 'u' });
    const j = new Job('u', 'u', request, h, request.instance, 0);
    j.timer = new PausableTimer(60_000, clock, () => undefined);
    return j;
  }

  it('a job aborted before its first stage ends as cancelled without running a stage', async () => {
    const { e, clock } = env();
    const calls: Stage[] = [];
    const j = job(
      scripted('x', {
        init: async () => {
          calls.push('init');
          return {};
        },
      }),
      clock,
    );
    j.abort(new CancelledError('x'));
    await expect(runJob(j, e)).resolves.toEqual({ state: 'cancelled' });
    expect([calls, j.state]).toEqual([[], 'queued_init']);
  });

  it('a job waiting for a busy stage leaves the queue when its signal aborts, and the slot goes to the next', async () => {
    const { e, clock } = env();
    const release = await e.limiters.run.acquire(new AbortController().signal);
    const calls: string[] = [];
    const a = job(
      scripted('x', {
        run: async () => {
          calls.push('run a');
          return fallbackRun('finish');
        },
      }),
      clock,
    );
    const pa = runJob(a, e);
    await flush();
    expect([a.state, e.limiters.run.depth]).toEqual(['queued_run', 1]);
    a.abort(new CancelledError('x'));
    await expect(pa).resolves.toEqual({ state: 'cancelled' });
    expect([calls, e.limiters.run.depth, e.limiters.run.busy]).toEqual([[], 0, 1]);
    release();
    expect(e.limiters.run.busy).toBe(0);
  });

  it('runs INIT, RUN and EVAL in order and answers the eval result; each stage holds its slot only while it runs', async () => {
    const { e, clock } = env();
    const seen: string[] = [];
    const busy = () => `${e.limiters.init.busy}${e.limiters.run.busy}${e.limiters.eval.busy}`;
    const j = job(
      scripted('x', {
        init: async () => {
          seen.push(`init ${busy()}`);
          return {};
        },
        run: async () => {
          seen.push(`run ${busy()}`);
          return fallbackRun('finish');
        },
        eval: async () => {
          seen.push(`eval ${busy()}`);
          return { reward: 0.5, resolved: false };
        },
      }),
      clock,
    );
    await expect(runJob(j, e)).resolves.toEqual({ state: 'done', eval: { reward: 0.5, resolved: false } });
    expect(seen).toEqual(['init 100', 'run 010', 'eval 001']);
    expect(busy()).toBe('000');
    expect(j.state).toBe('eval');
  });
});

describe('Pipeline bookkeeping', () => {
  let b: Built;
  afterEach(async () => {
    vi.useRealTimers();
    await b?.p.close();
  });

  it('counts jobs waiting in every queue and working in every stage; a cancel takes a job out of the RUN or EVAL queue at once', async () => {
    b = build([], { workers: { init: 1, run: 1, eval: 1 } });
    const st = (i: Record<string, unknown>, id: string) => b.p.submit({ instance: { data_source: 'staged', ...i }, job_id: id });
    const e1 = await st({ eval_ms: 1000 }, 'e1');
    const e2 = await st({ eval_ms: 1000 }, 'e2');
    await flush(); // e1 in EVAL, e2 waits for EVAL
    const r1 = await st({ run_ms: 1000 }, 'r1');
    const r2 = await st({ run_ms: 1000 }, 'r2');
    await flush(); // r1 in RUN, r2 waits for RUN
    const i1 = await st({ init_ms: 1000 }, 'i1');
    const i2 = await st({ init_ms: 1000 }, 'i2');
    await flush();
    expect(b.p.status()).toMatchObject({ jobs: 6, init: 1, run: 1, eval: 1, in_stage: 3, queued: 3, queues: { init: 1, run: 1, eval: 1 } });
    expect(b.p.queued()).toBe(3);
    b.p.cancel('r2');
    b.p.cancel('e2');
    // The queues let go at once (the abort event); the jobs end as soon as their lifecycles see it.
    expect(b.p.status()).toMatchObject({ queued: 1, queues: { init: 1, run: 0, eval: 0 } });
    await flush();
    expect(b.p.status()).toMatchObject({ jobs: 4, queued: 1, queues: { init: 1, run: 0, eval: 0 } });
    expect((await parseResult(r2.finished)).critical_error).toBe('cancelled');
    expect((await parseResult(e2.finished)).critical_error).toBe('cancelled');
    await b.clock.advance(3000);
    for (const j of [e1, r1, i1, i2]) expect((await parseResult(j.finished)).critical_error).toBeNull();
  });

  it("queued time is the job's life less its stage time, from when it was submitted", async () => {
    b = build([]);
    await b.clock.advance(5000);
    const j = await b.p.submit({ instance: { data_source: 'staged', init_ms: 100 } });
    await b.clock.advance(200);
    const r = await parseResult(j.finished);
    expect(r.timing).toMatchObject({ init_s: 0.1, queued_s: 0, others_time: 0 });
  });

  it('stop() answers once every job it cancelled has answered; a /start during a /stop wins', async () => {
    b = build([]);
    const j = await b.p.submit({ instance: { data_source: 'staged', hang: 'run' }, job_id: 'st' });
    await flush();
    const stopping = b.p.stop();
    const s = settled(stopping);
    await b.clock.advance(50);
    expect(s.done).toBe(false); // the hung RUN has cancel_grace_ms to hand back
    b.p.start();
    await b.clock.advance(100);
    await stopping;
    expect((await parseResult(j.finished)).critical_error).toBe('cancelled');
    expect(b.p.state).toBe('running');
  });

  it('a job the client cancelled is still known after a /stop caught it; one only /stop cancelled is forgotten', async () => {
    b = build([]);
    const a = await b.p.submit({ instance: { data_source: 'staged', hang: 'run' }, job_id: 'mine' });
    const c = await b.p.submit({ instance: { data_source: 'staged', hang: 'run' }, job_id: 'theirs' });
    await flush();
    b.p.cancel('mine');
    const stopping = b.p.stop();
    await b.clock.advance(150);
    await stopping;
    await Promise.all([a.finished, c.finished]);
    expect(JSON.parse(await b.p.get('mine'))).toMatchObject({ state: 'cancelled', result: { critical_error: 'cancelled' } });
    expect(await b.p.get('theirs').catch((e: { code: string }) => e.code)).toBe('job_not_found');
  });

  it('unknown /process keys are counted each time and logged once per key', async () => {
    const keys: string[] = [];
    b = build([], {}, { ignoredKey: (k) => keys.push(k) });
    const body = { instance: { data_source: 'staged' }, temperature: 1, extra: 2 };
    await (await b.p.submit(body)).finished;
    await (await b.p.submit(body)).finished;
    expect(keys).toEqual(['temperature', 'extra', 'temperature', 'extra']);
    expect(b.debugs.map((d) => d.obj.key)).toEqual(['temperature', 'extra']);
    expect(b.debugs[0]!.msg).toMatch(/^ignored an unknown top-level \/process key/);
    await b.p.close();
    // At most 1000 distinct keys are logged; none without an observer is lost either.
    b = build([], {}, undefined);
    const many = Object.fromEntries(Array.from({ length: 1005 }, (_, i) => [`k${i}`, i]));
    await (await b.p.submit({ instance: { data_source: 'staged' }, ...many })).finished;
    await (await b.p.submit({ instance: { data_source: 'staged' }, k1004: 0, k0: 0 })).finished;
    expect(b.debugs).toHaveLength(1000);
  });

  it('finished results past result_ttl_s leave memory even when nobody asks for them; close() stops the sweep', async () => {
    let wall = 1_000_000;
    const clock = new ManualClock();
    const config = ServerConfig.parse({ result_ttl_s: 30 });
    const pool = new BackendPool(LlmPoolConfig.parse({}), modelLessClients);
    pool.add('http://127.0.0.1:9');
    const p = new Pipeline({
      config,
      registry: new HandlerRegistry([stagedHandler(clock)]),
      pool,
      tokenizer: qwen3Tokenizer,
      clock,
      wallNow: () => wall,
      log: { debug() {}, info() {}, warn() {}, error() {} },
    });
    b = { p, clock, warns: [], debugs: [], pool };
    await (await p.submit({ instance: { data_source: 'staged' }, job_id: 'old' })).finished;
    const store = {
      get size() {
        return p.footprint().kept;
      },
    };
    expect(store.size).toBe(1);
    wall += 31_000;
    // The sweep runs on the pipeline's clock, every min(60 s, result_ttl_s).
    // (Armed at construction, clock time 0; the job itself took no clock time.)
    await clock.advance(29_999 - clock.now(), 5_000);
    expect(store.size).toBe(1);
    await clock.advance(1, 1);
    expect(store.size).toBe(0);
    expect(clock.pending).toBe(1);
    await p.close();
    expect(clock.pending).toBe(0);
  });
});
