import type { Logger } from '../../util/logger.js';
import type { ManagedSandbox } from './managed.js';

/**
 * Sandboxes started ahead of demand (`sandbox.pool_size`), so open() costs a configure round trip
 * instead of a bwrap + node start on the critical path of INIT. Only specs without network use it
 * (the network namespace is fixed at start); the runtime writes the spec's files into the taken
 * sandbox and sends its environment, limits and tools with a `configure` request.
 */
export class WarmPool {
  private readonly ready: Array<Promise<ManagedSandbox | undefined>> = [];
  private closed = false;

  constructor(
    private readonly size: number,
    private readonly start: () => Promise<ManagedSandbox>,
    private readonly log?: Logger,
  ) {}

  /** Starts sandboxes until `size` are ready or starting. */
  fill(): void {
    while (!this.closed && this.ready.length < this.size) {
      this.ready.push(
        this.start().catch((e: unknown) => {
          this.log?.warn({ err: (e as Error).message }, 'warm pool: a sandbox failed to start');
          return undefined;
        }),
      );
    }
  }

  /**
   * Takes the oldest pooled sandbox (waiting for it if it is still starting), or undefined. The
   * replacement starts once the taker calls fill() (the runtime does, right after open() returns):
   * starting one blocks the event loop for a few milliseconds (directories, cgroup, spawn), which
   * must not land inside the taker's open().
   */
  async take(signal?: AbortSignal): Promise<ManagedSandbox | undefined> {
    const next = this.ready.shift();
    if (!next) {
      this.fill();
      return undefined;
    }
    if (!signal) return next;
    signal.throwIfAborted();
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([next, aborted]);
    } catch (e) {
      // Nobody will use it: close it once it has started.
      void next.then((sb) => sb?.close());
      throw e;
    } finally {
      signal.removeEventListener('abort', onAbort!);
    }
  }

  /** Resolves once every pooled sandbox has started and warmed (or failed to). */
  async settled(): Promise<void> {
    await Promise.all(this.ready);
  }

  /** Number of pooled sandboxes (ready or starting). */
  get length(): number {
    return this.ready.length;
  }

  /** Closes every pooled sandbox. Safe twice. */
  async close(): Promise<void> {
    this.closed = true;
    const all = this.ready.splice(0);
    await Promise.all(all.map(async (p) => (await p)?.close()));
  }
}
