import type { TrainConfig } from '../protocol/config-train.js';
import { rng, seedOf } from '../util/hash.js';
import { chooseGroupSize, posteriorOf } from './adaptive-n.js';
import type { Prompt, PromptDataset } from './dataset.js';
import type { PromptHistory } from './history.js';
import type { Decision, Selector } from './selection.js';

/** The next prompt to submit and its group size. */
export interface NextPrompt {
  prompt: Prompt;
  n: number;
  /** The probability selection submitted it with (1: its recent groups were not all equal, or it was forced). */
  keep: number;
  /** Submitted regardless of the draw: skipped max_skips times in a row (or a whole pass skipped in one call). */
  forced: boolean;
}

/** What intake tells the core about each skip (window and run counters). */
export type OnSkip = (prompt: Prompt, d: Decision) => void;

/**
 * Where groups come from: the dataset's order, filtered by selection (skips are counted and
 * recorded in the history, and take the prompt's turn in the epoch), with each group's size from
 * adaptive n. A skip decision draws from a seed of (run seed, epoch, position), so a resumed run
 * draws the same numbers; the decision itself reads the history as it is then.
 */
export class PromptIntake {
  constructor(
    private readonly cfg: TrainConfig,
    readonly dataset: PromptDataset,
    readonly history: PromptHistory,
    readonly selector: Selector,
  ) {}

  /**
   * The next prompt to submit, taken from the dataset only when `fits(n)` accepts its group size
   * (else it stays first in line). Skipped prompts are taken and reported through `onSkip`. After a
   * whole pass of skips in one call the next prompt is submitted regardless, so a call always ends.
   */
  next(version: number, step: number, fits: (n: number) => boolean, onSkip: OnSkip): NextPrompt | undefined {
    const passes = this.dataset.rows.length;
    for (let skipped = 0; ; skipped++) {
      const prompt = this.dataset.peek();
      if (!prompt) return undefined;
      const rec = this.history.peek(prompt);
      const { epoch, index } = this.dataset.cursor;
      const u = rng(seedOf('select', this.cfg.seed, epoch, index))();
      const d = this.selector.decide(rec, version, u);
      if (d.skip && skipped < passes) {
        this.dataset.next();
        this.history.recordSkip(prompt, step);
        onSkip(prompt, d);
        continue;
      }
      const n = this.groupSize(prompt, version);
      if (!fits(n)) return undefined;
      this.dataset.next();
      this.history.recordSubmit(prompt);
      // A forced submission (max_skips, or a whole pass skipped) happened with probability 1.
      const forced = d.forced === true || d.skip;
      return { prompt, n, keep: forced ? 1 : d.keep, forced };
    }
  }

  /** The prompt's group size: `n`, or adaptive n's choice from its posterior. */
  groupSize(prompt: Prompt, version: number): number {
    const a = this.cfg.selection.adaptive_n;
    if (!a) return this.cfg.n;
    const post = posteriorOf(this.history.peek(prompt), version, this.cfg.selection.half_life_versions);
    return chooseGroupSize(a, this.cfg.n, post);
  }
}
