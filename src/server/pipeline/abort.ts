/**
 * What the pipeline's own waits need of an abort signal: the state, the reason and one listener at
 * a time. `AbortSignal` satisfies it; so does a job's `JobAbort`, which costs far less per job.
 */
export interface AbortSource {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * A job's abort channel. The pipeline waits on it directly (queued in a limiter, a stage's cancel
 * grace); a real `AbortSignal` is made only when a handler reads `ctx.signal`, so a job whose
 * handler never looks at its signal allocates no AbortController and no EventTarget listeners.
 * Aborting aborts that signal first (the handler's own listeners run before the pipeline's).
 */
export class JobAbort implements AbortSource {
  aborted = false;
  reason: unknown = undefined;
  private controller: AbortController | undefined;
  private listeners: Array<() => void> | undefined;

  /** The AbortSignal handlers get, made on first read (already aborted when the job is). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  /** Aborts once: later reasons are ignored. Every listener is called once, then dropped. */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
    this.controller?.abort(this.reason);
    const ls = this.listeners;
    this.listeners = undefined;
    // A throwing listener must not keep the others from hearing of the abort (as with EventTarget).
    if (ls)
      for (const l of ls)
        try {
          l();
        } catch (err) {
          queueMicrotask(() => {
            throw err;
          });
        }
  }

  /** Listeners are called once (the channel aborts once), so `once` is implied. */
  addEventListener(_type: 'abort', listener: () => void): void {
    if (this.aborted) return;
    (this.listeners ??= []).push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const ls = this.listeners;
    if (!ls) return;
    const i = ls.lastIndexOf(listener);
    if (i >= 0) ls.splice(i, 1);
  }
}
