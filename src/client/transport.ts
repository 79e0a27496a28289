import http from 'node:http';
import https from 'node:https';
import type { z } from 'zod';
import { ERROR_CODES, RaasError, CancelledError, fieldPath, type ErrorCode } from '../protocol/errors.js';
import { systemClock, type Clock } from '../util/clock.js';
import { AttemptError, DEFAULT_BACKOFF, isConnectionError, parseRetryAfter, withRetries, type Backoff } from './retry.js';

/** Agents for http and https; the client creates keep-alive ones unless given its own. */
export interface Agents {
  http?: http.Agent;
  https?: https.Agent;
}

/** Options shared by the client and its transport. */
export interface TransportOptions {
  url: string;
  token?: string;
  retries?: number;
  backoff?: Backoff;
  agent?: Agents;
  clock?: Clock;
  /** Sockets per origin. Each held /process answer occupies one, so this bounds concurrent jobs per server. */
  max_sockets?: number;
  /** Timeout of calls other than /process (which is held until the job ends, so it has none). */
  timeout_ms?: number;
  random?: () => number;
}

/** One call's options. */
export interface CallOptions {
  signal?: AbortSignal;
  /** Retries for this call (default: the client's). */
  retries?: number;
  /** Overall timeout of one attempt; `null` means none (long polls). */
  timeout_ms?: number | null;
}

/** Builds the keep-alive agents a client owns: sized for hundreds of held long polls per server. */
function keepAliveAgents(maxSockets: number): Required<Agents> {
  const opts = { keepAlive: true, maxSockets, maxFreeSockets: Math.min(256, maxSockets), scheduling: 'lifo' as const };
  return { http: new http.Agent(opts), https: new https.Agent(opts) };
}

/** One answer as the transport reads it. */
interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * HTTP to one rollout server: node:http with keep-alive agents underneath, our retry layer on top,
 * every answer parsed by a `src/protocol` schema, API errors turned back into RaasError with their
 * code. A coordinator holds one `/process` answer per job in flight (thousands at scale), so the
 * call is kept lean: through got a held answer took 31 KB of heap and 550 µs of CPU to submit,
 * through node:http 18.5 KB and 330 µs (docs/benchmarks.md, "Client"); the server's LLM client
 * made the same choice.
 */
export class Transport {
  readonly url: string;
  private readonly base: URL;
  private readonly agent: http.Agent;
  private readonly headers: Record<string, string>;
  private readonly ownAgents: Required<Agents> | undefined;
  private readonly opts: TransportOptions;
  private readonly clock: Clock;
  private readonly inflight = new Set<AbortController>();
  private closed = false;

  constructor(opts: TransportOptions) {
    let parsed: URL;
    try {
      parsed = new URL(opts.url);
    } catch {
      throw new RaasError('config_invalid', `url: "${opts.url}" is not a URL; give the rollout server as http://host:port`);
    }
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
      throw new RaasError('config_invalid', `url: "${opts.url}" must start with http:// or https://`);
    }
    this.url = opts.url.replace(/\/+$/, '');
    this.base = parsed;
    this.opts = opts;
    this.clock = opts.clock ?? systemClock;
    this.ownAgents = opts.agent ? undefined : keepAliveAgents(opts.max_sockets ?? 1024);
    const agents = opts.agent ?? this.ownAgents!;
    const agent = parsed.protocol === 'https:' ? agents.https : agents.http;
    if (!agent) throw new RaasError('config_invalid', `agent: no ${parsed.protocol.slice(0, -1)} agent given for ${opts.url}`);
    this.agent = agent;
    this.headers = opts.token ? { authorization: `Bearer ${opts.token}` } : {};
  }

  /**
   * Sends one request with retries. Resolves with the parsed 2xx body, or `undefined` for a 404
   * when `notFoundAsUndefined`; throws RaasError otherwise (`server_unreachable` after connection
   * failures), or the signal's reason when aborted.
   */
  async call<S extends z.ZodType>(
    method: 'GET' | 'POST',
    path: string,
    schema: S,
    body: unknown,
    opts: CallOptions & { notFoundAsUndefined?: boolean } = {},
  ): Promise<z.infer<S> | undefined> {
    const retries = opts.retries ?? this.opts.retries ?? 4;
    const timeoutMs = opts.timeout_ms === undefined ? (this.opts.timeout_ms ?? 30_000) : opts.timeout_ms;
    if (this.closed) throw new CancelledError(`RolloutClient for ${this.url} is closed`);
    // One controller per call, aborted by the caller's signal or by close(): a held /process must
    // not outlive the client (nor reconnect through its retries).
    const ac = new AbortController();
    const onAbort = (): void => ac.abort(opts.signal!.reason);
    if (opts.signal?.aborted) onAbort();
    else opts.signal?.addEventListener('abort', onAbort, { once: true });
    this.inflight.add(ac);
    const call = { ...opts, signal: ac.signal };
    try {
      return await withRetries(() => this.attempt(method, path, schema, body, call, timeoutMs), {
        retries,
        backoff: this.opts.backoff ?? DEFAULT_BACKOFF,
        clock: this.clock,
        signal: ac.signal,
        random: this.opts.random,
      });
    } catch (err) {
      if (ac.signal.aborted) throw abortReason(ac.signal);
      throw err;
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      this.inflight.delete(ac);
    }
  }

  private async attempt<S extends z.ZodType>(
    method: 'GET' | 'POST',
    path: string,
    schema: S,
    body: unknown,
    opts: CallOptions & { notFoundAsUndefined?: boolean },
    timeoutMs: number | null,
  ): Promise<z.infer<S> | undefined> {
    let res: Answer;
    try {
      res = await this.send(method, path, method === 'POST' ? JSON.stringify(body ?? {}) : undefined, opts.signal, timeoutMs);
    } catch (err) {
      if (opts.signal?.aborted) throw abortReason(opts.signal);
      const error = new RaasError('server_unreachable', `${method} ${this.url}${path}: ${(err as Error).message}`, { cause: err });
      throw new AttemptError({ error, retryable: isConnectionError(err) });
    }
    const status = res.status;
    if (status === 404 && opts.notFoundAsUndefined) return undefined;
    if (status < 200 || status >= 300) {
      const error = apiError(method, this.url + path, status, res.body);
      const retryAfterMs = parseRetryAfter(res.headers['retry-after']);
      throw new AttemptError({ error, retryable: status >= 500, retryAfterMs });
    }
    let json: unknown;
    try {
      json = res.body === '' ? {} : JSON.parse(res.body);
    } catch {
      throw new RaasError('internal', `${method} ${this.url}${path}: answer is not JSON (status ${status}): ${res.body.slice(0, 200)}`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new RaasError(
        'internal',
        `${method} ${this.url}${path}: answer does not match the protocol at ${fieldPath(issue?.path ?? [])}: ${issue?.message}; client and server versions may differ`,
        { retryable: false },
      );
    }
    return parsed.data;
  }

  /**
   * One exchange: the status, headers and body text. Rejects on a connection failure (its Node
   * error code kept, for isConnectionError), on `timeoutMs` with a TimeoutError (ETIMEDOUT), or
   * with the signal's reason when it aborts.
   */
  private send(
    method: string,
    path: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
    timeoutMs: number | null,
  ): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const headers: Record<string, string> = { ...this.headers, accept: 'application/json' };
      if (body !== undefined) {
        headers['content-type'] = 'application/json';
        headers['content-length'] = String(Buffer.byteLength(body));
      }
      const mod = this.base.protocol === 'https:' ? https : http;
      const req = mod.request(
        {
          protocol: this.base.protocol,
          hostname: this.base.hostname.replace(/^\[|\]$/g, ''),
          port: this.base.port,
          path: this.base.pathname.replace(/\/+$/, '') + path,
          method,
          agent: this.agent,
          headers,
          ...(signal ? { signal } : {}),
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', fail);
          // The server went away in the middle of the answer.
          res.on('aborted', () => fail(Object.assign(new Error('the answer was cut off'), { code: 'ECONNRESET' })));
          res.on('end', () => {
            if (done) return;
            done = true;
            clear();
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') });
          });
        },
      );
      let timer: unknown;
      let done = false;
      const clear = (): void => {
        if (timer !== undefined) this.clock.clearTimeout(timer);
        timer = undefined;
      };
      function fail(err: Error): void {
        if (done) return;
        done = true;
        clear();
        reject(err);
      }
      req.on('error', fail);
      if (timeoutMs !== null) {
        timer = this.clock.setTimeout(() => {
          const err = Object.assign(new Error(`no answer within ${timeoutMs} ms`), { name: 'TimeoutError', code: 'ETIMEDOUT' });
          req.destroy(err);
        }, timeoutMs);
      }
      req.end(body);
    });
  }

  /** Ends every call in progress (CancelledError) and frees the sockets of agents this transport created (never ones the caller passed in). Safe twice. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const reason = new CancelledError(`RolloutClient for ${this.url} closed`);
    for (const ac of this.inflight) ac.abort(reason);
    this.inflight.clear();
    this.ownAgents?.http.destroy();
    this.ownAgents?.https.destroy();
  }
}

/** Turns an error answer (`{error:{code,message}, detail}`, or FastAPI's `{detail}`) into a RaasError. */
function apiError(method: string, url: string, status: number, text: string): RaasError {
  let code: ErrorCode | undefined;
  let message = text.slice(0, 500);
  try {
    const body = JSON.parse(text) as { error?: { code?: string; message?: string }; detail?: unknown; message?: string };
    const c = body.error?.code;
    if (c !== undefined && Object.hasOwn(ERROR_CODES, c)) code = c as ErrorCode;
    message = body.error?.message ?? (typeof body.detail === 'string' ? body.detail : undefined) ?? body.message ?? message;
  } catch {
    // not JSON: keep the text
  }
  code ??= status === 404 ? 'route_not_found' : status === 401 ? 'unauthorized' : status >= 500 ? 'internal' : 'bad_request';
  return new RaasError(code, `${method} ${url} → ${status} ${code}: ${message}`, { status });
}

/** The reason to reject with when a caller's signal aborted: its reason if an Error, else CancelledError. */
export function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error && r.name !== 'AbortError' ? r : new CancelledError('request aborted by the caller', r);
}
