import type { Tokenizer } from '../tokens/tokenizer.js';
import type { SimFiller } from './options.js';

// Common English words; those that encode to one token become the filler vocabulary, so filler ids
// are real ids of whatever tokenizer the simulator runs with.
const WORDS = (
  'the of and to in is that for it as was with be by on not he this are or his from at which but have an they ' +
  'you were her she there been one all we their has would when if so no will more can out up into do said what ' +
  'some time could them other than only then its about two may first like these new also any very should over ' +
  'after most where make how even made many back well way just now through those people much good see same work ' +
  'because take know between each under long last still world life down own day while house model answer value ' +
  'number step check result think problem case next small large first second order list code test file line'
).split(' ');

/** Seeded filler text: a lognormal number of real single-token words, ending in the eos id. */
export class Filler {
  private readonly vocab: number[];
  private readonly period: number[];

  constructor(
    private readonly tokenizer: Tokenizer,
    private readonly cfg: SimFiller,
  ) {
    const seen = new Set<number>();
    for (const w of WORDS) {
      const ids = tokenizer.encode(` ${w}`);
      if (ids.length === 1) seen.add(ids[0]!);
    }
    if (seen.size === 0) throw new Error(`sim: tokenizer ${tokenizer.name} encodes no filler word as one token`);
    this.vocab = [...seen];
    this.period = tokenizer.encode('.');
  }

  /** Length in tokens (before eos), lognormal around the configured median. */
  length(rand: () => number): number {
    // Box-Muller from two uniforms; 1 - u keeps log() finite.
    const z = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
    const n = Math.round(this.cfg.median_tokens * Math.exp(this.cfg.sigma * z));
    return Math.min(this.cfg.max_tokens, Math.max(this.cfg.min_tokens, n));
  }

  /** The filler ids: words with a period every 8-15 words, then the eos id. */
  ids(rand: () => number): number[] {
    const n = this.length(rand);
    const out: number[] = [];
    let sinceStop = 0;
    while (out.length < n) {
      if (sinceStop > 8 && rand() < 0.15 && this.period.length === 1) {
        out.push(this.period[0]!);
        sinceStop = 0;
      } else {
        out.push(this.vocab[Math.floor(rand() * this.vocab.length)]!);
        sinceStop++;
      }
    }
    out.push(this.tokenizer.eosId);
    return out;
  }
}

/** A plausible sampled-token logprob: mostly near 0, sometimes a few nats down; never below vLLM's clamp. */
export function sampleLogprob(rand: () => number): number {
  const u = rand();
  const lp = u < 0.7 ? -u * 0.05 : Math.log(1 - u) * 1.5;
  // `|| 0` turns -0 into 0: JSON writes -0 as 0, and a logprob must survive the wire unchanged.
  return Math.max(-9999, Math.round(lp * 1e6) / 1e6) || 0;
}
