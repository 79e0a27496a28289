import type { Message, Span, Tokens } from '../protocol/process.js';
import type { Tokenizer } from '../tokens/tokenizer.js';
import type { TokenSequence, TrajectoryView, TurnView } from './model.js';

/** A token is "low probability" below p = 0.1. */
const LOW_LOGPROB = Math.log(0.1);

/** What a trajectory is built from: a result of `raas serve` or a rollout of a batch (the fields either may carry). */
export interface TrajectorySource {
  job_id: string;
  reward: number;
  /** Absent from a groups.jsonl summary line. */
  tokens?: Tokens;
  messages?: Message[];
  trailing_messages?: Message[];
  weight_versions?: string[];
  /** An agent gateway's extra token sequences (several per rollout), drawn as further token views. */
  segments?: unknown;
  [k: string]: unknown;
}

const THINK = /^\s*<think>([\s\S]*?)(?:<\/think>|$)\s*/;
const TOOL_BLOCK = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g;

/** Splits a `<think>` block off an assistant text. */
export function splitThinking(text: string): { thinking?: string; answer: string } {
  const m = THINK.exec(text);
  if (!m) return { answer: text };
  return { thinking: m[1]!.trim(), answer: text.slice(m[0].length) };
}

/** The `<tool_call>{json}</tool_call>` blocks of an assistant text, for display (a block that does not parse shows as text). */
export function toolCallsOf(text: string): Array<{ name: string; arguments: unknown }> {
  const out: Array<{ name: string; arguments: unknown }> = [];
  for (const m of text.matchAll(TOOL_BLOCK)) {
    const raw = m[1]!.trim();
    try {
      const v = JSON.parse(raw) as { name?: unknown; arguments?: unknown };
      out.push({ name: typeof v.name === 'string' ? v.name : '(no name)', arguments: v.arguments ?? {} });
    } catch {
      out.push({ name: '(malformed tool call)', arguments: raw.slice(0, 2000) });
    }
  }
  return out;
}

function sequenceOf(label: string, t: Partial<Tokens>): TokenSequence | undefined {
  if (!Array.isArray(t.prompt_ids) || !Array.isArray(t.response_ids)) return undefined;
  const n = t.response_ids.length;
  const mask = Array.isArray(t.response_mask) && t.response_mask.length === n ? t.response_mask : new Array<number>(n).fill(1);
  const logprobs = Array.isArray(t.logprobs) && t.logprobs.length === n ? t.logprobs : new Array<number>(n).fill(0);
  return { label, ids: t.prompt_ids.concat(t.response_ids), prompt_len: t.prompt_ids.length, mask, logprobs };
}

/** How a segment is named in the sequence picker: its index, where it branched from, its turns. */
function segmentLabel(s: { index?: unknown; parent?: unknown; num_turns?: unknown }, k: number): string {
  const index = typeof s.index === 'number' ? s.index : k;
  const p = s.parent as { segment?: number; shared?: number } | null | undefined;
  const from = p && typeof p.segment === 'number' ? ` from segment ${p.segment} (${p.shared ?? 0} ids shared)` : '';
  return `segment ${index}${from}${typeof s.num_turns === 'number' ? `, ${s.num_turns} turns` : ''}`;
}

/**
 * The token sequences of a rollout: its `tokens` (the main sequence), then each of the agent
 * gateway's `segments` (every sequence the backend saw, the main one among them) that has ids.
 */
function sequencesOf(src: TrajectorySource): TokenSequence[] {
  const out: TokenSequence[] = [];
  const segments = Array.isArray(src.segments) ? src.segments : [];
  const main = sequenceOf(segments.length ? 'tokens (the main sequence)' : 'tokens', src.tokens ?? {});
  if (main && main.ids.length > 0) out.push(main);
  segments.forEach((s, k) => {
    if (s && typeof s === 'object') {
      const seg = sequenceOf(
        segmentLabel(s as Record<string, unknown>, k),
        (s as { tokens?: Partial<Tokens> }).tokens ?? (s as Partial<Tokens>),
      );
      if (seg) out.push(seg);
    }
  });
  return out;
}

/** The text of every distinct id, each decoded alone (a byte-level piece of a character shows as U+FFFD). */
function vocabOf(seqs: readonly TokenSequence[], tok: Tokenizer | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!tok) return out;
  for (const s of seqs)
    for (const id of s.ids) {
      const k = String(id);
      if (out[k] === undefined) out[k] = tok.addedTokens.get(id) ?? tok.decode([id]);
    }
  return out;
}

/** Logprob figures of the generated ids in `[start, end)` of the response. */
function stats(seq: TokenSequence, start: number, end: number): Pick<TurnView, 'tokens' | 'logprob_mean' | 'logprob_min' | 'low_tokens'> {
  let n = 0;
  let sum = 0;
  let min = 0;
  let low = 0;
  for (let i = start; i < end && i < seq.mask.length; i++) {
    if (seq.mask[i] !== 1) continue;
    const lp = seq.logprobs[i]!;
    n++;
    sum += lp;
    if (lp < min) min = lp;
    if (lp < LOW_LOGPROB) low++;
  }
  return n === 0 ? { tokens: 0 } : { tokens: n, logprob_mean: sum / n, logprob_min: min, low_tokens: low };
}

/** Runs of equal mask values over the response: [start, end, mask]. */
function maskRuns(mask: readonly number[]): Array<[number, number, number]> {
  const runs: Array<[number, number, number]> = [];
  for (let i = 0; i < mask.length; ) {
    let j = i;
    while (j < mask.length && mask[j] === mask[i]) j++;
    runs.push([i, j, mask[i]!]);
    i = j;
  }
  return runs;
}

/** An assistant turn's fields from its text: thinking apart, tool calls parsed. */
function assistantParts(content: string, given?: Message['tool_calls']): Pick<TurnView, 'content' | 'thinking' | 'tool_calls'> {
  const { thinking, answer } = splitThinking(content);
  const calls = given?.length
    ? given.map((c) => ({ name: c.name, arguments: c.arguments, ...(c.id ? { id: c.id } : {}) }))
    : toolCallsOf(answer);
  return { content: answer, ...(thinking !== undefined ? { thinking } : {}), ...(calls.length ? { tool_calls: calls } : {}) };
}

/** A user message that only carries tool responses is an observation. */
function roleOf(role: Message['role'], content: string): TurnView['role'] {
  return role === 'user' && /^\s*<tool_response>/.test(content) ? 'tool' : role;
}

/** Turns from the rollout's messages, placed on the token view by its spans (or, without spans, by the mask's runs). */
function turnsFromMessages(src: TrajectorySource, seq: TokenSequence | undefined, imStart: number | undefined): TurnView[] {
  const kept = src.messages ?? [];
  const all = kept.concat(src.trailing_messages ?? []);
  const spans = new Map<number, Span>();
  for (const s of src.tokens?.spans ?? []) spans.set(s.message_index, s);
  const runs = seq ? maskRuns(seq.mask).filter((r) => r[2] === 1) : [];
  // Prompt messages are located by their <|im_start|> ids in prompt_ids (ChatML templates).
  const promptStarts: number[] = [];
  if (seq && imStart !== undefined) for (let i = 0; i < seq.prompt_len; i++) if (seq.ids[i] === imStart) promptStarts.push(i);
  const firstSpan = Math.min(...[...spans.keys(), all.length]);
  let turn = 0;
  return all.map((m, index) => {
    const t: TurnView = { index, role: roleOf(m.role, m.content), content: m.content };
    if (index >= kept.length) t.trailing = true;
    if (m.tool_call_id) t.tool_call_id = m.tool_call_id;
    if (m.role === 'assistant') {
      Object.assign(t, assistantParts(m.content, m.tool_calls));
      t.turn = turn;
      const wv = src.weight_versions?.[turn];
      if (wv !== undefined) t.weight_version = wv;
      const run = runs[turn];
      turn++;
      const span = spans.get(index) ?? (spans.size === 0 && run ? { message_index: index, start: run[0], end: run[1] } : undefined);
      if (seq && span)
        Object.assign(t, { start: seq.prompt_len + span.start, end: seq.prompt_len + span.end }, stats(seq, span.start, span.end));
    } else if (seq) {
      const span = spans.get(index);
      if (span) Object.assign(t, { start: seq.prompt_len + span.start, end: seq.prompt_len + span.end });
      else if (index < firstSpan && promptStarts.length === firstSpan) {
        t.start = promptStarts[index]!;
        t.end = index + 1 < promptStarts.length ? promptStarts[index + 1]! : seq.prompt_len;
      }
    }
    return t;
  });
}

/**
 * Turns rebuilt from the decoded ids, for a rollout that carried no messages (a batch without
 * `return_messages`): the prompt and each observation run are split at `<|im_start|>` (ChatML
 * templates; otherwise each run is one turn), each generated run is one assistant turn.
 */
function turnsFromTokens(src: TrajectorySource, seq: TokenSequence, tok: Tokenizer): TurnView[] {
  const ids = tok.addedTokens;
  let imStart: number | undefined;
  let imEnd: number | undefined;
  for (const [id, text] of ids) {
    if (text === '<|im_start|>') imStart = id;
    if (text === '<|im_end|>') imEnd = id;
  }
  const out: TurnView[] = [];
  let turn = 0;
  const push = (t: Omit<TurnView, 'index'>): void => {
    out.push({ index: out.length, ...t, from_tokens: true });
  };
  /** Splits [a, b) of the whole sequence into template messages. */
  const structured = (a: number, b: number): void => {
    if (imStart === undefined) {
      const text = tok.decode(seq.ids.slice(a, b));
      if (text.trim()) push({ role: a < seq.prompt_len ? 'user' : 'tool', content: text, start: a, end: b });
      return;
    }
    let i = a;
    while (i < b) {
      let j = i + 1;
      while (j < b && seq.ids[j] !== imStart) j++;
      if (seq.ids[i] === imStart) {
        const body = seq.ids.slice(i + 1, j).filter((id) => id !== imEnd);
        const text = tok.decode(body);
        const nl = text.indexOf('\n');
        const role = nl >= 0 ? text.slice(0, nl).trim() : text.trim();
        const content = nl >= 0 ? text.slice(nl + 1).replace(/\n$/, '') : '';
        // The generation prompt (`<|im_start|>assistant\n` with nothing after it) opens the next turn.
        if (!(role === 'assistant' && content.trim() === '')) {
          const r = role === 'system' || role === 'user' || role === 'assistant' || role === 'tool' ? role : 'user';
          push({ role: roleOf(r, content), content, start: i, end: j });
        }
      }
      i = j;
    }
  };
  structured(0, seq.prompt_len);
  for (const [a, b, m] of maskRuns(seq.mask)) {
    if (m === 1) {
      const body = seq.ids.slice(seq.prompt_len + a, seq.prompt_len + b);
      const text = tok.decode(body[body.length - 1] === imEnd || body[body.length - 1] === tok.eosId ? body.slice(0, -1) : body);
      const wv = src.weight_versions?.[turn];
      push({
        role: 'assistant',
        ...assistantParts(text),
        turn: turn++,
        ...(wv !== undefined ? { weight_version: wv } : {}),
        start: seq.prompt_len + a,
        end: seq.prompt_len + b,
        ...stats(seq, a, b),
      });
    } else structured(seq.prompt_len + a, seq.prompt_len + b);
  }
  return out;
}

/** The id of `<|im_start|>`, when the tokenizer has one. */
function imStartOf(tok: Tokenizer | undefined): number | undefined {
  if (!tok) return undefined;
  for (const [id, text] of tok.addedTokens) if (text === '<|im_start|>') return id;
  return undefined;
}

/**
 * The trajectory page's model of one rollout: its turns as the model saw them (from its messages,
 * or rebuilt from its ids), its token sequences with the text of each id, and every outcome field
 * the source has. `extra` adds what only the caller knows (the job's state, a run's batch fields).
 */
export function trajectoryView(src: TrajectorySource, tok: Tokenizer | undefined, extra: Partial<TrajectoryView> = {}): TrajectoryView {
  const sequences = sequencesOf(src);
  const main = sequences[0];
  const hasMessages = (src.messages?.length ?? 0) + (src.trailing_messages?.length ?? 0) > 0;
  const turns = hasMessages
    ? turnsFromMessages(src, main?.label === 'tokens' ? main : undefined, imStartOf(tok))
    : main && tok
      ? turnsFromTokens(src, main, tok)
      : [];
  const pick = <K extends keyof TrajectoryView>(k: K): Partial<TrajectoryView> => (src[k] !== undefined ? { [k]: src[k] } : {});
  const view: TrajectoryView = {
    job_id: src.job_id,
    reward: src.reward,
    weight_versions: src.weight_versions ?? [],
    turns,
    sequences,
    vocab: vocabOf(sequences, tok),
    special: tok ? [...tok.addedTokens.keys()] : [],
    tokenizer: tok?.name ?? 'none',
    ...pick('data_source'),
    ...pick('instance_id'),
    ...pick('trajectory_id'),
    ...pick('resolved'),
    ...pick('shaped_reward'),
    ...pick('advantage'),
    ...pick('finish_reason'),
    ...pick('num_turns'),
    ...pick('critical_error'),
    ...pick('error'),
    ...pick('traceback'),
    ...pick('filter'),
    ...pick('filter_reason'),
    ...pick('policy_version'),
    ...pick('staleness'),
    ...pick('backend'),
    ...pick('timing'),
    ...pick('details'),
    ...pick('git_patch'),
    ...extra,
  };
  // Per-turn staleness where the batch's version and the turn's weight version are both numbers.
  if (typeof view.batch_policy_version === 'number')
    for (const t of view.turns) {
      const v = t.weight_version === undefined ? Number.NaN : Number(t.weight_version);
      if (Number.isInteger(v)) t.staleness = view.batch_policy_version - v;
    }
  return view;
}
