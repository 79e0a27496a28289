import { ContextLengthError, RaasError } from '../../protocol/errors.js';

/** vLLM and SGLang word their context-length 400s differently by release; match on these. */
const CONTEXT_LENGTH_RE = /maximum context length|context length is only|maximum model length|longer than the model's context length|context length/i;

/** Normalises a backend address: adds `http://`, drops a trailing slash and ProRL's `/v1` suffix. */
export function normalizeAddress(address: string): string {
  let a = address.trim();
  if (!/^https?:\/\//i.test(a)) a = `http://${a}`;
  a = a.replace(/\/+$/, '');
  if (a.endsWith('/v1')) a = a.slice(0, -3);
  return a;
}

/**
 * POSTs JSON and returns the parsed answer. Connection failures and 5xx answers throw a retryable
 * `backend_unavailable`; a context-length 400 throws ContextLengthError; other 4xx are not retryable.
 * Node's fetch (undici) keeps connections alive per origin.
 */
export async function postJson(url: string, body: unknown, signal: AbortSignal | undefined, timeoutMs: number): Promise<any> {
  return requestJson(url, { method: 'POST', body: JSON.stringify(body) }, signal, timeoutMs);
}

/** GETs JSON (same error mapping as postJson). */
export async function getJson(url: string, signal: AbortSignal | undefined, timeoutMs: number): Promise<any> {
  return requestJson(url, { method: 'GET' }, signal, timeoutMs);
}

async function requestJson(url: string, init: { method: string; body?: string }, signal: AbortSignal | undefined, timeoutMs: number): Promise<any> {
  signal?.throwIfAborted();
  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let res: Response;
  let text: string;
  try {
    res = await fetch(url, {
      method: init.method,
      body: init.body,
      headers: init.body === undefined ? undefined : { 'content-type': 'application/json' },
      signal: combined,
    });
    text = await res.text();
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    const why = timeout.aborted ? `no answer within ${Math.round(timeoutMs / 1000)} s` : describeCause(err);
    throw new RaasError('backend_unavailable', `LLM backend ${url} failed: ${why}`, { cause: err, retryable: true });
  }
  if (res.status >= 400) {
    const message = errorMessage(text);
    if (res.status === 400 && CONTEXT_LENGTH_RE.test(message)) throw new ContextLengthError(`${url}: ${message}`);
    const retryable = res.status >= 500 || res.status === 429;
    throw new RaasError('backend_unavailable', `LLM backend ${url} answered ${res.status}: ${message.slice(0, 500)}`, { retryable, status: 502 });
  }
  try {
    return text === '' ? null : JSON.parse(text);
  } catch (err) {
    throw new RaasError('backend_unavailable', `LLM backend ${url} answered non-JSON: ${text.slice(0, 200)}`, { cause: err, retryable: true });
  }
}

function describeCause(err: unknown): string {
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  if (cause?.code) return `${cause.code} ${cause.message ?? ''}`.trim();
  return err instanceof Error ? err.message : String(err);
}

/** vLLM `{error:{message}}`, SGLang `{error:{message}}` or `{message}`, FastAPI `{detail}`, else the text. */
function errorMessage(text: string): string {
  try {
    const j = JSON.parse(text) as { error?: { message?: string } | string; message?: string; detail?: unknown };
    if (typeof j.error === 'object' && j.error?.message) return j.error.message;
    if (typeof j.error === 'string') return j.error;
    if (typeof j.message === 'string') return j.message;
    if (j.detail !== undefined) return typeof j.detail === 'string' ? j.detail : JSON.stringify(j.detail);
  } catch {
    /* not JSON: use the text */
  }
  return text;
}
