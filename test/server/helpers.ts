import { z } from 'zod';
import { sleep, type Clock } from '../../src/util/clock.js';
import type { AgentHandler, RunResult } from '../../src/server/handlers/types.js';
import type { Sandbox } from '../../src/server/sandbox/types.js';

/** A clock the test drives by hand: `advance(ms)` fires due timers in order, letting promises settle between. */
export class ManualClock implements Clock {
  private t = 0;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();
  now(): number {
    return this.t;
  }
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }
  /** Timers set and not yet fired or cleared. */
  get pending(): number {
    return this.timers.size;
  }
  /** Moves time forward in `step` increments, running due timers and flushing I/O between steps. */
  async advance(ms: number, step = 50): Promise<void> {
    const end = this.t + ms;
    while (this.t < end) {
      this.t = Math.min(end, this.t + step);
      for (;;) {
        const due = [...this.timers.entries()].filter(([, v]) => v.at <= this.t).sort((a, b) => a[1].at - b[1].at || a[0] - b[0]);
        if (due.length === 0) break;
        for (const [id, v] of due) {
          this.timers.delete(id);
          v.fn();
        }
        await flush();
      }
      await flush();
    }
  }
}

/** Backend clients for pipeline tests that never call a model: the pool has an address, generation throws. */
export const modelLessClients = (address: string) => ({
  address,
  api: 'vllm' as const,
  generate: async () => {
    throw new Error('no model in these tests');
  },
  maxModelLen: async () => undefined,
});

/** A job's result text (Submission.finished), parsed. */
export const parseResult = async (finished: Promise<string>): Promise<any> => JSON.parse(await finished);

/** Lets pending promise chains and I/O callbacks run. */
export async function flush(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

/** A runtime sandbox stand-in: a real object with the Sandbox surface that records whether it was closed. */
export class TrackedSandbox implements Sandbox {
  static opened: TrackedSandbox[] = [];
  /** When set, close() waits for it (a slow sandbox teardown the test releases by hand). */
  static closeGate: Promise<void> | undefined;
  readonly id = `tracked-${TrackedSandbox.opened.length}`;
  readonly workspace = '/nonexistent';
  closed = 0;
  constructor() {
    TrackedSandbox.opened.push(this);
  }
  async bash() {
    return { output: '', exit_code: 0, timed_out: false, truncated: false };
  }
  async python() {
    return { stdout: '', stderr: '', timed_out: false };
  }
  async edit() {
    return { ok: true, output: '' };
  }
  async close(): Promise<void> {
    this.closed++;
    await TrackedSandbox.closeGate;
  }
}

/** Instance of the scripted `staged` test handler: how long each stage takes, which one throws, which one ignores its signal. */
export const StagedInstance = z.looseObject({
  data_source: z.string().optional(),
  instance_id: z.union([z.string(), z.number()]).optional(),
  init_ms: z.number().default(0),
  run_ms: z.number().default(0),
  eval_ms: z.number().default(0),
  fail: z.enum(['init', 'run', 'eval']).optional(),
  /** This stage ignores its AbortSignal and never returns. */
  hang: z.enum(['init', 'run', 'eval']).optional(),
  runtime: z.boolean().default(false),
  reward: z.number().default(1),
});
export type StagedInstance = z.infer<typeof StagedInstance>;

/** Every stage call, in order, as `<job id>:<stage>`: the lifecycle tests read it. */
export const stageLog: string[] = [];

/**
 * A scripted handler for pipeline tests: each stage sleeps on the injected clock (honouring the
 * signal), throws, or hangs as its instance says; exception hooks return recognisable fallbacks.
 */
export function stagedHandler(clock: Clock, name = 'staged'): AgentHandler<StagedInstance> {
  const step = async (
    stage: 'init' | 'run' | 'eval',
    ctx: { job: { id: string; instance: StagedInstance }; signal: AbortSignal },
  ): Promise<void> => {
    stageLog.push(`${ctx.job.id}:${stage}`);
    const i = ctx.job.instance;
    if (i.hang === stage) await new Promise(() => undefined);
    // Zero means "at once": a sleep on the hand-driven clock would wait for the test to advance it.
    if (i[`${stage}_ms`] > 0) await sleep(i[`${stage}_ms`], ctx.signal, clock);
    else ctx.signal.throwIfAborted();
    if (i.fail === stage) throw new Error(`${stage} failed on purpose`);
  };
  return {
    name,
    instance: StagedInstance,
    async init(ctx) {
      await step('init', ctx);
      return ctx.job.instance.runtime ? { runtime: new TrackedSandbox(), metadata: { stage: 'init' } } : { metadata: { stage: 'init' } };
    },
    async run(ctx): Promise<RunResult> {
      const partial: RunResult = {
        messages: [{ role: 'assistant', content: `saw runtime=${ctx.runtime ? 'yes' : 'no'} init=${JSON.stringify(ctx.init.metadata)}` }],
        tokens: { prompt_ids: [1, 2], response_ids: [3], response_mask: [1], logprobs: [-0.5] },
        finish_reason: 'finish',
        artifacts: { answer: 42 },
        num_turns: 1,
      };
      try {
        await step('run', ctx);
      } catch (err) {
        // Like runAgent: on abort, hand back the trajectory so far.
        if (ctx.signal.aborted) return { ...partial, finish_reason: 'cancelled' };
        throw err;
      }
      return partial;
    },
    async eval(ctx) {
      await step('eval', ctx);
      return { reward: ctx.job.instance.reward, resolved: ctx.run.artifacts.answer === 42, details: { run_finish: ctx.run.finish_reason } };
    },
    initException: (_ctx, err) => ({ error: `init fallback: ${(err as Error).message}` }),
    runException: (_ctx, err) => ({ error: `run fallback: ${(err as Error).message}` }),
    evalException: (_ctx, err) => ({ error: `eval fallback: ${(err as Error).message}`, reward: -1 }),
    finalResult: () => ({ filter: false }),
  };
}

/** POSTs JSON and returns status, headers and parsed body. */
export async function post(
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: body === undefined ? headers : { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

export async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(url, { headers });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    /* Prometheus text */
  }
  return { status: res.status, body, text };
}
