import type { Chunk } from './sections.js';
import type { Tokenizer } from './tokenizer.js';

/** Ids decoded past the vocabulary before the scan gives up (an id past the end decodes to nothing or throws). */
const PAST_END = 1024;
/** Used when the vocabulary cannot be scanned: a weaker, still sound bound for byte-level BPE vocabularies. */
const FALLBACK_BYTES = 1024;

const cache = new WeakMap<Tokenizer, number>();

/**
 * The most UTF-8 bytes one token of the vocabulary stands for (Qwen3: 128, a run of spaces), read
 * once per tokenizer by decoding every id (about 0.2 s). A partial-byte token decodes to U+FFFD
 * (3 bytes), which can only raise the figure, so bounds built on it stay lower bounds.
 */
export function maxTokenBytes(tok: Tokenizer): number {
  const known = cache.get(tok);
  if (known !== undefined) return known;
  let max = 0;
  let empty = 0;
  try {
    for (let id = 0; empty < PAST_END && id < 4_000_000; id++) {
      const s = tok.decode([id]);
      if (s === '') empty++;
      else {
        empty = 0;
        max = Math.max(max, Buffer.byteLength(s));
      }
    }
  } catch {
    /* an id past the vocabulary: the scan is done */
  }
  const v = max > 0 ? max : FALLBACK_BYTES;
  cache.set(tok, v);
  return v;
}

/**
 * A lower bound of the tokens the chunks encode to, without encoding them: each id stands for one
 * token, each text for at least its UTF-8 bytes ÷ maxTokenBytes (and a UTF-16 length never exceeds
 * the UTF-8 byte count). Reads the vocabulary only when `limit` could be passed, so ordinary
 * requests cost a sum of lengths.
 */
export function exceedsTokens(tok: Tokenizer, chunks: readonly Chunk[], limit: number): boolean {
  let units = 0;
  let ids = 0;
  for (const c of chunks)
    if ('id' in c) ids++;
    else units += c.text.length;
  if (ids + units <= limit) return false;
  return ids + Math.ceil(units / maxTokenBytes(tok)) > limit;
}
