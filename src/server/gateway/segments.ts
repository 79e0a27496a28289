import { canonicalJson, sameMessage, type GwMessage } from './conversation.js';

/** Where a segment branched off: the parent segment and the length of the sequence it shares with it. */
export interface SegmentParent {
  segment: number;
  shared: number;
}

/**
 * One token sequence of a job: `prompt_ids ++ response_ids` is exactly what the backend saw on its
 * latest call. Generated ids are appended unchanged (mask 1, their logprobs), observation ids after
 * them (mask 0). `messages` is the conversation it holds; `cuts[i]` is the sequence length right
 * after message i when that message is a model turn this segment generated (a point a later request
 * may branch from), else undefined.
 */
export class Segment {
  readonly messages: GwMessage[] = [];
  readonly cuts: Array<number | undefined> = [];
  readonly response_ids: number[] = [];
  readonly response_mask: Array<0 | 1> = [];
  readonly logprobs: number[] = [];
  /** Model turns generated in this segment, with the weight version each started under. */
  readonly weight_versions: string[] = [];
  /** A call is generating on this segment: a concurrent request branches instead of extending. */
  busy = false;
  /** The last model turn ended with the end-of-turn id (else the next observation closes it first). */
  endedWithEos = true;

  constructor(
    readonly index: number,
    readonly key: string,
    readonly prompt_ids: number[],
    readonly parent: SegmentParent | null,
  ) {}

  get length(): number {
    return this.prompt_ids.length + this.response_ids.length;
  }

  sequence(): number[] {
    return this.prompt_ids.concat(this.response_ids);
  }

  /** Model-generated ids in this segment. */
  generated(): number {
    let n = 0;
    for (const m of this.response_mask) n += m;
    return n;
  }

  append(ids: readonly number[], mask: 0 | 1, logprobs?: readonly number[]): void {
    for (let i = 0; i < ids.length; i++) {
      this.response_ids.push(ids[i]!);
      this.response_mask.push(mask);
      this.logprobs.push(mask === 1 ? (logprobs?.[i] ?? 0) : 0);
    }
  }
}

/** How a request relates to what the job holds. */
export type SegmentPlan =
  /** The request repeats a segment's whole conversation and adds messages: append to it. */
  | { kind: 'extend'; segment: Segment; added: GwMessage[] }
  /** The request shares a segment's conversation up to one of its model turns, then differs: a new segment starting with those ids. */
  | { kind: 'branch'; from: Segment; cut: number; keep: number; added: GwMessage[] }
  /** Nothing to reuse (a first call, a sub-agent, a rewritten history): the template renders it all. */
  | { kind: 'fresh'; messages: GwMessage[] };

/** The key of what the chat template renders around the messages: the tools. */
export function renderKey(tools: unknown, enableThinking: boolean): string {
  return `${enableThinking ? 1 : 0}${canonicalJson(tools ?? [])}`;
}

/**
 * The segments of one job and the rule that places a request among them. A request extends the
 * segment whose whole conversation it repeats (the append-only case: nothing is tokenised again);
 * shares a prefix up to one of a segment's model turns (a retry, an edit of the last message: a
 * branch that reuses those ids); or shares nothing reusable (a new segment, rendered whole).
 */
export class SegmentBook {
  readonly segments: Segment[] = [];

  plan(messages: readonly GwMessage[], key: string): SegmentPlan {
    let best: { seg: Segment; keep: number } | undefined;
    for (let s = this.segments.length - 1; s >= 0; s--) {
      const seg = this.segments[s]!;
      if (seg.key !== key) continue;
      const common = commonPrefix(seg.messages, messages);
      // The last model turn of the shared part: the point whose ids can be reused.
      let keep = common;
      while (keep > 0 && seg.cuts[keep - 1] === undefined) keep--;
      if (keep === 0 || keep >= messages.length) continue;
      if (keep === seg.messages.length && !seg.busy) return { kind: 'extend', segment: seg, added: messages.slice(keep) };
      if (!best || keep > best.keep) best = { seg, keep };
    }
    if (best)
      return { kind: 'branch', from: best.seg, cut: best.seg.cuts[best.keep - 1]!, keep: best.keep, added: messages.slice(best.keep) };
    return { kind: 'fresh', messages: [...messages] };
  }

  /** Opens a segment (its first call's prompt ids) and lists it. */
  open(key: string, promptIds: number[], parent: SegmentParent | null): Segment {
    const seg = new Segment(this.segments.length, key, promptIds, parent);
    this.segments.push(seg);
    return seg;
  }
}

function commonPrefix(held: readonly GwMessage[], asked: readonly GwMessage[]): number {
  const n = Math.min(held.length, asked.length);
  let i = 0;
  while (i < n && sameMessage(held[i]!, asked[i]!)) i++;
  return i;
}
