// fast-check arbitraries written for the schemas of src/protocol: each produces inputs that are
// INVALID by construction (wrong types, missing or extra fields, out-of-range numbers, bad ids,
// path traversal, shell metacharacters, huge strings, deep nesting), labelled with their class so
// the report can count them. `invalidFor` double-checks each against the real schema.
import fc from 'fast-check';
import type { z } from 'zod';

/** A generated input and the class of badness it belongs to. */
export interface Bad<T = unknown> {
  kind: string;
  value: T;
}

const label = <T>(kind: string, arb: fc.Arbitrary<T>): fc.Arbitrary<Bad<T>> => arb.map((value) => ({ kind, value }));

/** Any JSON value that is not a plain object. */
export const notAnObject = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }),
);

/** A value of a type other than string. */
export const notAString = fc.oneof(
  fc.integer(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 3 }),
);

/** A value of a type other than number. */
export const notANumber = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.constant('NaN'),
  fc.constant('Infinity'),
);

/** Numbers a positive-integer field must refuse. */
export const badPositiveInt = fc.oneof(
  fc.integer({ max: 0 }),
  fc.double({ min: 0.01, max: 1e6, noNaN: true }).filter((d) => !Number.isInteger(d)),
  fc.constant(-1),
  fc.constant(Number.POSITIVE_INFINITY),
);

/** Strings that try to leave a directory or the job-id alphabet. */
export const traversal = fc.constantFrom(
  '../../etc/passwd',
  '..',
  '/etc/shadow',
  '..%2F..%2Fetc%2Fpasswd',
  'a/../../b',
  '\\..\\..\\windows',
  'job id with spaces',
  '',
);

/** Shell metacharacters and command substitutions (they must stay inert data). */
export const shellMeta = fc.constantFrom(
  '$(touch /tmp/raas-pwned)',
  '`id`',
  '; rm -rf / #',
  '| nc 127.0.0.1 1',
  '&& curl http://127.0.0.1:1',
  '\'"$HOME"\'',
  '\n/bin/sh\n',
  '${IFS}cat${IFS}/etc/shadow',
);

/** Keys no schema of ours defines (strict objects must refuse them). */
export const extraKey = fc.constantFrom('__proto__x', 'constructor_', 'unexpected', 'admin', 'token', 'debug');

/** Huge strings (still under the body limit), built fast. */
export const hugeString = fc.integer({ min: 300_000, max: 2_000_000 }).map((n) => 'x'.repeat(n));

/** A deeply nested JSON text (arrays or objects), as raw text so no JS stack is used to build it. */
export const deepNesting = fc
  .tuple(fc.integer({ min: 1_000, max: 200_000 }), fc.boolean())
  .map(([depth, arrays]) => (arrays ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)));

/** Invalid /process bodies (as JSON values), one class per branch. */
export function badProcessBodies(handlerNames: string[]): fc.Arbitrary<Bad> {
  const inst = { data_source: 'chat', turns: 1 };
  return fc.oneof(
    label('process: body not an object', notAnObject),
    label('process: missing instance', fc.record({ sampling_params: fc.constant({}) })),
    label(
      'process: instance wrong type',
      notAnObject.map((i) => ({ instance: i })),
    ),
    label(
      'process: data_source missing (means swebench), not a SWE instance',
      fc.dictionary(fc.constantFrom('turns', 'instance_id', 'x'), fc.integer(), { maxKeys: 2 }).map((i) => ({ instance: i })),
    ),
    label(
      'process: data_source wrong type',
      notAString.filter((v) => v !== null).map((d) => ({ instance: { data_source: d } })),
    ),
    label(
      'process: unknown data_source',
      fc
        .string({ minLength: 1, maxLength: 40 })
        .filter((s) => !handlerNames.includes(s) && !['deepscaler', 'deepcoder'].includes(s))
        .map((d) => ({ instance: { data_source: d } })),
    ),
    label(
      'process: sampling_params wrong type',
      notAnObject.filter((v) => v !== null).map((sp) => ({ instance: inst, sampling_params: sp })),
    ),
    label(
      'process: temperature out of range / wrong type',
      fc
        .oneof(fc.double({ max: -0.001, noNaN: true }), fc.double({ min: 100.5, max: 1e12, noNaN: true }), notANumber)
        .map((t) => ({ instance: inst, sampling_params: { temperature: t } })),
    ),
    label(
      'process: top_p out of range',
      fc
        .oneof(fc.constant(0), fc.double({ min: 1.0001, max: 1e6, noNaN: true }), fc.double({ max: -0.0001, noNaN: true }))
        .map((p) => ({ instance: inst, sampling_params: { top_p: p } })),
    ),
    label(
      'process: negative / fractional token limits',
      fc
        .tuple(fc.constantFrom('max_tokens_per_turn', 'max_response_tokens', 'max_model_len', 'max_iterations'), badPositiveInt)
        .map(([k, v]) => ({ instance: inst, sampling_params: { [k]: v } })),
    ),
    label(
      'process: stop_token_ids not token ids',
      fc
        .oneof(
          fc.array(fc.integer({ max: -1 }), { minLength: 1, maxLength: 3 }),
          fc.array(fc.string(), { minLength: 1, maxLength: 3 }),
          fc.string(),
        )
        .map((s) => ({ instance: inst, sampling_params: { stop_token_ids: s } })),
    ),
    // Any string up to 256 characters is a job id, as in ProRL (it is never used as a path): only length and type are refused.
    label(
      'process: job_id over 256 characters',
      fc.string({ minLength: 257, maxLength: 400 }).map((j) => ({ instance: inst, job_id: j })),
    ),
    label(
      'process: job_id wrong type',
      notAString.filter((j) => j !== null).map((j) => ({ instance: inst, job_id: j })),
    ),
    label(
      'process: timeout_s negative, zero or huge',
      fc
        .oneof(fc.double({ max: 0, noNaN: true }), fc.double({ min: 604_801, max: 1e15, noNaN: true }), notANumber)
        .map((t) => ({ instance: inst, timeout_s: t })),
    ),
    label(
      'process: policy_version negative or fractional',
      fc
        .oneof(
          fc.integer({ max: -1 }),
          fc.double({ min: 0.1, max: 99.9, noNaN: true }).filter((d) => !Number.isInteger(d)),
        )
        .map((v) => ({ instance: inst, policy_version: v })),
    ),
    label(
      'process: group_id empty or too long',
      fc.oneof(fc.constant(''), fc.string({ minLength: 257, maxLength: 300 })).map((g) => ({ instance: inst, group_id: g })),
    ),
    label(
      'process: chat instance out of range',
      fc
        .oneof(
          fc.record({ turns: fc.oneof(fc.integer({ max: 0 }), fc.integer({ min: 1001, max: 1e9 }), fc.constant(1.5), fc.constant('3')) }),
          fc.record({
            pass_rate: fc.oneof(
              fc.double({ min: 1.0001, max: 1e9, noNaN: true }),
              fc.double({ max: -0.0001, noNaN: true }),
              fc.constant('0.5'),
            ),
          }),
        )
        .map((i) => ({ instance: { data_source: 'chat', ...i } })),
    ),
    label(
      'process: sandboxed instance invalid (no sandbox may start)',
      fc
        .oneof(
          fc.record({ commands: notAnObject.filter((c) => !Array.isArray(c)) }),
          fc.record({ commands: fc.constant([]) }),
          fc.record({ commands: fc.array(fc.constant('echo x'), { minLength: 21, maxLength: 30 }) }),
          fc.record({
            commands: fc.array(
              notAString.filter((c) => c !== null),
              { minLength: 1, maxLength: 3 },
            ),
          }),
          fc.record({ commands: fc.constant(['echo x']), files: fc.constant('not-a-record') }),
          fc.record({ commands: fc.constant(['echo x']), [`x`]: shellMeta }),
          fc.record({ commands: fc.constant(['echo x']), timeout_s: badPositiveInt }),
        )
        .map((i) => ({ instance: { data_source: 'rel-sandbox', ...i } })),
    ),
    label(
      'process: shell metacharacters in an unknown task name',
      shellMeta.map((s) => ({ instance: { data_source: s } })),
    ),
  );
}

/** Invalid /cancel bodies. */
export const badCancelBodies: fc.Arbitrary<Bad> = fc.oneof(
  label('cancel: body not an object', notAnObject),
  label('cancel: missing job_id', fc.constant({})),
  label(
    'cancel: job_id wrong type',
    notAString.map((j) => ({ job_id: j })),
  ),
  // Any string is a job id and unknown keys are ignored, as in ProRL; an unknown id answers 200.
);

/** Invalid /add_llm_server bodies (a valid one would register a backend). */
export const badAddBodies: fc.Arbitrary<Bad> = fc.oneof(
  label('add_llm_server: body not an object', notAnObject),
  label('add_llm_server: missing address', fc.record({ api: fc.constantFrom('vllm', 'sglang') })),
  label(
    'add_llm_server: address wrong type',
    notAString.map((a) => ({ address: a })),
  ),
  label(
    'add_llm_server: unknown api',
    fc
      .string({ maxLength: 10 })
      .filter((s) => s !== 'vllm' && s !== 'sglang')
      .map((api) => ({ address: 'http://127.0.0.1:1', api })),
  ),
  label(
    'add_llm_server: weight_version wrong type',
    notAString.filter((v) => v !== null).map((w) => ({ address: 'http://127.0.0.1:1', weight_version: w })),
  ),
  label(
    'add_llm_server: extra field',
    extraKey.map((k) => ({ address: 'http://127.0.0.1:1', [k]: 1 })),
  ),
);

/** Invalid /remove_llm_server bodies. */
export const badRemoveBodies: fc.Arbitrary<Bad> = fc.oneof(
  label('remove_llm_server: body not an object', notAnObject),
  label('remove_llm_server: missing address', fc.constant({})),
  label(
    'remove_llm_server: address wrong type',
    notAString.map((a) => ({ address: a })),
  ),
  label(
    'remove_llm_server: extra field',
    extraKey.map((k) => ({ address: 'http://127.0.0.1:1', [k]: 1 })),
  ),
);

/** Invalid ids for GET /jobs/:id (raw path segments, already URL-encoded where needed). */
export const badJobPaths: fc.Arbitrary<Bad<string>> = fc.oneof(
  label(
    'jobs/:id: traversal and bad characters',
    fc.constantFrom('..%2F..%2Fetc%2Fpasswd', '%2e%2e%2f%2e%2e%2froot', 'a%20b', '%24(id)', '%00', '%60id%60', 'x'.repeat(300)),
  ),
  label(
    'jobs/:id: random bad characters',
    fc
      .string({ minLength: 1, maxLength: 30 })
      .filter((s) => !/^[A-Za-z0-9._:@+=-]+$/.test(s))
      .map((s) => encodeURIComponent(s)),
  ),
  label(
    'jobs/:id: unknown id (404)',
    fc.stringMatching(/^[A-Za-z0-9]{6,20}$/).map((s) => `unknown-${s}`),
  ),
);

/** Invalid sidecar request lines (raw text, one line each, no newline inside). */
export const badSidecarLines: fc.Arbitrary<Bad<string>> = fc.oneof(
  label(
    'sidecar: not JSON',
    fc
      .string({ minLength: 1, maxLength: 60 })
      .filter((s) => !s.includes('\n') && !s.includes('\r'))
      .filter((s) => {
        try {
          JSON.parse(s);
          return false;
        } catch {
          return true;
        }
      }),
  ),
  label(
    'sidecar: JSON but not an object',
    notAnObject.map((v) => JSON.stringify(v)),
  ),
  label(
    'sidecar: missing id or op',
    fc.oneof(fc.record({ op: fc.constantFrom('hello', 'status') }), fc.record({ id: fc.integer() })).map((v) => JSON.stringify(v)),
  ),
  label(
    'sidecar: unknown op',
    fc
      .tuple(
        fc.integer(),
        fc
          .string({ minLength: 1, maxLength: 20 })
          .filter((s) => !['hello', 'next_batch', 'update_weights', 'status', 'checkpoint', 'resume', 'eval', 'shutdown'].includes(s)),
      )
      .map(([id, op]) => JSON.stringify({ id, op })),
  ),
  label(
    'sidecar: id wrong type',
    fc
      .oneof(fc.constant(1.5), fc.constant(true), fc.constant(''), fc.constant([1]), fc.string({ minLength: 257, maxLength: 300 }))
      .map((id) => JSON.stringify({ id, op: 'hello' })),
  ),
  label(
    'sidecar: extra field on a strict op',
    fc
      .tuple(fc.integer({ min: 1 }), fc.constantFrom('hello', 'status', 'checkpoint', 'shutdown'), extraKey)
      .map(([id, op, k]) => JSON.stringify({ id, op, [k]: 1 })),
  ),
  label(
    'sidecar: next_batch timeout_s negative / NaN / huge',
    fc
      .tuple(fc.integer({ min: 1 }), fc.oneof(fc.double({ max: 0, noNaN: true }), fc.constant('NaN'), fc.constant(1e12)))
      .map(([id, t]) => JSON.stringify({ id, op: 'next_batch', timeout_s: t })),
  ),
  label(
    'sidecar: update_weights wrong types',
    fc
      .tuple(
        fc.integer({ min: 1 }),
        fc.oneof(
          fc.record({ version: fc.oneof(fc.integer({ max: -1 }), fc.constant('one'), fc.constant(1.5)) }),
          fc.record({ backends: fc.constantFrom(3, 'x', [1, 2]) }),
        ),
      )
      .map(([id, b]) => JSON.stringify({ id, op: 'update_weights', ...b })),
  ),
  label(
    'sidecar: resume with a non-object state',
    fc
      .tuple(
        fc.integer({ min: 1 }),
        notAnObject.filter((v) => v !== null && !(typeof v === 'object')),
      )
      .map(([id, s]) => JSON.stringify({ id, op: 'resume', state: s })),
  ),
  label(
    'sidecar: eval with a bad dataset',
    fc
      .tuple(fc.integer({ min: 1 }), fc.oneof(fc.constant({}), fc.constant({ path: '' }), fc.constant('x')))
      .map(([id, d]) => JSON.stringify({ id, op: 'eval', dataset: d })),
  ),
  label(
    'sidecar: shell metacharacters as op',
    fc.tuple(fc.integer({ min: 1 }), shellMeta).map(([id, op]) => JSON.stringify({ id, op })),
  ),
);

/** Keeps a generated input only if the real schema refuses it (so a "bad input" is really bad). */
export function invalidFor(schema: z.ZodType, value: unknown): boolean {
  return !schema.safeParse(value).success;
}
