import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import { RaasError, fieldPath } from '../protocol/errors.js';
import { CancelResponse, ProcessRequest, type JobResponse, type Result } from '../protocol/process.js';
import { JobResponseFast, ResultFast } from './fast-schemas.js';
import { AddLlmServerRequest, LlmServersResponse } from '../protocol/llm.js';
import { OkResponse, StatusResponse } from '../protocol/status.js';
import { PauseRequest, PauseResponse, ResumeResponse } from '../protocol/pause.js';
import { PrefetchRequest, PrefetchResponse } from '../protocol/prefetch.js';
import { NodeList, type NodeInfo } from '../protocol/nodes.js';
import { Transport, type CallOptions, type TransportOptions } from './transport.js';

/** Options of {@link RolloutClient}. */
export type RolloutClientOptions = TransportOptions;

/** Per-call options of {@link RolloutClient.process}. */
export interface ProcessOptions extends Omit<CallOptions, 'timeout_ms'> {
  /**
   * When the signal aborts, send /cancel for the job (default true). The fleet turns it off when it
   * abandons a server that stopped answering, where a cancel could not arrive anyway.
   */
  cancelOnAbort?: boolean;
}

/**
 * A process request as callers write it: `sampling_params` may be omitted, `job_id` is generated
 * when absent, `attach` defaults to true.
 */
export type ProcessInput = z.input<typeof ProcessRequest>;

/**
 * Typed client of one rollout server. Every answer is parsed with the `src/protocol` schemas;
 * connection errors and 5xx answers are retried, honouring `Retry-After`. /process is sent with
 * `attach: true` (unless the request says `attach: false`), so a retry attaches to the job the
 * server already runs or finished instead of starting it again; without attach it is not retried.
 */
export class RolloutClient {
  /** The server's base URL, without a trailing slash. */
  readonly url: string;
  private readonly t: Transport;
  private closed = false;

  constructor(opts: RolloutClientOptions) {
    this.t = new Transport(opts);
    this.url = this.t.url;
  }

  /**
   * POST /process: held until the job ends, then its result. Failure of the rollout is data
   * (`critical_error`); an aborted signal ends the wait, cancels the job on the server (confirmed or
   * found already gone) and rejects with the signal's reason.
   */
  async process(req: ProcessInput, opts: ProcessOptions = {}): Promise<Result> {
    const attach = req.attach ?? true;
    const body = parseRequest({ ...req, job_id: req.job_id || randomUUID(), attach });
    // Retrying a /process without attach could run the job twice.
    const retries = attach ? opts.retries : 0;
    try {
      return (await this.t.call('POST', '/process', ResultFast, body, { ...opts, retries, timeout_ms: null }))!;
    } catch (err) {
      if (opts.signal?.aborted && opts.cancelOnAbort !== false) await this.cancelQuietly(body.job_id!);
      throw err;
    }
  }

  /** POST /cancel: cancels every job with the id; an id the server does not know answers `cancelled: false, state: "unknown"`. */
  async cancel(jobId: string, opts: CallOptions = {}): Promise<CancelResponse> {
    return (await this.t.call('POST', '/cancel', CancelResponse, { job_id: jobId }, opts))!;
  }

  /** GET /jobs/:id, or undefined when the server does not know the id (never seen, expired, lost in a crash). */
  async job(jobId: string, opts: CallOptions = {}): Promise<JobResponse | undefined> {
    return this.t.call('GET', `/jobs/${encodeURIComponent(jobId)}`, JobResponseFast, undefined, { ...opts, notFoundAsUndefined: true });
  }

  /** GET /status. */
  async status(opts: CallOptions = {}): Promise<StatusResponse> {
    return (await this.t.call('GET', '/status', StatusResponse, undefined, opts))!;
  }

  /** GET /nodes: the rollout servers registered with this server when it serves as a registry. */
  async nodes(opts: CallOptions = {}): Promise<NodeInfo[]> {
    return (await this.t.call('GET', '/nodes', NodeList, undefined, opts))!;
  }

  /** POST /drain: the server takes nothing new, finishes what it holds, then leaves its registry (admin token). */
  async drain(opts: CallOptions = {}): Promise<z.infer<typeof OkResponse>> {
    return (await this.t.call('POST', '/drain', OkResponse, {}, opts))!;
  }

  /** GET /health without retries: true when the server answers 2xx within `timeout_ms` (default 2 s). */
  async health(opts: CallOptions = {}): Promise<boolean> {
    try {
      await this.t.call('GET', '/health', OkResponse, undefined, { retries: 0, timeout_ms: 2000, ...opts });
      return true;
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      return false;
    }
  }

  /** POST /add_llm_server (re-adding an address updates its api and weight_version). */
  async addLlmServer(req: z.input<typeof AddLlmServerRequest>, opts: CallOptions = {}): Promise<LlmServersResponse> {
    const body = AddLlmServerRequest.parse(req);
    return (await this.t.call('POST', '/add_llm_server', LlmServersResponse, body, opts))!;
  }

  /** POST /remove_llm_server. */
  async removeLlmServer(address: string, opts: CallOptions = {}): Promise<LlmServersResponse> {
    return (await this.t.call('POST', '/remove_llm_server', LlmServersResponse, { address }, opts))!;
  }

  /** POST /clear_llm_server: no new job gets the removed backends; jobs holding one keep it. */
  async clearLlmServers(opts: CallOptions = {}): Promise<z.infer<typeof OkResponse>> {
    return (await this.t.call('POST', '/clear_llm_server', OkResponse, {}, opts))!;
  }

  /** POST /start: opens intake. */
  async start(opts: CallOptions = {}): Promise<z.infer<typeof OkResponse>> {
    return (await this.t.call('POST', '/start', OkResponse, {}, opts))!;
  }

  /** POST /stop: cancels every job and closes intake; HTTP stays up. */
  async stop(opts: CallOptions = {}): Promise<z.infer<typeof OkResponse>> {
    return (await this.t.call('POST', '/stop', OkResponse, {}, opts))!;
  }

  /**
   * POST /pause: no model call starts until resume(); answers once none is in flight (`drain` lets
   * them finish, `abort` cuts them; they continue after the resume). Not timed out by default: a
   * drain lasts as long as the longest call.
   */
  async pause(req: z.input<typeof PauseRequest> = {}, opts: CallOptions = {}): Promise<PauseResponse> {
    const body = PauseRequest.parse(req);
    return (await this.t.call('POST', '/pause', PauseResponse, body, { timeout_ms: null, ...opts }))!;
  }

  /** POST /prefetch: the server starts preparing the images of instances that will be submitted soon (a hint; nothing is started). */
  async prefetch(instances: Array<Record<string, unknown>>, opts: CallOptions = {}): Promise<PrefetchResponse> {
    return (await this.t.call('POST', '/prefetch', PrefetchResponse, PrefetchRequest.parse({ instances }), opts))!;
  }

  /** POST /resume: held jobs go on. */
  async resume(opts: CallOptions = {}): Promise<ResumeResponse> {
    return (await this.t.call('POST', '/resume', ResumeResponse, {}, opts))!;
  }

  /** Ends calls in progress (they reject with CancelledError; jobs keep running on the server) and frees the keep-alive sockets. Safe twice. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.t.close();
  }

  private async cancelQuietly(jobId: string): Promise<void> {
    try {
      await this.cancel(jobId, { retries: 2 });
    } catch {
      // unreachable or stopped: nothing more we can do from here.
    }
  }
}

/** Validates a request before sending, so a bad field fails here with its path, not as a server 400. */
function parseRequest(req: unknown): ProcessRequest {
  const r = ProcessRequest.safeParse(req);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new RaasError('bad_request', `process request: ${fieldPath(issue?.path ?? [])}: ${issue?.message}`, { retryable: false });
  }
  return r.data;
}
