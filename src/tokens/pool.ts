import { Worker } from 'node:worker_threads';
import type { Chunk, Tokenizer, TokenizerOrigin } from './tokenizer.js';
import type { EncodeRequest } from './encode-worker.js';

/** Settings of the tokenizer worker pool. */
export interface EncoderPoolOptions {
  /** Worker threads (each loads its own copy of the tokenizer, ~200 MB for Qwen3). */
  workers: number;
  /** Text runs shorter than this are encoded on the calling thread (the round trip costs more). */
  minChars: number;
}

interface Pending {
  resolve(ids: Int32Array[]): void;
  reject(err: Error): void;
}

interface Slot {
  worker: Worker;
  pending: Map<number, Pending>;
}

/**
 * Encodes long text runs on worker threads, so one large observation (tens of thousands of CJK
 * characters take about a second of BPE) never stalls the server's event loop: `/health`, the
 * routes and every other job keep running while it is encoded. Workers start at the first long run
 * and are terminated by `close()`; a worker that dies is replaced and its requests fail.
 */
export class EncoderPool {
  private readonly slots: Array<Slot | undefined>;
  private seq = 0;
  private closed = false;
  /** Characters encoded on workers so far. */
  offloadedChars = 0;

  constructor(
    private readonly origin: TokenizerOrigin,
    readonly opts: EncoderPoolOptions,
  ) {
    this.slots = Array.from({ length: Math.max(0, opts.workers) }, () => undefined);
  }

  /** Ids of chunks: the long runs on workers, the rest here, in order. */
  async encode(tok: Tokenizer, chunks: readonly Chunk[], signal?: AbortSignal): Promise<number[]> {
    const long = chunks.filter((c): c is { text: string; index: number } => 'text' in c && c.text.length >= this.opts.minChars);
    if (long.length === 0 || this.slots.length === 0 || this.closed) return tok.encodeChunks(chunks);
    signal?.throwIfAborted();
    const encoded = await this.request(long, signal);
    const out: number[] = [];
    let k = 0;
    for (const c of chunks) {
      if ('text' in c && c.text.length >= this.opts.minChars) {
        for (const id of encoded[k++]!) out.push(id);
      } else {
        for (const id of tok.encodeChunks([c])) out.push(id);
      }
    }
    return out;
  }

  private request(runs: Array<{ text: string; index: number }>, signal?: AbortSignal): Promise<Int32Array[]> {
    const slot = this.pick();
    const id = ++this.seq;
    for (const r of runs) this.offloadedChars += r.text.length;
    return new Promise<Int32Array[]>((resolve, reject) => {
      // A cancelled job does not wait for its encoding; the worker's answer is then dropped.
      const onAbort = (): void => {
        slot.pending.delete(id);
        reject(signal!.reason as Error);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = (): void => signal?.removeEventListener('abort', onAbort);
      slot.pending.set(id, {
        resolve: (ids) => (done(), resolve(ids)),
        reject: (err) => (done(), reject(err)),
      });
      const req: EncodeRequest = { id, runs };
      slot.worker.postMessage(req);
    });
  }

  /** The worker with the fewest requests in flight, started if needed. */
  private pick(): Slot {
    let best = -1;
    for (let i = 0; i < this.slots.length; i++) {
      const s = this.slots[i];
      if (!s) {
        best = i;
        break;
      }
      if (best < 0 || s.pending.size < this.slots[best]!.pending.size) best = i;
    }
    return (this.slots[best] ??= this.start(best));
  }

  private start(i: number): Slot {
    // Under the TypeScript sources (tests) the worker is the .ts file, loaded through tsx's loader,
    // which a worker thread must register for itself.
    const worker = import.meta.url.endsWith('.ts')
      ? new Worker(
          `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(new URL('./encode-worker.ts', import.meta.url).href)}); });`,
          { eval: true, workerData: this.origin },
        )
      : new Worker(new URL('./encode-worker.js', import.meta.url), { workerData: this.origin });
    worker.unref();
    const slot: Slot = { worker, pending: new Map() };
    worker.on('message', (m: { id?: number; ids?: Int32Array[]; error?: string }) => {
      if (m.id === undefined) return;
      const p = slot.pending.get(m.id);
      if (!p) return;
      slot.pending.delete(m.id);
      if (m.ids) p.resolve(m.ids);
      else p.reject(new Error(`tokenizer worker: ${m.error ?? 'no answer'}`));
    });
    const fail = (err: Error): void => {
      if (this.slots[i] === slot) this.slots[i] = undefined;
      for (const p of slot.pending.values()) p.reject(err);
      slot.pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`tokenizer worker exited with code ${code}`)));
    return slot;
  }

  /** Workers running now. */
  get running(): number {
    return this.slots.filter(Boolean).length;
  }

  /** Terminates the workers; later encodes run on the calling thread. Safe to call twice. */
  async close(): Promise<void> {
    this.closed = true;
    const workers = this.slots.map((s) => s?.worker).filter((w): w is Worker => w !== undefined);
    this.slots.fill(undefined);
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

/**
 * The tokenizer with `encodeChunksAsync` going through a new pool of `opts.workers` threads, and the
 * pool (to close). Undefined when there is nothing to offload: no workers asked for, or a tokenizer
 * without an origin a worker could load it from.
 */
export function offloadTokenizer(tok: Tokenizer, opts: EncoderPoolOptions): { tokenizer: Tokenizer; pool: EncoderPool } | undefined {
  if (!tok.source || opts.workers <= 0) return undefined;
  const pool = new EncoderPool(tok.source, opts);
  return { tokenizer: { ...tok, encodeChunksAsync: (chunks, signal) => pool.encode(tok, chunks, signal) }, pool };
}
