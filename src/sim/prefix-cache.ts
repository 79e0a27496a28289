/** Block size of the simulated KV cache, as vLLM's default. */
const BLOCK_TOKENS = 16;

/**
 * A prefix cache over full 16-token blocks with LRU eviction, as vLLM's automatic prefix caching
 * counts it: block i is identified by a hash chained over every id before and inside it, so a block
 * hits only when the whole prefix up to it matches.
 */
export class PrefixCache {
  // Map iteration order is insertion order: re-inserting on use makes the first key the LRU block.
  private readonly blocks = new Map<number, true>();

  constructor(private readonly capacity: number) {}

  /** Number of prompt tokens served from the cache (a multiple of 16), refreshing the hit blocks. */
  lookup(ids: readonly number[]): number {
    let hit = 0;
    for (const key of blockKeys(ids)) {
      if (!this.blocks.has(key)) break;
      this.blocks.delete(key);
      this.blocks.set(key, true);
      hit += BLOCK_TOKENS;
    }
    return hit;
  }

  /** Stores every full block of `ids` (prompt or prompt + generated), evicting the LRU ones. */
  insert(ids: readonly number[]): void {
    if (this.capacity === 0) return;
    for (const key of blockKeys(ids)) {
      this.blocks.delete(key);
      this.blocks.set(key, true);
    }
    while (this.blocks.size > this.capacity) {
      const oldest = this.blocks.keys().next().value as number;
      this.blocks.delete(oldest);
    }
  }

  /** Fraction of the capacity in use (vllm:kv_cache_usage_perc is about running requests; close enough here). */
  usage(): number {
    return this.capacity === 0 ? 0 : this.blocks.size / this.capacity;
  }

  clear(): void {
    this.blocks.clear();
  }

  get size(): number {
    return this.blocks.size;
  }
}

/**
 * Chained FNV-1a style keys of every full block: two 32-bit lanes folded into one 53-bit number
 * (a Map with number keys is several times faster than with strings), collisions negligible.
 */
function* blockKeys(ids: readonly number[]): Generator<number> {
  let a = 0x811c9dc5;
  let b = 0x01000193;
  const full = ids.length - (ids.length % BLOCK_TOKENS);
  for (let i = 0; i < full; i++) {
    const v = ids[i]!;
    a = Math.imul(a ^ v, 0x01000193) >>> 0;
    b = Math.imul(b ^ (v + 0x9e3779b9), 0x85ebca6b) >>> 0;
    b ^= b >>> 13;
    if ((i + 1) % BLOCK_TOKENS === 0) yield a * 0x200000 + (b & 0x1fffff);
  }
}

/** A fast 32-bit hash of an id sequence (seeds the filler so that different prompts differ). */
export function hashIds(ids: readonly number[]): number {
  let h = 0x811c9dc5;
  for (const v of ids) h = Math.imul(h ^ v, 0x01000193) >>> 0;
  return h & 0x7fffffff;
}
