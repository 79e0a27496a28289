import http from 'node:http';
import https from 'node:https';
import { ContextLengthError, RaasError } from '../../protocol/errors.js';

/** vLLM and SGLang word their context-length 400s differently by release; match on these. */
const CONTEXT_LENGTH_RE =
  /maximum context length|context length is only|maximum model length|longer than the model's context length|context length/i;

/** Normalises a backend address: adds `http://`, drops a trailing slash and ProRL's `/v1` suffix. */
export function normalizeAddress(address: string): string {
  let a = address.trim();
  if (!/^https?:\/\//i.test(a)) a = `http://${a}`;
  a = a.replace(/\/+$/, '');
  if (a.endsWith('/v1')) a = a.slice(0, -3);
  return a;
}

/** Keep-alive agents shared by every backend client (one pool of sockets per origin). */
const agents = {
  http: new http.Agent({ keepAlive: true, keepAliveMsecs: 30_000, maxSockets: Infinity, maxFreeSockets: 1024 }),
  https: new https.Agent({ keepAlive: true, keepAliveMsecs: 30_000, maxSockets: Infinity, maxFreeSockets: 1024 }),
};

/**
 * A backend that did not answer at all: connection refused or reset, or no answer within the
 * deadline. Retryable, and what the pool's circuit breaker counts (an HTTP error answer is not).
 */
export class BackendUnreachableError extends RaasError {
  constructor(message: string, cause?: unknown) {
    super('backend_unavailable', message, { cause, retryable: true });
  }
}

/** True for a failure that says the backend is unreachable (what opens its circuit breaker). */
export function isUnreachable(err: unknown): err is BackendUnreachableError {
  return err instanceof BackendUnreachableError;
}

/**
 * POSTs JSON and returns the parsed answer. Connection failures and timeouts throw
 * BackendUnreachableError, 5xx answers a retryable `backend_unavailable`; a context-length 400 throws
 * ContextLengthError; other 4xx are not retryable. Uses node:http with keep-alive agents: on the LLM
 * hot path it costs a fraction of fetch's CPU.
 */
// biome-ignore lint/suspicious/noExplicitAny: each wire client (vllm.ts, sglang.ts) reads the fields of its own format and checks them
export async function postJson(url: string, body: unknown, signal: AbortSignal | undefined, timeoutMs: number): Promise<any> {
  const r = await request(url, 'POST', JSON.stringify(body), signal, timeoutMs);
  return answer(url, r.status, r.text);
}

/** GETs JSON (same error mapping as postJson). */
// biome-ignore lint/suspicious/noExplicitAny: as postJson
export async function getJson(url: string, signal: AbortSignal | undefined, timeoutMs: number): Promise<any> {
  const r = await request(url, 'GET', undefined, signal, timeoutMs);
  return answer(url, r.status, r.text);
}

/**
 * A health probe: resolves when the backend answers below 500 (a 404 from a proxy without the route
 * still says the process is alive); a 5xx answer, a refused connection or no answer throw.
 */
export async function probe(url: string, timeoutMs: number): Promise<void> {
  const r = await request(url, 'GET', undefined, undefined, timeoutMs);
  if (r.status >= 500)
    throw new RaasError('backend_unavailable', `LLM backend ${url} answered ${r.status}: ${errorMessage(r.text).slice(0, 200)}`, {
      retryable: true,
      status: 502,
    });
}

/** One HTTP exchange: the status and the body text, or BackendUnreachableError when no answer came. */
function request(
  url: string,
  method: string,
  body: string | undefined,
  signal: AbortSignal | undefined,
  timeoutMs: number,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const u = new URL(url);
    const mod = u.protocol === 'https:' ? https : http;
    let settled = false;
    const finish = (fn: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      fn();
    };
    const fail = (why: string, cause?: unknown): void =>
      finish(() => reject(new BackendUnreachableError(`LLM backend ${url} failed: ${why}`, cause)));
    const req = mod.request(
      u,
      {
        method,
        agent: u.protocol === 'https:' ? agents.https : agents.http,
        headers:
          body === undefined
            ? { accept: 'application/json' }
            : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), accept: 'application/json' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => fail(describeCause(err), err));
        res.on('end', () => finish(() => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') })));
      },
    );
    const onAbort = (): void => {
      finish(() => reject(signal!.reason));
      req.destroy();
    };
    // A socket deadline runs on real time, not the injected clock: a test's hand-driven clock must
    // not keep a real request to a real process open forever.
    const timer = setTimeout(() => {
      fail(`no answer within ${formatSeconds(timeoutMs)}`);
      req.destroy();
    }, timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    req.on('error', (err) => fail(describeCause(err), err));
    req.end(body);
  });
}

/** "1 s", "0.5 s": a deadline as the error message states it. */
function formatSeconds(ms: number): string {
  return `${ms >= 10_000 ? Math.round(ms / 1000) : Number((ms / 1000).toFixed(2))} s`;
}

/** Maps a backend answer onto a value or a typed error. */
function answer(url: string, status: number, text: string): unknown {
  if (status >= 400) {
    const message = errorMessage(text);
    if (status === 400 && CONTEXT_LENGTH_RE.test(message)) throw new ContextLengthError(`${url}: ${message}`);
    const retryable = status >= 500 || status === 429;
    throw new RaasError('backend_unavailable', `LLM backend ${url} answered ${status}: ${message.slice(0, 500)}`, {
      retryable,
      status: 502,
    });
  }
  try {
    return text === '' ? null : JSON.parse(text);
  } catch (err) {
    throw new RaasError('backend_unavailable', `LLM backend ${url} answered non-JSON: ${text.slice(0, 200)}`, {
      cause: err,
      retryable: true,
    });
  }
}

function describeCause(err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (e?.code) return `${e.code} ${e.message ?? ''}`.trim();
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
