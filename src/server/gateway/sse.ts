import type { ServerResponse } from 'node:http';

/** How long a streamed call may stay silent before the gateway opens the stream and sends a comment. */
const KEEPALIVE_MS = 5000;

/**
 * A server-sent-events answer. The status line goes out only when the first event is written, or
 * when generation takes longer than KEEPALIVE_MS (then comment lines keep the harness's idle timer
 * from firing): a call that fails fast still answers with a real HTTP error status.
 */
export class SseWriter {
  private opened = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly raw: ServerResponse) {}

  /** Sends a comment every KEEPALIVE_MS until stop(); the first one opens the stream. */
  keepAlive(): void {
    this.timer = setInterval(() => this.comment('keep-alive'), KEEPALIVE_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** True once the status line went out: errors must then go as events. */
  get isOpen(): boolean {
    return this.opened;
  }

  private open(): void {
    if (this.opened) return;
    this.opened = true;
    this.raw.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
  }

  comment(text: string): void {
    if (this.raw.destroyed) return;
    this.open();
    this.raw.write(`: ${text}\n\n`);
  }

  /** One event: `event:` line when named (Anthropic, Responses), then the JSON data line. */
  event(data: unknown, name?: string): void {
    if (this.raw.destroyed) return;
    this.open();
    this.raw.write(`${name ? `event: ${name}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  }

  end(): void {
    this.stop();
    this.open();
    this.raw.end();
  }
}

/** Splits text into pieces of about `size` characters (whole code points), as deltas of a stream. */
export function pieces(text: string, size = 48): string[] {
  const cps = Array.from(text);
  const out: string[] = [];
  for (let i = 0; i < cps.length; i += size) out.push(cps.slice(i, i + size).join(''));
  return out;
}
