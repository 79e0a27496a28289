import type { z } from 'zod';
import { RaasError, fieldPath, type ErrorCode } from './errors.js';
import { issueMessage, keysAt, nearestKey } from './config-errors.js';

/**
 * One readable line per zod issue, each naming its field: `sampling_params.top_p: Too big: ...`.
 * With the schema, an unknown field also gets the nearest valid one (`did you mean "address"?`).
 */
function describeIssues(error: z.ZodError, prefix = '', schema?: z.ZodType): string {
  return error.issues
    .slice(0, 5)
    .map((i) => {
      const path = fieldPath([...(prefix ? [prefix] : []), ...i.path]);
      if (i.code === 'unrecognized_keys') {
        const keys = (i as { keys?: string[] }).keys ?? [];
        const where = i.path.length || prefix ? ` in ${path}` : '';
        const valid = schema ? (keysAt(schema, i.path) ?? []) : [];
        const near = keys.length === 1 ? nearestKey(keys[0]!, valid) : undefined;
        return `unknown field${keys.length > 1 ? 's' : ''} ${keys.map((k) => JSON.stringify(k)).join(', ')}${where}: ${near ? `did you mean ${JSON.stringify(near)}? ` : ''}remove ${keys.length > 1 ? 'them' : 'it'}${near ? ' or correct it' : ''}`;
      }
      // zod's own type message becomes "wrong type: expected …, got …" (or "required"); a schema's own message stays.
      return `${path}: ${i.code === 'invalid_type' && i.message.startsWith('Invalid input') ? issueMessage(i) : i.message}`;
    })
    .join('; ');
}

/** Parses `value` with `schema` or throws a RaasError (default `bad_request`) whose message names the field. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, code: ErrorCode = 'bad_request', prefix = ''): z.infer<S> {
  const r = schema.safeParse(value, { reportInput: true });
  if (r.success) return r.data;
  throw new RaasError(code, describeIssues(r.error, prefix, schema));
}
