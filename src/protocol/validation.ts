import type { z } from 'zod';
import { RaasError, fieldPath, type ErrorCode } from './errors.js';

/** One readable line per zod issue, each naming its field: `sampling_params.top_p: Too big: ...`. */
export function describeIssues(error: z.ZodError, prefix = ''): string {
  return error.issues
    .slice(0, 5)
    .map((i) => {
      const path = fieldPath([...(prefix ? [prefix] : []), ...i.path]);
      if (i.code === 'unrecognized_keys') {
        const keys = (i as { keys?: string[] }).keys ?? [];
        const where = i.path.length || prefix ? ` in ${path}` : '';
        return `unknown field${keys.length > 1 ? 's' : ''} ${keys.map((k) => JSON.stringify(k)).join(', ')}${where}: remove ${keys.length > 1 ? 'them' : 'it'}`;
      }
      return `${path}: ${i.message}`;
    })
    .join('; ');
}

/** Parses `value` with `schema` or throws a RaasError (default `bad_request`) whose message names the field. */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, code: ErrorCode = 'bad_request', prefix = ''): z.infer<S> {
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  throw new RaasError(code, describeIssues(r.error, prefix));
}
