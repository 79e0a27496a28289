/** An event as the log keeps it: its id (1, 2, …, never reused within a process) and its payload. */
export interface Logged<E> {
  id: number;
  /** The SSE `event:` name. */
  name: string;
  data: E;
}

/** What a subscriber is called with; a subscriber that throws is logged out, never the emitter's problem. */
export type Listener<E> = (e: Logged<E>) => void;

/**
 * A bounded, numbered event log: the last `capacity` events in a ring, and live subscribers. Ids
 * increase by one per event, so a client that resumes with `Last-Event-ID: n` gets exactly the
 * events after n while the ring still holds n + 1, and is told it missed some otherwise.
 */
export class EventLog<E> {
  private readonly ring: Array<Logged<E> | undefined>;
  private next = 1;
  private readonly listeners = new Set<Listener<E>>();

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`event log capacity must be a positive integer, got ${capacity}`);
    this.ring = new Array(capacity);
  }

  /** The id of the newest event (0 before the first). */
  get lastId(): number {
    return this.next - 1;
  }

  /** The id of the oldest event still held (lastId + 1 when empty). */
  get oldestId(): number {
    return Math.max(1, this.next - this.capacity);
  }

  /** Live subscribers (open event streams and in-process readers). */
  get subscribers(): number {
    return this.listeners.size;
  }

  /** Appends an event and hands it to every subscriber. Never throws. */
  emit(name: string, data: E): void {
    const e: Logged<E> = { id: this.next++, name, data };
    this.ring[e.id % this.capacity] = e;
    for (const l of this.listeners) {
      try {
        l(e);
      } catch {
        this.listeners.delete(l);
      }
    }
  }

  /**
   * The events after `id`, oldest first; undefined when some of them are gone from the ring (the
   * caller must re-read the state). An id ahead of the log (a client of an earlier process) is
   * also undefined.
   */
  since(id: number): Array<Logged<E>> | undefined {
    if (!Number.isInteger(id) || id < 0 || id > this.lastId) return undefined;
    if (id + 1 < this.oldestId) return undefined;
    const out: Array<Logged<E>> = [];
    for (let i = id + 1; i <= this.lastId; i++) out.push(this.ring[i % this.capacity]!);
    return out;
  }

  /** Calls `fn` with every event from now on; returns the unsubscribe function. */
  subscribe(fn: Listener<E>): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}
