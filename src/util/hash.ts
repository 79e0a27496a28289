import { createHash } from 'node:crypto';

/** A 31-bit non-negative seed from any parts (stable across runs and machines). */
export function seedOf(...parts: Array<string | number>): number {
  const h = createHash('sha256').update(parts.join('\u0000')).digest();
  return h.readUInt32BE(0) & 0x7fffffff;
}

/** mulberry32: a small seeded PRNG returning floats in [0, 1). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
