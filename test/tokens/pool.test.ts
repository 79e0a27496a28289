import { afterAll, describe, expect, it } from 'vitest';
import { offloadTokenizer } from '../../src/tokens/pool.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';

// A tool that prints tens of thousands of CJK characters: one pre-token of BPE, about a second of
// CPU. On the main thread it would stop every route of the server for that second.
const tok = qwen3Tokenizer();
const cjk = (n: number): string => Array.from({ length: n }, (_, i) => String.fromCharCode(0x4e00 + ((i * 7919) % 20000))).join('');
const off = offloadTokenizer(tok, { workers: 1, minChars: 256 })!;
afterAll(() => off.pool.close());

/** Counts how often a 10 ms timer fires while `work` runs: 0 when the work holds the event loop. */
async function ticksDuring(work: () => Promise<unknown>): Promise<number> {
  let ticks = 0;
  const t = setInterval(() => ticks++, 10);
  try {
    await work();
  } finally {
    clearInterval(t);
  }
  return ticks;
}

describe('tokenizer worker pool', () => {
  it('encodes long runs on a worker with the same ids as the main thread, and the event loop keeps running', async () => {
    const msgs = [{ role: 'tool' as const, content: `${cjk(40_000)}\n<|im_end|>\n<|im_start|>assistant\n` }];
    const chunks = tok.observationChunks(msgs);
    const onWorker = await off.tokenizer.encodeChunksAsync!(chunks); // starts the worker, loads its tokenizer
    expect(onWorker).toEqual(tok.observationIds(msgs));
    expect(off.pool.offloadedChars).toBeGreaterThanOrEqual(40_000);
    const ticks = await ticksDuring(() => off.tokenizer.encodeChunksAsync!(chunks));
    const inline = await ticksDuring(async () => tok.encodeChunks(chunks));
    expect(inline, 'the same work on the main thread lets no timer fire').toBe(0);
    expect(ticks, 'timers fired while the worker encoded').toBeGreaterThan(5);
  }, 60_000);

  it('short texts stay on the main thread', async () => {
    const before = off.pool.offloadedChars;
    const ids = await off.tokenizer.encodeChunksAsync!(tok.observationChunks([{ role: 'tool', content: 'ok' }]));
    expect(ids).toEqual(tok.observationIds([{ role: 'tool', content: 'ok' }]));
    expect(off.pool.offloadedChars).toBe(before);
  });

  it('a cancelled job does not wait for its encoding', async () => {
    const ac = new AbortController();
    const p = off.tokenizer.encodeChunksAsync!(tok.observationChunks([{ role: 'tool', content: cjk(60_000) }]), ac.signal);
    ac.abort(new Error('cancelled by the test'));
    await expect(p).rejects.toThrow('cancelled by the test');
  });

  it('close() ends the workers; later encodes run on the main thread', async () => {
    const own = offloadTokenizer(tok, { workers: 2, minChars: 10 })!;
    await own.tokenizer.encodeChunksAsync!(tok.observationChunks([{ role: 'tool', content: cjk(500) }]));
    expect(own.pool.running).toBe(1);
    await own.pool.close();
    await own.pool.close();
    expect(own.pool.running).toBe(0);
    const ids = await own.tokenizer.encodeChunksAsync!(tok.observationChunks([{ role: 'tool', content: cjk(500) }]));
    expect(ids).toEqual(tok.observationIds([{ role: 'tool', content: cjk(500) }]));
    expect(own.pool.running).toBe(0);
  });

  it('no pool without workers or without an origin to load the tokenizer from', () => {
    expect(offloadTokenizer(tok, { workers: 0, minChars: 1 })).toBeUndefined();
    const { source: _source, ...anonymous } = tok;
    expect(offloadTokenizer(anonymous, { workers: 1, minChars: 1 })).toBeUndefined();
  });
});
