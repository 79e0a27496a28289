import { ZodError } from 'zod';
import { RaasError, cancellationKind, fieldPath, type ErrorCode } from '../protocol/errors.js';

/** The `error` of a failed answer. */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
}

/** Names the fields a request got wrong, e.g. `timeout_s: Too small: expected number to be >0`. */
export function zodMessage(err: ZodError, prefix = ''): string {
  return err.issues
    .slice(0, 5)
    .map((i) => {
      const keys = i.code === 'unrecognized_keys' ? ` (${i.keys.join(', ')})` : '';
      return `${prefix}${fieldPath(i.path)}: ${i.message}${keys}`;
    })
    .join('; ');
}

/** Maps anything thrown by an op onto a stable code: RaasError keeps its own. */
export function errorBody(err: unknown): ErrorBody {
  if (err instanceof RaasError) return { code: err.code, message: err.message };
  if (err instanceof ZodError) return { code: 'bad_request', message: zodMessage(err) };
  const kind = cancellationKind(err);
  const message = err instanceof Error ? err.message : String(err);
  if (kind === 'timeout') return { code: 'timeout', message };
  if (kind === 'cancelled') return { code: 'cancelled', message };
  return { code: 'internal', message: message || 'unexpected error' };
}
