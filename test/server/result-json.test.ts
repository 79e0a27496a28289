import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Result } from '../../src/protocol/process.js';
import { ENVELOPE_KEYS, inEnvelope, stringifyResult } from '../../src/server/pipeline/result-json.js';

// Strings as handlers and models produce them: any code unit (lone surrogates, controls, quotes,
// backslashes), whole graphemes (emoji, CJK, combining marks), and long ones (the escaper switches
// strategy past 42 and 5,000 characters).
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 60 }),
  fc.string({ unit: 'grapheme', maxLength: 60 }),
  fc.string({ unit: 'binary', minLength: 5000, maxLength: 6000 }),
  fc.constantFrom('', '"', '\\', '\u2028', '\ud800', 'a\u0000b', '</script>'),
);
// Mostly finite (what the pipeline writes), now and then what JSON writes as null.
const num = fc.oneof(
  { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 30 },
  { arbitrary: fc.integer(), weight: 10 },
  { arbitrary: fc.constantFrom(0, -0, 1e21, 5e-324, 1e-7), weight: 5 },
  { arbitrary: fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY), weight: 1 },
);
const json: fc.Arbitrary<unknown> = fc.jsonValue();
const tokenIds = fc.array(fc.nat({ max: 151_000 }), { maxLength: 3000 });
const message = fc.record(
  {
    role: fc.constantFrom('system', 'user', 'assistant', 'tool'),
    content: text,
    token_ids: tokenIds,
    logprobs: fc.array(fc.double({ noNaN: true, noDefaultInfinity: true }), { maxLength: 50 }),
  },
  { requiredKeys: ['role', 'content'] },
);

const timing = fc.record({
  init_time: num,
  run_time: num,
  eval_time: num,
  others_time: num,
  counted_elapsed: num,
  timeout_triggered: fc.boolean(),
  queued_s: num,
  init_s: num,
  run_s: num,
  eval_s: num,
  counted_s: num,
});

/** A result in buildResult's key order, with the optional keys sometimes present. */
const result = fc
  .record({
    instance_id: fc.oneof(text, fc.integer(), fc.constant(null)),
    trajectory_id: fc.oneof(text, fc.integer(), fc.constant(null)),
    git_patch: fc.option(text),
    success: fc.boolean(),
    finish: fc.boolean(),
    messages: fc.array(message, { maxLength: 4 }),
    tools: fc.array(json, { maxLength: 3 }),
    end_properly: fc.boolean(),
    resolved: fc.boolean(),
    critical_error: fc.constantFrom(null, 'init', 'run', 'eval', 'timeout', 'cancelled'),
    filter: fc.boolean(),
    filter_reason: fc.option(text),
    error: fc.option(text),
    job_id: text,
    data_source: text,
    reward: num,
    finish_reason: fc.constantFrom('finish', 'max_iterations', 'error', 'timeout', 'cancelled'),
    backend: fc.option(text),
    policy_version: fc.option(fc.integer()),
    weight_versions: fc.array(text, { maxLength: 4 }),
    num_turns: fc.nat(),
    timing,
    tokens: fc.record({
      prompt_ids: tokenIds,
      response_ids: tokenIds,
      response_mask: fc.array(fc.constantFrom(0, 1), { maxLength: 3000 }),
      logprobs: fc.array(fc.double({ noNaN: true, noDefaultInfinity: true }), { maxLength: 200 }),
    }),
    details: fc.dictionary(text, json, { maxKeys: 4 }),
    traceback: text,
    trailing_messages: fc.array(message, { maxLength: 2 }),
  })
  .chain((r) =>
    fc.record({ details: fc.boolean(), traceback: fc.boolean(), trailing: fc.boolean() }).map((keep) => {
      const o: Record<string, unknown> = { ...r };
      if (!keep.details) delete o.details;
      if (!keep.traceback) delete o.traceback;
      if (!keep.trailing) delete o.trailing_messages;
      return o;
    }),
  );

/** A result a handler reshaped: a key it added (anywhere), one it removed, or a value of another type. */
const reshaped = fc
  .tuple(result, fc.nat(), text, json, fc.constantFrom('add', 'remove', 'retype', 'move'))
  .map(([r, at, key, value, how]) => {
    const entries = Object.entries(r);
    const i = at % entries.length;
    if (how === 'add') entries.splice(i, 0, [key, value]);
    else if (how === 'remove') entries.splice(i, 1);
    else if (how === 'retype') entries[i] = [entries[i]![0], value];
    else entries.push(entries.splice(i, 1)[0]!);
    return Object.fromEntries(entries);
  });

describe('the precompiled result serializer', () => {
  it('writes exactly what JSON.stringify writes for any result in the envelope', () => {
    let compiled = 0;
    fc.assert(
      fc.property(result, (r) => {
        if (inEnvelope(r as Result)) compiled++;
        expect(stringifyResult(r as Result)).toBe(JSON.stringify(r));
      }),
      { numRuns: 300 },
    );
    // Most generated results go through the compiled serializer (the rest carry NaN or ±Infinity).
    expect(compiled).toBeGreaterThan(100);
  });

  it("takes the compiled path for a pipeline's own result, and JSON.stringify for one with keys it does not know", () => {
    const r = fc.sample(result, { numRuns: 20, seed: 3 }).find((x) => inEnvelope(x as Result))! as Record<string, unknown>;
    expect(r).toBeDefined();
    expect(inEnvelope({ ...r, segments: [] } as unknown as Result)).toBe(false);
    expect(inEnvelope({ ...r, reward: Number.NaN } as unknown as Result)).toBe(false);
  });

  it('writes exactly what JSON.stringify writes when a handler added, dropped, moved or retyped a field (nothing is lost)', () => {
    fc.assert(
      fc.property(reshaped, (r) => {
        expect(stringifyResult(r as Result)).toBe(JSON.stringify(r));
      }),
      { numRuns: 300 },
    );
  });

  it('keeps what only JSON.stringify knows about: undefined values, toJSON, class instances, big token arrays', () => {
    const base = fc.sample(result, { numRuns: 1, seed: 7 })[0]! as Record<string, unknown>;
    const cases: Array<Record<string, unknown>> = [
      { ...base, reward: undefined },
      { ...base, error: undefined },
      { ...base, details: { when: new Date(0), big: undefined } },
      { ...base, toJSON: () => ({ replaced: true }) },
      { ...base, timing: { ...(base.timing as object), extra_s: 1 } },
      {
        ...base,
        critical_error: null,
        tokens: { prompt_ids: Array.from({ length: 200_000 }, (_, i) => i % 151_000), response_ids: [], response_mask: [], logprobs: [] },
      },
      Object.assign(Object.create({ inherited: 1 }) as object, base),
    ];
    for (const c of cases) expect(stringifyResult(c as Result)).toBe(JSON.stringify(c));
  });

  it("names only the protocol's Result keys, so the envelope cannot drift from the schema", () => {
    const known = Object.keys(Result.shape);
    expect(ENVELOPE_KEYS.filter((k) => !known.includes(k) && k !== 'details')).toEqual([]);
  });
});
