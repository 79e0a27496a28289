// What a job makes only when its handler asks for it: the AbortSignal (ctx.signal) and the LLM
// session with its backend (ctx.llm). A handler that reads neither still gets cancelled, timed out
// and answered as before; one that reads them gets the same signal and session as it always did.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CancelledError } from '../../src/protocol/errors.js';
import type { JobEvent } from '../../src/protocol/events.js';
import type { JobState } from '../../src/protocol/process.js';
import { JobIndex } from '../../src/server/console/job-index.js';
import { LlmPoolConfig, ServerConfig } from '../../src/protocol/config-server.js';
import { HandlerRegistry } from '../../src/server/handlers/registry.js';
import type { AgentHandler, RunContext } from '../../src/server/handlers/types.js';
import { BackendPool } from '../../src/server/llm/pool.js';
import { JobAbort } from '../../src/server/pipeline/abort.js';
import { Pipeline } from '../../src/server/pipeline/pipeline.js';
import { fallbackRun } from '../../src/server/pipeline/result.js';
import { systemClock } from '../../src/util/clock.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { modelLessClients } from './helpers.js';

const Inst = z.looseObject({ data_source: z.string() });

function handler(name: string, run: (ctx: RunContext<unknown>) => Promise<unknown>): AgentHandler<unknown> {
  return {
    name,
    instance: Inst,
    init: async () => ({}),
    run: run as AgentHandler<unknown>['run'],
    eval: async () => ({ reward: 1, resolved: true }),
  };
}

function build(handlers: AgentHandler<unknown>[]): { p: Pipeline; pool: BackendPool } {
  const pool = new BackendPool(LlmPoolConfig.parse({}), modelLessClients);
  pool.add('http://127.0.0.1:9');
  const log = { debug() {}, info() {}, warn() {}, error() {} };
  const p = new Pipeline({
    config: ServerConfig.parse({ workers: { init: 2, run: 2, eval: 2 } }),
    registry: new HandlerRegistry(handlers),
    pool,
    tokenizer: qwen3Tokenizer,
    clock: systemClock,
    log,
  });
  return { p, pool };
}

describe('the LLM session is opened on first read of ctx.llm', () => {
  it('a handler that never reads it binds no backend: backend null, nothing assigned', async () => {
    const { p, pool } = build([handler('plain', async () => fallbackRun('finish'))]);
    const sub = await p.submit({ instance: { data_source: 'plain' }, job_id: 'a' });
    const r = JSON.parse(await sub.finished) as { backend: string | null; weight_versions: string[]; success: boolean };
    expect(r).toMatchObject({ backend: null, weight_versions: [], success: true });
    expect(pool.list()[0]!.assigned).toBe(0);
    await p.close();
  });

  it('a handler that reads it is bound to a backend for its RUN, which is released after', async () => {
    let seen: string | null = 'unset';
    const { p, pool } = build([
      handler('asks', async (ctx) => {
        const first = ctx.llm;
        const second = ctx.llm;
        seen = first === second ? 'same session' : 'two sessions';
        return fallbackRun('finish');
      }),
    ]);
    const sub = await p.submit({ instance: { data_source: 'asks' }, job_id: 'b' });
    const r = JSON.parse(await sub.finished) as { backend: string | null };
    expect(seen).toBe('same session');
    expect(r.backend).toBe('http://127.0.0.1:9');
    expect(pool.list()[0]!.assigned).toBe(1);
    expect(pool.list()[0]!.active).toBe(0);
    await p.close();
  });
});

describe('JobAbort', () => {
  it('makes its AbortSignal on first read, aborted with the reason when the job already was', () => {
    const a = new JobAbort();
    const reason = new CancelledError('cancelled by POST /cancel');
    a.abort(reason);
    a.abort(new Error('later reasons are ignored'));
    expect(a.aborted).toBe(true);
    expect(a.signal.aborted).toBe(true);
    expect(a.signal.reason).toBe(reason);
    expect(a.signal).toBe(a.signal);
  });

  it('aborts a signal read earlier, and calls each listener once, even when one throws', async () => {
    const a = new JobAbort();
    const signal = a.signal;
    const calls: string[] = [];
    const gone = (): void => {
      calls.push('removed');
    };
    a.addEventListener('abort', () => {
      calls.push('first');
      throw new Error('a listener that throws');
    });
    a.addEventListener('abort', gone);
    a.addEventListener('abort', () => calls.push('third'));
    a.removeEventListener('abort', gone);
    signal.addEventListener('abort', () => calls.push('signal'));
    const uncaught: unknown[] = [];
    const onErr = (e: unknown): void => {
      uncaught.push(e);
    };
    process.on('uncaughtException', onErr);
    a.abort(undefined);
    a.abort('again');
    await new Promise((r) => setImmediate(r));
    process.off('uncaughtException', onErr);
    // The handler's signal hears first, then the pipeline's listeners; the throw is reported, not swallowed.
    expect(calls).toEqual(['signal', 'first', 'third']);
    expect(uncaught).toHaveLength(1);
    expect(signal.reason).toBeInstanceOf(DOMException);
    expect((a.reason as DOMException).name).toBe('AbortError');
  });
});

describe('the console job index past recent_jobs', () => {
  const ev = (job_id: string, state: JobState, at: number): JobEvent => ({
    type: 'job',
    at,
    job_id,
    state,
    data_source: 'noop',
    instance_id: null,
    ...(state === 'queued_init' ? {} : { from: 'eval' as const }),
  });

  it('drops the oldest finished row, also after ids ran again and rows were dropped before', () => {
    const idx = new JobIndex(3);
    let t = 0;
    const run = (id: string): void => {
      idx.apply(ev(id, 'queued_init', ++t));
      idx.apply(ev(id, 'done', ++t));
    };
    for (const id of ['a', 'b', 'c', 'd']) run(id);
    expect(['a', 'b', 'c', 'd'].map((id) => idx.get(id)?.job_id ?? '-')).toEqual(['-', 'b', 'c', 'd']);
    // b runs again: its row moves to the newest end, so c is now the oldest.
    run('b');
    run('e');
    expect(['b', 'c', 'd', 'e'].map((id) => idx.get(id)?.job_id ?? '-')).toEqual(['b', '-', 'd', 'e']);
    for (let i = 0; i < 1000; i++) run(`x${i}`);
    expect(idx.query({}).matched).toBe(3);
    expect(['x997', 'x998', 'x999'].every((id) => idx.get(id)?.state === 'done')).toBe(true);
  });
});
