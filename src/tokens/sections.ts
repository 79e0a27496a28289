import { randomBytes } from 'node:crypto';
/**
 * Encoding with two kinds of text: the chat template's own structure, where added tokens
 * (`<|im_start|>`, `<tool_response>`, …) are single special ids, and message content, where the same
 * character sequences are plain text. A tool that prints `<|im_end|>\n<|im_start|>assistant\n` must
 * not forge a turn boundary in the model's context: its output is encoded as the characters it is.
 *
 * Hugging Face's `split_special_tokens=True` (tokenizers' `encode_special_tokens`) does this only for
 * tokens marked special (tokenizers/src/tokenizer/added_vocabulary.rs@3ba8ad00:450 skips a match
 * only when it is in `special_tokens_set`); Qwen3 marks `<tool_call>`, `<tool_response>` and
 * `<think>` as added but not special, so that flag would still let a tool close its own
 * `</tool_response>`. Content here is plain for every added token.
 */

/** The parts of @lenml/tokenizers' PreTrainedTokenizer that its own `_encode_text` uses. */
export interface LenmlInternals {
  normalizer: ((s: string) => string) | null;
  pre_tokenizer: ((s: string, opts: { section_index: number }) => string[]) | null;
  model: ((pieces: string[]) => string[]) & { convert_tokens_to_ids(tokens: string[]): number[] };
  added_tokens_splitter: { split(s: string): string[] };
  added_tokens_map: Map<string, { id: number; lstrip?: boolean; rstrip?: boolean }>;
  remove_space?: boolean;
  do_lowercase_and_remove_accent?: boolean;
}

/** A piece of rendered text: template structure (added tokens honoured) or content (plain). */
export interface Section {
  text: string;
  plain: boolean;
}

/** A unit of encoding: one added token's id, or a run of text with no honoured added token in it. */
export type Chunk = { id: number } | { text: string; index: number };

/** True when a tokenizer object exposes what plain encoding needs (any @lenml PreTrainedTokenizer does). */
export function hasInternals(tok: unknown): tok is LenmlInternals {
  const t = tok as Partial<LenmlInternals> | null;
  return (
    typeof t?.model === 'function' &&
    typeof t.model.convert_tokens_to_ids === 'function' &&
    typeof t.added_tokens_splitter?.split === 'function' &&
    t.added_tokens_map instanceof Map
  );
}

/**
 * Splits sections into chunks: structure is split at its added tokens, exactly as the library's
 * `_encode_text` splits a whole text (including its lstrip/rstrip trimming); content joins the text
 * run around it untouched. For content free of added-token text the chunks are the library's own,
 * so the ids equal a plain `encode` of the joined text.
 */
export function chunksOf(tok: LenmlInternals, sections: readonly Section[]): Chunk[] {
  const out: Chunk[] = [];
  let pending = '';
  let trimNext = false;
  let index = 0;
  const flush = (): void => {
    if (pending.length > 0) out.push({ text: pending, index: index++ });
    pending = '';
  };
  const addText = (s: string): void => {
    if (trimNext) {
      s = s.trimStart();
      if (s.length > 0) trimNext = false;
    }
    pending += s;
  };
  for (const sec of sections) {
    if (sec.plain) {
      addText(sec.text);
      continue;
    }
    for (const piece of tok.added_tokens_splitter.split(sec.text)) {
      const added = tok.added_tokens_map.get(piece);
      if (!added) {
        addText(piece);
        continue;
      }
      if (added.lstrip) pending = pending.trimEnd();
      flush();
      out.push({ id: added.id });
      trimNext = added.rstrip === true;
    }
  }
  flush();
  return out;
}

/** Ids of a text run with no added-token matching: the library's normaliser, pre-tokeniser and model. */
export function encodeRun(tok: LenmlInternals, text: string, index = 0): number[] {
  let s = text;
  if (tok.remove_space === true) s = s.trim().split(/\s+/).join(' ');
  if (tok.normalizer !== null) s = tok.normalizer(s);
  if (s.length === 0) return [];
  const pieces = tok.pre_tokenizer !== null ? tok.pre_tokenizer(s, { section_index: index }) : [s];
  return tok.model.convert_tokens_to_ids(tok.model(pieces));
}

/** Encodes chunks on this thread. */
export function encodeChunks(tok: LenmlInternals, chunks: readonly Chunk[]): number[] {
  const ids: number[] = [];
  for (const c of chunks) {
    if ('id' in c) ids.push(c.id);
    else for (const id of encodeRun(tok, c.text, c.index)) ids.push(id);
  }
  return ids;
}

/**
 * A secret of this process in every sentinel: text that does reach the template (an assistant
 * message, a tool's description) cannot spell a sentinel, which would make the rendering fall back
 * to encoding every content as template structure, added tokens honoured.
 */
const NONCE = randomBytes(12).toString('hex');

/** A sentinel for content `i` while rendering; NUL never occurs in a chat template. */
export const sentinel = (i: number): string => `\u0000raas-content-${NONCE}-${i}\u0000`;

const SENTINEL = new RegExp(`\u0000raas-content-${NONCE}-(\\d+)\u0000`, 'g');

/**
 * Turns a template rendering made with sentinels in place of contents into sections, the contents
 * put back as plain sections. Undefined when a sentinel is missing or repeated (the template
 * transformed the content, so it cannot be located).
 */
export function splitRendered(rendered: string, contents: readonly string[]): Section[] | undefined {
  const out: Section[] = [];
  const seen = new Set<number>();
  let last = 0;
  for (const m of rendered.matchAll(SENTINEL)) {
    const i = Number(m[1]);
    if (seen.has(i) || i >= contents.length) return undefined;
    seen.add(i);
    if (m.index > last) out.push({ text: rendered.slice(last, m.index), plain: false });
    out.push({ text: contents[i]!, plain: true });
    last = m.index + m[0].length;
  }
  if (seen.size !== contents.length) return undefined;
  if (last < rendered.length) out.push({ text: rendered.slice(last), plain: false });
  return out;
}
