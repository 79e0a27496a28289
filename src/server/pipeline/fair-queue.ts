/**
 * Who a stage slot is charged to: a tenant. `inStage` counts its jobs inside any stage; a holder
 * at `maxInStage` gets no slot until one of its jobs leaves a stage.
 */
export interface ShareHolder {
  readonly name: string;
  /** Its share of every stage, relative to the other holders waiting in the same priority class. */
  readonly weight: number;
  /** Jobs of this holder inside a stage now (kept by the limiters). */
  inStage: number;
  /** At most this many of its jobs inside stages at once (Infinity: no cap). */
  readonly maxInStage: number;
}

/** The holder of a server without tenants: weight 1, no cap. With only it, every queue is FIFO. */
export function soleHolder(name = 'default'): ShareHolder {
  return { name, weight: 1, inStage: 0, maxInStage: Number.POSITIVE_INFINITY };
}

/** One waiting entry; `undefined` once it left the queue (a hole until the head passes it). */
export interface Entry {
  readonly holder: ShareHolder;
  readonly enqueuedAt: number;
}

/** One holder's FIFO within one priority class, and its virtual finish tag. */
interface Lane<E extends Entry> {
  readonly holder: ShareHolder;
  items: Array<E | undefined>;
  head: number;
  waiting: number;
  /** Virtual time up to which this holder has been served (its last grant's finish tag). */
  tag: number;
}

/** Where an entry sits, so an abort removes it without a search from the start. */
export interface Ticket {
  readonly priority: number;
  readonly holder: ShareHolder;
}

/**
 * The waiting jobs of one stage, as a weighted fair queue over holders with strict priority classes
 * above it (start-time fair queuing on measured service time). Within a class, the next grant goes
 * to the eligible holder whose virtual finish tag would be smallest if served now: `tag + cost /
 * weight`, where `cost` is the holder's recent service time in this stage. A holder that was idle
 * starts at the class's virtual time (it banks no credit while it had nothing to run), and the
 * charge is corrected with the real service time when the slot is released, so shares are shares
 * of stage time, not of job counts, whatever the task mix. A higher class always goes first; a
 * single holder in a single class is a plain FIFO.
 */
export class FairQueue<E extends Entry> {
  /** Priority classes, highest first, each with its lanes by holder and its virtual time. */
  private readonly classes: Array<{ priority: number; lanes: Map<ShareHolder, Lane<E>>; vtime: number }> = [];
  private waitingTotal = 0;

  /** Entries waiting. */
  get size(): number {
    return this.waitingTotal;
  }

  /** Array slots held by the lanes, holes included (compacted as heads move). */
  get backlog(): number {
    let n = 0;
    for (const c of this.classes) for (const l of c.lanes.values()) n += l.items.length;
    return n;
  }

  /** Entries of one holder waiting. */
  sizeOf(holder: ShareHolder): number {
    let n = 0;
    for (const c of this.classes) n += c.lanes.get(holder)?.waiting ?? 0;
    return n;
  }

  push(entry: E, priority: number): Ticket {
    const cls = this.classOf(priority);
    let lane = cls.lanes.get(entry.holder);
    if (!lane) {
      lane = { holder: entry.holder, items: [], head: 0, waiting: 0, tag: cls.vtime };
      cls.lanes.set(entry.holder, lane);
    } else if (lane.waiting === 0) {
      // Idle until now: no credit for the time it had nothing waiting.
      lane.tag = Math.max(lane.tag, cls.vtime);
    }
    lane.items.push(entry);
    lane.waiting++;
    this.waitingTotal++;
    return { priority, holder: entry.holder };
  }

  /** Removes a waiting entry (its job was aborted); false when it is no longer queued. */
  remove(entry: E, ticket: Ticket): boolean {
    const lane = this.classes.find((c) => c.priority === ticket.priority)?.lanes.get(ticket.holder);
    if (!lane) return false;
    const i = lane.items.indexOf(entry, lane.head);
    if (i < 0) return false;
    lane.items[i] = undefined;
    lane.waiting--;
    this.waitingTotal--;
    return true;
  }

  /**
   * Takes the next entry: the highest class with an eligible holder, and in it the holder with the
   * smallest finish tag; `cost(holder)` is its expected service time. Charges that cost to the
   * holder and returns the charge, to be corrected at release. Undefined when nothing is eligible.
   */
  take(eligible: (h: ShareHolder) => boolean, cost: (h: ShareHolder) => number): { entry: E; charge: Charge } | undefined {
    for (const cls of this.classes) {
      let best: Lane<E> | undefined;
      let bestFinish = 0;
      for (const lane of cls.lanes.values()) {
        if (lane.waiting === 0 || !eligible(lane.holder)) continue;
        const finish = lane.tag + cost(lane.holder) / lane.holder.weight;
        // Ties: the heavier holder, then the one waiting longest.
        if (
          !best ||
          finish < bestFinish ||
          (finish === bestFinish &&
            (lane.holder.weight > best.holder.weight ||
              (lane.holder.weight === best.holder.weight && headOf(lane)!.enqueuedAt < headOf(best)!.enqueuedAt)))
        ) {
          best = lane;
          bestFinish = finish;
        }
      }
      if (!best) continue;
      const entry = shift(best);
      this.waitingTotal--;
      const c = cost(best.holder);
      const start = best.tag;
      best.tag += c / best.holder.weight;
      cls.vtime = Math.max(cls.vtime, start);
      return { entry, charge: { lane: best, cost: c } };
    }
    return undefined;
  }

  /**
   * Charges a slot granted at once (nothing was waiting) as if it had been queued: a holder whose
   * jobs arrive at quiet moments pays for their slot time like any other.
   */
  charge(holder: ShareHolder, priority: number, cost: number): Charge {
    const cls = this.classOf(priority);
    let lane = cls.lanes.get(holder);
    if (!lane) {
      lane = { holder, items: [], head: 0, waiting: 0, tag: cls.vtime };
      cls.lanes.set(holder, lane);
    } else if (lane.waiting === 0) lane.tag = Math.max(lane.tag, cls.vtime);
    const start = lane.tag;
    lane.tag += cost / holder.weight;
    cls.vtime = Math.max(cls.vtime, start);
    return { lane, cost };
  }

  /** Corrects a grant's charge with the service time it really took. */
  settle(charge: Charge, actual: number): void {
    const lane = charge.lane as Lane<E>;
    lane.tag += (actual - charge.cost) / lane.holder.weight;
  }

  /** Forgets lanes of holders with nothing waiting (a tenant that left); their tags restart at the class time. */
  prune(): void {
    for (const c of this.classes) for (const [h, l] of c.lanes) if (l.waiting === 0 && l.items.length === 0) c.lanes.delete(h);
  }

  private classOf(priority: number): { priority: number; lanes: Map<ShareHolder, Lane<E>>; vtime: number } {
    let cls = this.classes.find((c) => c.priority === priority);
    if (!cls) {
      cls = { priority, lanes: new Map(), vtime: 0 };
      this.classes.push(cls);
      this.classes.sort((a, b) => b.priority - a.priority);
    }
    return cls;
  }
}

/** A grant's charge: the lane and the cost charged, corrected by `settle` at release. */
export interface Charge {
  readonly lane: unknown;
  readonly cost: number;
}

function headOf<E extends Entry>(lane: Lane<E>): E | undefined {
  for (let i = lane.head; i < lane.items.length; i++) if (lane.items[i]) return lane.items[i];
  return undefined;
}

/** Takes a lane's first live entry and compacts the array now and then. */
function shift<E extends Entry>(lane: Lane<E>): E {
  for (;;) {
    const e = lane.items[lane.head++];
    if (lane.head > 1024 && lane.head * 2 > lane.items.length) {
      lane.items.splice(0, lane.head);
      lane.head = 0;
    }
    if (e) {
      lane.waiting--;
      if (lane.waiting === 0) {
        lane.items.length = 0;
        lane.head = 0;
      }
      return e;
    }
  }
}
