import type { Batch, Rollout } from '../protocol/batch.js';
import { RaasError } from '../protocol/errors.js';
import type { Tokenizer } from '../tokens/tokenizer.js';

/** How `raas show` prints a rollout. */
export interface ShowOptions {
  /** Print each segment's token ids (and a model turn's logprobs). */
  ids?: boolean;
  /** Print long texts whole (default: head and tail of texts over 4000 characters, the system prompt's head). */
  full?: boolean;
}

/** A rollout of a batch by index in batch order (group by group) or by job id. */
function pickRollout(batch: Batch, which: string | undefined): { rollout: Rollout; index: number; group: number } {
  const all = batch.groups.flatMap((g, gi) => g.rollouts.map((r) => ({ r, gi })));
  const index = which === undefined ? 0 : /^\d+$/.test(which) ? Number(which) : all.findIndex((x) => x.r.job_id === which);
  if (index < 0 || index >= all.length)
    throw new RaasError(
      'config_invalid',
      /^\d+$/.test(which ?? '')
        ? `step ${batch.step} has rollouts 0–${all.length - 1}, not ${which} (--list shows them)`
        : `step ${batch.step} has no rollout with job id ${JSON.stringify(which)} (--list shows them)`,
      { retryable: false },
    );
  return { rollout: all[index]!.r, index, group: all[index]!.gi };
}

/** One line per rollout of the batch: index, job id, reward, finish, turns, generated ids. */
export function formatList(batch: Batch): string {
  const rows = batch.groups.flatMap((g) => g.rollouts.map((r) => ({ g, r })));
  const w = Math.max(...rows.map(({ r }) => r.job_id.length));
  const lines = rows.map(
    ({ g, r }, i) =>
      `${String(i).padStart(4)}  ${r.job_id.padEnd(w)}  ${String(g.instance_id ?? '-')}  reward ${fmt(r.reward)}  adv ${fmt(r.advantage)}  ${r.finish_reason}  ${r.num_turns} turns  ${generated(r)} generated ids  staleness ${r.staleness}`,
  );
  return `step ${batch.step} (policy v${batch.policy_version}): ${batch.groups.length} groups, ${rows.length} rollouts\n${lines.join('\n')}\n`;
}

/**
 * A rollout as text: the prompt's messages, then each run of the response mask, model turns (mask 1,
 * with their tool calls and mean logprob) and observations (mask 0), decoded with the tokenizer
 * the rollout was generated with.
 */
export function formatRollout(batch: Batch, which: string | undefined, tok: Tokenizer, opts: ShowOptions = {}): string {
  const { rollout: r, index, group } = pickRollout(batch, which);
  const g = batch.groups[group]!;
  const t = r.tokens;
  const gen = generated(r);
  const out: string[] = [
    `step ${batch.step} (policy v${batch.policy_version}), rollout ${index} of ${batch.groups.reduce((a, x) => a + x.rollouts.length, 0)} (group ${group} of ${batch.groups.length})`,
    `job ${r.job_id} · group ${g.group_id} · instance ${String(g.instance_id ?? '-')} · data_source ${g.data_source}`,
    `reward ${fmt(r.reward)} · shaped ${fmt(r.shaped_reward)} · advantage ${fmt(r.advantage)} · staleness ${r.staleness} · finish ${r.finish_reason} · ${r.num_turns} turns · weight versions ${r.weight_versions.join(', ') || '-'}`,
    `tokens: ${t.prompt_ids.length} prompt, ${t.response_ids.length} response (${gen} generated, mask 1; ${t.response_ids.length - gen} observation, mask 0)`,
    '',
    rule(`prompt: ${t.prompt_ids.length} ids`),
    ...messages(tok.decode(t.prompt_ids), opts),
    ...(opts.ids ? [`ids: ${t.prompt_ids.join(' ')}`] : []),
  ];
  let turn = 0;
  let obs = 0;
  for (const seg of segments(t.response_mask)) {
    const ids = t.response_ids.slice(seg.start, seg.end);
    const text = tok.decode(ids);
    if (seg.mask === 1) {
      const lp = t.logprobs.slice(seg.start, seg.end);
      const mean = lp.length ? lp.reduce((a, b) => a + b, 0) / lp.length : 0;
      out.push('', rule(`model turn ${++turn}: ${ids.length} ids, mask 1, mean logprob ${mean.toFixed(3)}`));
      out.push(cut(text.replace(/<\|im_end\|>\s*$/, '').trim(), opts));
      for (const call of toolCalls(text)) out.push(`  → tool call ${call}`);
      if (opts.ids) out.push(`ids: ${ids.join(' ')}`, `logprobs: ${lp.map((x) => x.toFixed(3)).join(' ')}`);
    } else {
      out.push('', rule(`observation ${++obs}: ${ids.length} ids, mask 0`));
      const shown = messages(text, opts);
      out.push(...(shown.length ? shown : [cut(text.trim(), opts)]));
      if (opts.ids) out.push(`ids: ${ids.join(' ')}`);
    }
  }
  return `${out.join('\n')}\n`;
}

/** Runs of equal mask values: [start, end) with their value. */
function segments(mask: readonly number[]): Array<{ start: number; end: number; mask: number }> {
  const out: Array<{ start: number; end: number; mask: number }> = [];
  for (let i = 0; i < mask.length; i++) {
    const last = out.at(-1);
    if (last && last.mask === mask[i]) last.end = i + 1;
    else out.push({ start: i, end: i + 1, mask: mask[i]! });
  }
  return out;
}

/** The ChatML messages of a decoded text as `[role] content`; the bare generation prompt at the end is left out. */
function messages(text: string, opts: ShowOptions): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/<\|im_start\|>(\w+)\n([\s\S]*?)(?=<\|im_end\|>|<\|im_start\|>|$)/g)) {
    const [, role, body] = m;
    const content = body!.replace(/^<think>\s*<\/think>\s*/, '').trim();
    if (role === 'assistant' && content === '') continue;
    const responses = [...content.matchAll(/<tool_response>\n?([\s\S]*?)\n?<\/tool_response>/g)].map((x) => x[1]!);
    if (responses.length) for (const resp of responses) out.push(`[tool] ${cut(resp, opts)}`);
    else out.push(`[${role}] ${cut(content, { ...opts, head: role === 'system' ? 400 : undefined })}`);
  }
  return out;
}

/** `name {arguments}` of each `<tool_call>` in a model turn (or the raw text of one that is not JSON). */
function toolCalls(text: string): string[] {
  return [...text.matchAll(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g)].map((m) => {
    try {
      const v = JSON.parse(m[1]!) as { name?: unknown; arguments?: unknown };
      return `${String(v.name)} ${JSON.stringify(v.arguments ?? {})}`;
    } catch {
      return `(not JSON) ${m[1]!.slice(0, 200)}`;
    }
  });
}

function cut(text: string, opts: ShowOptions & { head?: number }): string {
  if (opts.full) return text;
  const limit = opts.head ?? 4000;
  if (text.length <= limit) return text;
  const keep = opts.head ?? 2000;
  const tail = opts.head ? '' : text.slice(-keep);
  return `${text.slice(0, keep)} … (${text.length - keep - tail.length} more characters; --full shows all) …${tail}`;
}

function rule(title: string): string {
  return `── ${title} ${'─'.repeat(Math.max(4, 72 - title.length))}`;
}

function generated(r: Rollout): number {
  return r.tokens.response_mask.reduce<number>((a, b) => a + b, 0);
}

function fmt(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(3);
}
