import { CancelledError, RaasError } from '../protocol/errors.js';
import {
  SIDECAR_EVENTS,
  SIDECAR_OPS,
  SIDECAR_PROTOCOL_VERSION,
  SidecarEnvelope,
  SidecarRequest,
  type SidecarId,
} from '../protocol/sidecar.js';
import { systemClock, type Clock } from '../util/clock.js';
import { RAAS_VERSION } from '../version.js';
import { errorBody, zodMessage, type ErrorBody } from './errors.js';
import type { SidecarBackend, SidecarCoordinator, SidecarLog } from './types.js';

/** Options of a protocol session. */
export interface SessionOptions {
  backend: SidecarBackend;
  /** Writes one protocol object as one stdout line. */
  send(message: object): void;
  log: SidecarLog;
  clock?: Clock;
  /** How often a waiting `next_batch` reports `step_progress`; 0 turns the events off. */
  progressIntervalMs?: number;
  maxLineBytes: number;
  /** Called once when closing starts. */
  onClosing?: () => void;
}

type Req = SidecarRequest;

/** After this long a close reports a `warning` event. */
const SLOW_CLOSE_MS = 5000;

/**
 * One sidecar conversation: parses request lines, runs ops, answers each id exactly once.
 * `hello`, `status` and `shutdown` answer at once; the ops that drive the coordinator run one at a
 * time in arrival order, so a trainer may pipeline requests without racing the coordinator.
 */
export class SidecarSession {
  private coordinator?: Promise<SidecarCoordinator>;
  /** The coordinator once its start finished (status answers without waiting for a start). */
  private ready?: SidecarCoordinator;
  private chain: Promise<void> = Promise.resolve();
  private readonly inflight = new Set<AbortController>();
  private closing?: Promise<void>;
  private readonly clock: Clock;
  private readonly pending = new Set<Promise<void>>();
  /** Resolves once `shutdown` or end() closed everything and every answer was sent. */
  readonly ended: Promise<void>;
  private markEnded!: () => void;

  constructor(private readonly opts: SessionOptions) {
    this.clock = opts.clock ?? systemClock;
    this.ended = new Promise((resolve) => (this.markEnded = resolve));
  }

  /** Handles one request line; never throws (a bad line gets an error answer). */
  handleLine(line: string): void {
    if (line.trim() === '') return;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (err) {
      return this.fail(null, {
        code: 'parse_error',
        message: `the line is not JSON (${(err as Error).message}); send one JSON object per line`,
      });
    }
    const env = SidecarEnvelope.safeParse(raw);
    if (!env.success) {
      const id = readableId(raw);
      return this.fail(id, {
        code: 'bad_request',
        message: `${zodMessage(env.error)}; a request is {"id": <string|int>, "op": <op>, ...}`,
      });
    }
    const { id, op } = env.data;
    if (!(SIDECAR_OPS as readonly string[]).includes(op)) {
      return this.fail(id, { code: 'unknown_op', message: `unknown op "${op}"; ops are ${SIDECAR_OPS.join(', ')}` });
    }
    const req = SidecarRequest.safeParse(raw);
    if (!req.success) return this.fail(id, { code: 'bad_request', message: `${op}: ${zodMessage(req.error)}` });
    if (this.closing && req.data.op !== 'shutdown') {
      return this.fail(id, { code: 'not_ready', message: 'the sidecar is shutting down; start a new one' });
    }
    this.dispatch(req.data);
  }

  /** Sends a `warning` event (no id). */
  emitWarning(message: string, data?: Record<string, unknown>): void {
    this.opts.send({ event: 'warning', data: { ...data, message } });
  }

  /** Answers a discarded over-long line. */
  handleTooLong(bytes: number): void {
    this.fail(null, {
      code: 'line_too_long',
      message: `a request line of ${bytes} bytes exceeds max_line_bytes (${this.opts.maxLineBytes}); raise it with --max-line-bytes`,
    });
  }

  /**
   * Cancels in-flight ops, waits for them, closes the coordinator. Its jobs in flight are cancelled
   * when `cancel` says so, by default unless a checkpoint was taken (or a state resumed): then a
   * resume may follow and must find them running. Safe to call twice (the first call decides).
   */
  close(reason = 'the sidecar is shutting down', cancel?: boolean): Promise<void> {
    if (!this.closing) {
      this.opts.onClosing?.();
      this.cancelOnClose = cancel ?? !this.checkpointed;
      this.closing = this.doClose(reason);
    }
    return this.closing;
  }

  /** A checkpoint was answered or a state resumed: a later resume may re-attach to the jobs in flight. */
  private checkpointed = false;
  /** What the close decided for the jobs in flight. */
  private cancelOnClose = true;

  /** EOF on stdin (or a signal): close, wait until every answer is sent, then `ended` resolves. */
  async end(reason: string): Promise<void> {
    try {
      await this.close(reason);
    } catch (err) {
      this.opts.log.error(`close failed: ${err instanceof Error ? err.message : String(err)}`);
    }
    await this.drain();
    this.markEnded();
  }

  private async doClose(reason: string): Promise<void> {
    for (const ac of this.inflight) ac.abort(new CancelledError(`cancelled: ${reason}`));
    // Cancelling many running jobs can take a while; say so rather than look hung.
    const slow = this.clock.setTimeout(() => {
      this.opts.log.warn(`closing: the coordinator is still cancelling its jobs after ${SLOW_CLOSE_MS / 1000} s`);
    }, SLOW_CLOSE_MS);
    try {
      await this.chain;
      await this.closeCoordinator(this.cancelOnClose);
    } finally {
      this.clock.clearTimeout(slow);
    }
  }

  /** Waits until every started op has sent its answer. */
  private async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending);
  }

  private dispatch(req: Req): void {
    switch (req.op) {
      case 'hello':
        return this.answer(req.id, () => this.hello(req.protocol_version));
      case 'status':
        return this.answer(req.id, () => this.status());
      case 'shutdown': {
        const sent = this.settle(
          req.id,
          this.close('shutdown requested', req.cancel).then(() => ({ closed: true, jobs: this.cancelOnClose ? 'cancelled' : 'kept' })),
        );
        void sent.then(() => this.drain()).then(() => this.markEnded());
        return;
      }
      case 'next_batch':
        return this.serial(req.id, async (signal) => {
          const c = await this.started(signal);
          return this.withProgress(req.id, c, () => c.nextBatch({ signal, timeout_s: req.timeout_s }));
        });
      case 'update_weights': {
        const { id: _id, op: _op, ...body } = req;
        return this.serial(req.id, async (signal) => (await this.started(signal)).updateWeights(body));
      }
      case 'pause_generation': {
        const { id: _id, op: _op, ...body } = req;
        return this.serial(req.id, async (signal) => (await this.started(signal)).pause(body, { signal }));
      }
      case 'resume_generation':
        return this.serial(req.id, async (signal) => (await this.started(signal)).resume());
      case 'checkpoint':
        return this.serial(req.id, async (signal) => {
          const state = await (await this.started(signal)).checkpoint();
          this.checkpointed = true;
          return { state };
        });
      case 'resume':
        return this.serial(req.id, async (signal) => {
          // The running coordinator's jobs stay: the restored one re-attaches to them by id.
          await this.closeCoordinator(false);
          this.use(this.opts.backend.resume(req.state, signal));
          const c = await this.started(signal);
          this.checkpointed = true;
          return { resumed: true, status: await c.status() };
        });
      case 'eval':
        return this.serial(req.id, (signal) => this.opts.backend.eval({ dataset: req.dataset, n: req.n, output: req.output, signal }));
    }
  }

  private hello(clientVersion: number | undefined): object {
    if (clientVersion !== undefined && clientVersion > SIDECAR_PROTOCOL_VERSION) {
      throw new RaasError(
        'bad_request',
        `hello: protocol_version ${clientVersion} is newer than this sidecar's (${SIDECAR_PROTOCOL_VERSION}); upgrade raas or use an older client`,
      );
    }
    const info = this.opts.backend.info();
    return {
      protocol_version: SIDECAR_PROTOCOL_VERSION,
      raas_version: RAAS_VERSION,
      ops: [...SIDECAR_OPS],
      events: [...SIDECAR_EVENTS],
      capabilities: ['pipelining', 'step_progress', 'resume', 'eval', 'pause_generation'],
      batch_size: info.batch_size,
      group_size: info.group_size,
      ...(info.name === undefined ? {} : { name: info.name }),
      limits: { max_line_bytes: this.opts.maxLineBytes },
    };
  }

  private async status(): Promise<object> {
    if (!this.coordinator) return { state: this.closing ? 'closed' : 'idle' };
    if (!this.ready) return { state: 'starting' };
    return { state: this.closing ? 'closing' : 'running', coordinator: await this.ready.status() };
  }

  /** The coordinator, started on first use (a failed start is retried by the next op). */
  private started(signal: AbortSignal): Promise<SidecarCoordinator> {
    signal.throwIfAborted();
    if (!this.coordinator) this.use(this.opts.backend.start(signal));
    return this.coordinator!;
  }

  /** Makes `p` the current coordinator; a failed start is forgotten so the next op retries. */
  private use(p: Promise<SidecarCoordinator>): void {
    this.coordinator = p;
    this.ready = undefined;
    p.then(
      (c) => {
        if (this.coordinator === p) this.ready = c;
      },
      () => {
        if (this.coordinator === p) this.coordinator = undefined;
      },
    );
  }

  private async closeCoordinator(cancel: boolean): Promise<void> {
    const p = this.coordinator;
    this.coordinator = undefined;
    this.ready = undefined;
    if (!p) return;
    const c = await p.catch(() => undefined);
    await c?.close({ cancel });
  }

  /** Emits `step_progress` every progressIntervalMs while `work` runs. */
  private async withProgress<T>(id: SidecarId, c: SidecarCoordinator, work: () => Promise<T>): Promise<T> {
    const every = this.opts.progressIntervalMs ?? 2000;
    if (every <= 0) return work();
    const t0 = this.clock.now();
    let handle: unknown;
    let done = false;
    const tick = (): void => {
      handle = this.clock.setTimeout(async () => {
        let status: unknown;
        try {
          status = await c.status();
        } catch {
          status = undefined;
        }
        if (done) return;
        const elapsed_s = Math.round(this.clock.now() - t0) / 1000;
        this.opts.send({ event: 'step_progress', data: { request_id: id, elapsed_s, status } });
        tick();
      }, every);
    };
    tick();
    try {
      return await work();
    } finally {
      done = true;
      this.clock.clearTimeout(handle);
    }
  }

  /** Runs an op that drives the coordinator after the ones before it. */
  private serial(id: SidecarId, fn: (signal: AbortSignal) => Promise<unknown>): void {
    const ac = new AbortController();
    this.inflight.add(ac);
    const run = this.chain.then(() => {
      ac.signal.throwIfAborted();
      return fn(ac.signal);
    });
    this.chain = run.then(
      () => undefined,
      () => undefined,
    );
    void this.settle(id, run).finally(() => this.inflight.delete(ac));
  }

  private answer(id: SidecarId, fn: () => unknown): void {
    void this.settle(id, Promise.resolve().then(fn));
  }

  private settle(id: SidecarId, work: Promise<unknown>): Promise<void> {
    const p = this.send(id, work).finally(() => this.pending.delete(p));
    this.pending.add(p);
    return p;
  }

  private async send(id: SidecarId, work: Promise<unknown>): Promise<void> {
    try {
      const result = await work;
      this.opts.send({ id, ok: true, result: result ?? null });
    } catch (err) {
      const body = errorBody(err);
      if (body.code === 'internal') this.opts.log.error(`op ${String(id)} failed: ${err instanceof Error ? err.stack : String(err)}`);
      this.fail(id, body);
    }
  }

  private fail(id: SidecarId | null, error: ErrorBody): void {
    this.opts.send({ id, ok: false, error });
  }
}

/** The id of a request that failed validation, when it is still usable for the answer. */
function readableId(raw: unknown): SidecarId | null {
  if (typeof raw !== 'object' || raw === null || !('id' in raw)) return null;
  const id = (raw as { id: unknown }).id;
  if (typeof id === 'string' && id.length > 0 && id.length <= 256) return id;
  if (typeof id === 'number' && Number.isInteger(id)) return id;
  return null;
}
