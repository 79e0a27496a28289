/** What the splitter hands on: a complete line, or the fact that one overflowed the limit. */
export type LineItem = { kind: 'line'; text: string } | { kind: 'too_long'; bytes: number };

/**
 * Splits a byte stream into `\n`-terminated lines (a trailing `\r` is dropped) with a size limit.
 * A line over `maxBytes` is never buffered whole: its bytes are counted and dropped until its
 * newline, then reported once as `too_long`, so a runaway writer cannot exhaust memory.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;
  private overflow = false;

  constructor(private readonly maxBytes: number) {}

  /** Feeds a chunk; returns the items it completed, in order. */
  push(chunk: Buffer): LineItem[] {
    const out: LineItem[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      const end = nl === -1 ? chunk.length : nl;
      this.take(chunk.subarray(start, end));
      if (nl === -1) break;
      out.push(this.finish());
      start = nl + 1;
    }
    return out;
  }

  /** At EOF: the last line when it had no newline (an empty remainder yields nothing). */
  end(): LineItem[] {
    if (this.size === 0 && !this.overflow) return [];
    return [this.finish()];
  }

  private take(piece: Buffer): void {
    this.size += piece.length;
    if (this.overflow) return;
    if (this.size > this.maxBytes) {
      this.overflow = true;
      this.parts = [];
      return;
    }
    if (piece.length > 0) this.parts.push(Buffer.from(piece));
  }

  private finish(): LineItem {
    const bytes = this.size;
    const overflow = this.overflow;
    const parts = this.parts;
    this.parts = [];
    this.size = 0;
    this.overflow = false;
    if (overflow) return { kind: 'too_long', bytes };
    let text = Buffer.concat(parts).toString('utf8');
    if (text.endsWith('\r')) text = text.slice(0, -1);
    return { kind: 'line', text };
  }
}
