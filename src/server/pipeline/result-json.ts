import fastJson from 'fast-json-stringify';
import type { Result } from '../../protocol/process.js';

/**
 * How a field is written: a typed scalar (fast-json-stringify writes it without inspecting it),
 * `'?'`-suffixed when it may also be null, or `any` (handler-owned values: messages, tokens,
 * details…, handed to JSON.stringify as they are).
 */
type Kind = 'string' | 'string?' | 'number' | 'number?' | 'boolean' | 'any' | Fields;
type Fields = ReadonlyArray<readonly [key: string, kind: Kind, optional?: 'optional']>;

/**
 * The result envelope in the order `buildResult` creates its keys (JSON.stringify writes keys in
 * creation order, so the same order gives the same bytes). Optional keys are those `buildResult`
 * adds only sometimes.
 */
const TIMING: Fields = [
  ['init_time', 'number'],
  ['run_time', 'number'],
  ['eval_time', 'number'],
  ['others_time', 'number'],
  ['counted_elapsed', 'number'],
  ['timeout_triggered', 'boolean'],
  ['queued_s', 'number'],
  ['init_s', 'number'],
  ['run_s', 'number'],
  ['eval_s', 'number'],
  ['counted_s', 'number'],
];
const ENVELOPE: Fields = [
  ['instance_id', 'any'],
  ['trajectory_id', 'any'],
  ['git_patch', 'string?'],
  ['success', 'boolean'],
  ['finish', 'boolean'],
  ['messages', 'any'],
  ['tools', 'any'],
  ['end_properly', 'boolean'],
  ['resolved', 'boolean'],
  ['critical_error', 'string?'],
  ['filter', 'boolean'],
  ['filter_reason', 'string?'],
  ['error', 'string?'],
  ['job_id', 'string'],
  ['data_source', 'string'],
  ['reward', 'number'],
  ['finish_reason', 'string'],
  ['backend', 'string?'],
  ['policy_version', 'number?'],
  ['weight_versions', 'any'],
  ['num_turns', 'number'],
  ['timing', TIMING],
  ['tokens', 'any'],
  ['details', 'any', 'optional'],
  ['traceback', 'string', 'optional'],
  ['trailing_messages', 'any', 'optional'],
];

function schemaOf(kind: Kind): Record<string, unknown> {
  if (typeof kind !== 'string')
    return { type: 'object', properties: Object.fromEntries(kind.map(([k, v]) => [k, schemaOf(v)])), additionalProperties: false };
  if (kind === 'any') return {};
  return kind.endsWith('?') ? { type: [kind.slice(0, -1), 'null'] } : { type: kind };
}

/** True when `v` is exactly what `kind` lets fast-json-stringify write unchecked (else JSON.stringify writes it). */
function fits(v: unknown, kind: Kind): boolean {
  switch (kind) {
    case 'any':
      // JSON.stringify drops a key whose value is undefined, a function or a symbol: left to it.
      return v !== undefined && typeof v !== 'function' && typeof v !== 'symbol';
    case 'string':
      return typeof v === 'string';
    case 'string?':
      return v === null || typeof v === 'string';
    case 'number':
      // NaN and ±Infinity are null in JSON.stringify; fast-json-stringify would throw on NaN.
      return typeof v === 'number' && Number.isFinite(v);
    case 'number?':
      return v === null || (typeof v === 'number' && Number.isFinite(v));
    case 'boolean':
      return typeof v === 'boolean';
    default:
      return typeof v === 'object' && v !== null && !Array.isArray(v) && hasShape(v as Record<string, unknown>, kind);
  }
}

/**
 * True when the object's own enumerable keys are the fields' keys in their order (optional ones
 * may be missing) and every value fits its kind. A key the table does not know, a key in another
 * place (a handler's finalResult patch adds its fields at the end), a getter or a `toJSON` all
 * fail it, and the result is written by JSON.stringify instead: nothing is dropped or reordered.
 */
function hasShape(o: Record<string, unknown>, fields: Fields): boolean {
  if (typeof o.toJSON === 'function' || Object.getPrototypeOf(o) !== Object.prototype) return false;
  let i = 0;
  for (const key in o) {
    if (!Object.hasOwn(o, key)) return false;
    while (i < fields.length && fields[i]![0] !== key) {
      if (fields[i]![2] !== 'optional') return false;
      i++;
    }
    if (i === fields.length || !fits(o[key], fields[i]![1])) return false;
    i++;
  }
  for (; i < fields.length; i++) if (fields[i]![2] !== 'optional') return false;
  return true;
}

const writeEnvelope = fastJson(schemaOf(ENVELOPE) as unknown as Parameters<typeof fastJson>[0]) as (r: Result) => string;

/**
 * A result as JSON text, byte for byte what `JSON.stringify(result)` gives: the fixed envelope is
 * written by a serializer compiled once (fast-json-stringify, what fastify compiles response
 * schemas with), the handler-owned parts (messages, tokens, details…) by JSON.stringify. A result
 * whose keys or values the envelope does not describe exactly is written by JSON.stringify whole.
 */
export function stringifyResult(result: Result): string {
  return inEnvelope(result) ? writeEnvelope(result) : JSON.stringify(result);
}

/** True when the compiled serializer writes `result` (false: JSON.stringify does). */
export function inEnvelope(result: Result): boolean {
  return hasShape(result as Record<string, unknown>, ENVELOPE);
}

/** The envelope's keys in order (for the tests that hold it to the protocol's Result schema). */
export const ENVELOPE_KEYS: readonly string[] = ENVELOPE.map(([k]) => k);
