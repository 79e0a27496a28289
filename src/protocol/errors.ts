/**
 * The one registry of API error codes. Every error the HTTP API or the sidecar answers with is a
 * RaasError carrying one of these codes; docs/api.md lists them and a test keeps both in sync.
 */
export const ERROR_CODES = {
  bad_request: { status: 400, doc: 'The body or a query failed validation; the message names the field.' },
  unknown_data_source: { status: 400, doc: 'instance.data_source (or task) names no registered handler.' },
  invalid_address: { status: 400, doc: 'POST /add_llm_server: the address is not an http(s) URL with a host; send http://host:port.' },
  tokenizer_mismatch: {
    status: 400,
    doc: "POST /add_llm_server (and raas serve's configured backends): the backend's /tokenize ids differ from raas's tokenizer; set `tokenizer` to the served model.",
  },
  invalid_instance: { status: 400, doc: "The instance failed its handler's schema; the message names the field." },
  unknown_key: {
    status: 400,
    doc: "POST /process in strict mode (`Prefer: handling=strict`, or the server's `unknown_request_keys: reject`): a key the server does not read; the message names it and the nearest valid one.",
  },
  unauthorized: { status: 401, doc: 'Missing or wrong bearer token.' },
  forbidden: {
    status: 403,
    doc: "The token is valid but not for this route: server-wide routes (/stop, /start, /drain, /workers, /metrics, node registration) take the admin token, /process a tenant's token. A server without a token (and raas view) on loopback also answers it to a request whose Host is not a loopback name (DNS rebinding).",
  },
  job_not_found: {
    status: 404,
    doc: 'GET /jobs/:id: no job with that id (never seen, expired, or in flight at a crash). Resubmit it with the same id and attach: true.',
  },
  route_not_found: { status: 404, doc: 'No such route.' },
  node_not_found: {
    status: 404,
    doc: 'A node route named a node the registry does not know (never registered, left, or forgotten after missing its heartbeats): register it again.',
  },
  method_not_allowed: { status: 405, doc: 'The route exists with another method.' },
  too_many_streams: {
    status: 429,
    doc: 'GET /events: this token already holds `console.max_streams` open event streams (default 8); close one (a browser tab, a script) or raise the limit.',
  },
  body_too_large: { status: 413, doc: 'The body exceeds the configured limit (default 8 MiB).' },
  unsupported_media_type: { status: 415, doc: 'Send application/json.' },
  job_conflict: { status: 409, doc: 'attach: true, but the job with this id has a different instance.' },
  server_stopped: { status: 503, doc: 'Intake is closed (POST /stop); POST /start opens it.' },
  no_llm_backends: { status: 503, doc: 'No LLM backend is registered; POST /add_llm_server first.' },
  queue_full: { status: 503, doc: 'max_queued_jobs reached; retry after the Retry-After header.' },
  tenant_quota: {
    status: 503,
    doc: "The tenant's max_queued jobs are waiting for a stage; retry after the Retry-After header (other tenants are not affected).",
  },
  server_draining: {
    status: 503,
    doc: 'The server is draining (POST /drain): it finishes what it holds and takes nothing new; send new jobs to another server (attach to its own jobs still works).',
  },
  backend_owned: {
    status: 409,
    doc: 'POST /add_llm_server: another tenant registered this address; each backend belongs to one tenant (its jobs use only it).',
  },
  backend_unavailable: { status: 502, doc: 'An LLM backend failed past its retry budget.' },
  context_length_exceeded: { status: 400, doc: "The prompt plus max_tokens exceeds the backend's context." },
  config_invalid: { status: 400, doc: 'A configuration file or flag is invalid; the message names the key.' },
  sandbox_unavailable: {
    status: 500,
    doc: 'The sandbox runtime cannot start (missing bwrap, or the sandbox user); the message names the fix.',
  },
  sandbox_error: { status: 500, doc: 'A sandbox or its tool server failed.' },
  sandbox_limit: {
    status: 500,
    doc: 'A sandbox hit one of its limits (sandbox.max_read_bytes, sandbox.disk_mb, memory, processes); the message names the limit and its config key.',
  },
  tool_error: { status: 400, doc: 'A tool request was malformed or refused.' },
  gateway_closed: {
    status: 409,
    doc: "Agent gateway: the job this gateway belongs to has ended; a harness's late call is refused (answered in that API's error shape).",
  },
  cancelled: { status: 499, doc: 'The operation was cancelled.' },
  timeout: { status: 504, doc: 'The operation ran past its time limit.' },
  internal: { status: 500, doc: 'An unexpected server error; the message says what failed.' },
  dataset_exhausted: {
    status: 409,
    doc: 'Coordinator: every configured epoch of the dataset was served and too few accepted groups remain for another batch; raise dataset.epochs.',
  },
  no_informative_groups: {
    status: 409,
    doc: 'Coordinator: a step finished max_groups_per_step groups (default 30 × batch_size) without batch_size informative ones; the message says what the groups were (rewards all equal to what). Check the reward, or raise max_groups_per_step (0: no limit).',
  },
  generation_paused: {
    status: 409,
    doc: 'Coordinator: generation is paused and too few accepted groups are buffered for a batch; call resume() (sidecar: resume_generation) first.',
  },
  server_unreachable: {
    status: 503,
    doc: 'Client: the rollout server did not answer (refused, reset, timed out) within the retry budget; check the URL and that `raas serve` runs.',
  },
  // sidecar-only codes
  parse_error: { status: 400, doc: 'Sidecar: the line is not JSON.' },
  unknown_op: { status: 400, doc: 'Sidecar: op is not one of the documented ops.' },
  not_ready: { status: 409, doc: 'Sidecar: the coordinator is not started or already closed.' },
  line_too_long: {
    status: 413,
    doc: 'Sidecar: the request line exceeds max_line_bytes (default 64 MiB, `raas sidecar --max-line-bytes`); it was discarded.',
  },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

/** An error with a stable code and an HTTP status; `retryable: false` marks what retrying cannot fix. */
export class RaasError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  constructor(code: ErrorCode, message: string, opts: { cause?: unknown; retryable?: boolean; status?: number } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'RaasError';
    this.code = code;
    this.status = opts.status ?? ERROR_CODES[code].status;
    this.retryable = opts.retryable ?? (this.status >= 500 && this.status !== 501);
  }
  /** The JSON body every API error answers with (`detail` keeps FastAPI-style clients working). */
  toJSON(): { error: { code: ErrorCode; message: string }; detail: string } {
    return { error: { code: this.code, message: this.message }, detail: this.message };
  }
}

/** Raised when an operation is cancelled (a job cancel, a shutdown). */
export class CancelledError extends RaasError {
  constructor(message = 'cancelled', cause?: unknown) {
    super('cancelled', message, { cause, retryable: false });
    this.name = 'CancelledError';
  }
}

/** Raised when an operation runs past its time limit. */
export class TimeoutError extends RaasError {
  constructor(message = 'timed out', cause?: unknown) {
    super('timeout', message, { cause, retryable: false });
    this.name = 'TimeoutError';
  }
}

/** The prompt does not fit the backend's context window (vLLM/SGLang answer 400). */
export class ContextLengthError extends RaasError {
  constructor(message: string) {
    super('context_length_exceeded', message, { retryable: false });
    this.name = 'ContextLengthError';
  }
}

/** Classifies an abort reason or error: 'cancelled', 'timeout', or undefined for any other error. */
export function cancellationKind(err: unknown): 'cancelled' | 'timeout' | undefined {
  if (err instanceof TimeoutError) return 'timeout';
  if (err instanceof CancelledError) return 'cancelled';
  if (err instanceof Error && err.name === 'TimeoutError') return 'timeout';
  if (err instanceof Error && err.name === 'AbortError') {
    return err.cause === undefined ? 'cancelled' : (cancellationKind(err.cause) ?? 'cancelled');
  }
  return undefined;
}

/** Formats a zod-style issue path as `a.b[2].c` for messages that name the field. */
export function fieldPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : out ? `.${String(p)}` : String(p);
  return out || '(body)';
}
