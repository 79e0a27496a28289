import net from 'node:net';
import { RaasError } from '../../protocol/errors.js';
import type { ToolResponse } from '../tools/protocol.js';
import { checkSocketPath } from './host.js';

interface Pending {
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

/**
 * Host side of the tool server's JSON-lines protocol: one connection per sandbox, requests tagged
 * with ids so bash, python and the editor can be in flight together. An aborted call sends a
 * `cancel` (Ctrl-C for bash, KeyboardInterrupt for python) and rejects with the signal's reason.
 */
export class ToolClient {
  private sock: net.Socket | undefined;
  private buf = '';
  private seq = 0;
  private readonly pending = new Map<number, Pending>();
  private closedError: RaasError | undefined;

  private constructor() {}

  /** Connects to the tool server's socket. */
  static async connect(socketPath: string, signal?: AbortSignal): Promise<ToolClient> {
    checkSocketPath(socketPath);
    const c = new ToolClient();
    await new Promise<void>((resolve, reject) => {
      const sock = net.connect(socketPath);
      const onAbort = (): void => {
        sock.destroy();
        reject(signal!.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      sock.once('connect', () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      });
      sock.once('error', (e) => {
        signal?.removeEventListener('abort', onAbort);
        reject(new RaasError('sandbox_error', `cannot connect to the tool server at ${socketPath}: ${e.message}`, { cause: e }));
      });
      c.sock = sock;
    });
    c.attach();
    return c;
  }

  /** Wraps an already connected socket (the host's end of the socketpair a bwrap sandbox inherits). */
  static fromSocket(sock: net.Socket): ToolClient {
    const c = new ToolClient();
    c.sock = sock;
    c.attach();
    return c;
  }

  private attach(): void {
    const sock = this.sock!;
    sock.setEncoding('utf8');
    sock.on('data', (d: string) => {
      this.buf += d;
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl);
        this.buf = this.buf.slice(nl + 1);
        this.onLine(line);
      }
    });
    sock.on('error', () => undefined);
    sock.on('close', () => this.fail(new RaasError('sandbox_error', 'the tool server closed its connection (the sandbox stopped or was closed)')));
  }

  private onLine(line: string): void {
    let r: ToolResponse;
    try {
      r = JSON.parse(line) as ToolResponse;
    } catch {
      return;
    }
    if (r.id === null) return;
    const p = this.pending.get(r.id);
    if (!p) return;
    this.pending.delete(r.id);
    if (r.ok) p.resolve(r.result);
    else p.reject(new RaasError(r.error.code, r.error.message, { retryable: false }));
  }

  private fail(e: RaasError): void {
    this.closedError ??= e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
  }

  /** Sends one request and waits for its answer. */
  call<T>(tool: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.closedError) return Promise.reject(this.closedError);
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      const onAbort = (): void => {
        this.pending.delete(id);
        this.send({ id: ++this.seq, tool: 'cancel', target: id });
        reject(signal!.reason);
      };
      this.pending.set(id, {
        resolve: (v) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(v as T);
        },
        reject: (e) => {
          signal?.removeEventListener('abort', onAbort);
          reject(e);
        },
      });
      signal?.addEventListener('abort', onAbort, { once: true });
      this.send({ ...body, id, tool });
    });
  }

  /** Writes a raw line (tests use it to send malformed input). */
  sendRaw(line: string): void {
    this.sock?.write(line);
  }

  private send(obj: Record<string, unknown>): void {
    if (this.sock && !this.sock.destroyed) this.sock.write(JSON.stringify(obj) + '\n');
  }

  /** Drops the connection; pending calls reject. Safe twice. */
  close(): void {
    this.fail(new RaasError('sandbox_error', 'the sandbox is closed'));
    this.sock?.destroy();
  }
}
