import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JobResponseFast, ResultFast } from '../../src/client/fast-schemas.js';
import { JobResponse, Result } from '../../src/protocol/process.js';
import { makeResult } from './fake-server.js';

describe('fast result schemas agree with the protocol schemas', () => {
  const element = fc.oneof(
    fc.nat(200_000),
    fc.integer({ min: -3, max: -1 }),
    fc.double(),
    fc.constant(0.5),
    fc.constant(NaN),
    fc.string(),
    fc.constant(null),
  );
  const arr = fc.array(element, { maxLength: 6 });

  it('accepts and rejects exactly what Result does (property over token arrays)', () => {
    fc.assert(
      fc.property(arr, arr, arr, arr, fc.option(arr, { nil: undefined }), (prompt, response, mask, logprobs, msgIds) => {
        const r = makeResult('j', 'x') as Record<string, unknown>;
        r.tokens = { prompt_ids: prompt, response_ids: response, response_mask: mask, logprobs };
        r.messages = [{ role: 'assistant', content: 'a', ...(msgIds === undefined ? {} : { token_ids: msgIds }) }];
        const slow = Result.safeParse(r);
        const fast = ResultFast.safeParse(r);
        expect(fast.success).toBe(slow.success);
        if (slow.success) expect(fast.data).toEqual(slow.data);
      }),
      { numRuns: 200 },
    );
  });

  it('names the field of a bad array and keeps unknown keys (Result is loose)', () => {
    const r = { ...makeResult('j', 'x'), extra: 1 } as Record<string, unknown>;
    (r.tokens as { response_mask: unknown[] }).response_mask = [2];
    const bad = ResultFast.safeParse(r);
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0].path).toEqual(['tokens', 'response_mask']);
    const ok = { ...makeResult('j', 'x'), extra: 1 };
    expect((ResultFast.parse(ok) as Record<string, unknown>).extra).toBe(1);
    const job = { job_id: 'j', state: 'done', result: ok };
    expect(JobResponseFast.parse(job)).toEqual(JobResponse.parse(job));
  });
});
