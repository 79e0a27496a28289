import net from 'node:net';
import { RaasError } from '../../protocol/errors.js';
import type { ToolCalls, ToolName, ToolResponse } from '../tools/protocol.js';
import { checkSocketPath } from './host.js';

interface Pending {
  resolve(v: unknown): void;
  reject(e: unknown): void;
}

/** Cap of one answer line to requests other than read_file and exec (bash, python, edit, ...). */
export const DEFAULT_MAX_LINE_BYTES = 4 << 20;
/** Room for an answer's JSON envelope and small fields. */
const ENVELOPE_BYTES = 64 << 10;
/** JSON escapes a control byte as \u00XX: the worst case of a string field, in bytes per byte. */
const JSON_WORST = 6;
/** The tool server's read cap when the host passes none (tools/files.ts DEFAULT_MAX_READ). */
const DEFAULT_READ_BYTES = 16 << 20;
/** exec's output cap per stream when the request names none, and its clamp (tools/exec.ts). */
const EXEC_OUTPUT_BYTES = 16 << 20;
const EXEC_OUTPUT_MAX = EXEC_OUTPUT_BYTES * 4;

export interface ToolClientOptions {
  /**
   * Longest answer line accepted for bash, python, edit and the other small answers; past it the
   * connection fails and the socket is destroyed, so a broken or hostile tool server cannot make the
   * host buffer without bound. read_file and exec answers get the room their request allows.
   */
  maxLineBytes?: number;
  /** The read cap the tool server applies when a read names none (sandbox.max_read_bytes). */
  maxReadBytes?: number;
}

/**
 * The cap for small answers under a given `sandbox.output_cap` (characters): four capped fields
 * (python's stdout, stderr, result, traceback), each character JSON-escaped at worst, plus the
 * envelope; never below 4 MiB.
 */
export function lineCapFor(c: { output_cap: number }): number {
  return Math.max(DEFAULT_MAX_LINE_BYTES, 4 * JSON_WORST * c.output_cap + ENVELOPE_BYTES);
}

/**
 * Host side of the tool server's JSON-lines protocol: one connection per sandbox, requests tagged
 * with ids so bash, python and the editor can be in flight together. An aborted call sends a
 * `cancel` (Ctrl-C for bash, KeyboardInterrupt for python) and rejects with the signal's reason.
 */
export class ToolClient {
  private sock: net.Socket | undefined;
  /** Pieces of the line not yet ended by a newline (kept as bytes: no quadratic string growth). */
  private chunks: Buffer[] = [];
  private buffered = 0;
  private seq = 0;
  private readonly pending = new Map<number, Pending>();
  private closedError: RaasError | undefined;
  private readonly maxLineBytes: number;
  private readonly maxReadBytes: number;
  /** Room of the answers still owed (read_file, exec): kept until the answer arrives, even if cancelled. */
  private readonly owed = new Map<number, number>();
  /** Most bytes of one unfinished line held at once (for tests of the bound). */
  peakBufferedBytes = 0;

  private constructor(opts: ToolClientOptions = {}) {
    this.maxLineBytes = opts.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
    this.maxReadBytes = opts.maxReadBytes ?? DEFAULT_READ_BYTES;
  }

  /** The longest answer a request can legitimately get, when larger than the small-answer cap. */
  private room(tool: string, body: Record<string, unknown>): number | undefined {
    const n = (v: unknown): number | undefined => (typeof v === 'number' && v > 0 ? v : undefined);
    if (tool === 'read_file') return Math.ceil((n(body.max_bytes) ?? this.maxReadBytes) / 3) * 4 + ENVELOPE_BYTES;
    if (tool === 'exec') return 2 * JSON_WORST * Math.min(n(body.max_output_bytes) ?? EXEC_OUTPUT_BYTES, EXEC_OUTPUT_MAX) + ENVELOPE_BYTES;
    return undefined;
  }

  /** The cap of the line being read: the small-answer cap, or the largest room still owed. */
  private lineCap(): number {
    let cap = this.maxLineBytes;
    for (const r of this.owed.values()) cap = Math.max(cap, r);
    return cap;
  }

  /** Connects to the tool server's socket. */
  static async connect(socketPath: string, signal?: AbortSignal, opts: ToolClientOptions = {}): Promise<ToolClient> {
    checkSocketPath(socketPath);
    const c = new ToolClient(opts);
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

  /** Called once with the tool server's pid when its `{"ready":true}` line arrives (socketpair). */
  private onReady: ((pid: number | undefined) => void) | undefined;

  /** Wraps an already connected socket (the host's end of the socketpair a bwrap sandbox inherits). */
  static fromSocket(sock: net.Socket, opts: ToolClientOptions = {}): ToolClient {
    const c = new ToolClient(opts);
    c.sock = sock;
    c.attach();
    return c;
  }

  /** Resolves with the tool server's pid once it announced itself on the connection. */
  ready(): Promise<number | undefined> {
    return new Promise((resolve) => (this.onReady = resolve));
  }

  private attach(): void {
    const sock = this.sock!;
    sock.on('data', (d: Buffer | string) => this.onData(typeof d === 'string' ? Buffer.from(d) : d));
    sock.on('error', () => undefined);
    sock.on('close', () =>
      this.fail(new RaasError('sandbox_error', 'the tool server closed its connection (the sandbox stopped or was closed)')),
    );
  }

  /** Splits bytes into lines; only the new chunk is scanned, and an unfinished line never grows past the cap. */
  private onData(d: Buffer): void {
    let start = 0;
    while (!this.closedError) {
      const nl = d.indexOf(0x0a, start);
      const end = nl < 0 ? d.length : nl;
      if (this.buffered + end - start > this.maxLineBytes && this.buffered + end - start > this.lineCap()) {
        this.fail(
          new RaasError(
            'sandbox_error',
            `the tool server sent a line over ${this.lineCap()} bytes, more than any answer to the requests in flight can be; the connection was closed (the cap follows sandbox.output_cap and sandbox.max_read_bytes; a tool server that sends this is broken or compromised)`,
          ),
        );
        this.chunks = [];
        this.buffered = 0;
        this.sock?.destroy();
        return;
      }
      if (nl < 0) {
        if (end > start) {
          this.chunks.push(d.subarray(start));
          this.buffered += end - start;
          this.peakBufferedBytes = Math.max(this.peakBufferedBytes, this.buffered);
        }
        return;
      }
      const piece = d.subarray(start, nl);
      const line = this.chunks.length ? Buffer.concat([...this.chunks, piece]) : piece;
      this.chunks = [];
      this.buffered = 0;
      start = nl + 1;
      // UTF-8 is decoded per whole line, so a character split across chunks stays intact.
      this.onLine(line.toString('utf8'));
    }
  }

  private onLine(line: string): void {
    let r: ToolResponse;
    try {
      r = JSON.parse(line) as ToolResponse;
    } catch {
      return;
    }
    // The first line over an inherited socketpair announces the tool server (bwrap).
    const hello = r as unknown as { ready?: unknown; pid?: unknown };
    if (hello.ready === true && this.onReady) {
      const cb = this.onReady;
      this.onReady = undefined;
      cb(typeof hello.pid === 'number' ? hello.pid : undefined);
      return;
    }
    if (r.id === null) return;
    this.owed.delete(r.id);
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

  /** Sends one request and waits for its answer (both typed by the tool's entry in ToolCalls). */
  call<K extends ToolName>(tool: K, body: ToolCalls[K]['args'], signal?: AbortSignal): Promise<ToolCalls[K]['answer']> {
    return this.request(tool, body, signal);
  }

  private request<T>(tool: ToolName, body: object, signal?: AbortSignal): Promise<T> {
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
      const room = this.room(tool, body as Record<string, unknown>);
      if (room !== undefined) this.owed.set(id, room);
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
