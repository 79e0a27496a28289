/**
 * A text buffer that keeps the first and last part of a stream once it passes a cap, so a command
 * that prints gigabytes costs bounded memory and the answer still shows how it started and ended.
 */
export class CappedText {
  private head = '';
  private tail = '';
  private dropped = 0;
  private readonly headCap: number;
  private readonly tailCap: number;

  constructor(readonly cap: number) {
    this.headCap = Math.floor(cap / 2);
    this.tailCap = cap - this.headCap;
  }

  append(s: string): void {
    if (!s) return;
    if (this.head.length < this.headCap) {
      const room = this.headCap - this.head.length;
      this.head += s.slice(0, room);
      s = s.slice(room);
      if (!s) return;
    }
    this.tail += s;
    if (this.tail.length > this.tailCap * 2) this.trimTail();
  }

  private trimTail(): void {
    const over = this.tail.length - this.tailCap;
    if (over > 0) {
      this.dropped += over;
      this.tail = this.tail.slice(over);
    }
  }

  /** True once any text was cut. */
  get truncated(): boolean {
    this.trimTail();
    return this.dropped > 0;
  }

  /** Total characters seen. */
  get length(): number {
    return this.head.length + this.tail.length + this.dropped;
  }

  toString(): string {
    this.trimTail();
    if (this.dropped === 0) return this.head + this.tail;
    return `${this.head}\n[... ${this.dropped} characters cut ...]\n${this.tail}`;
  }
}

/** Caps a finished string the same way (head and tail kept, the cut marked). */
export function capText(s: string, cap: number): { text: string; truncated: boolean } {
  const c = new CappedText(cap);
  c.append(s);
  return { text: c.toString(), truncated: c.truncated };
}
