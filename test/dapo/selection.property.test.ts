import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { runDes } from './des.js';

// Selection through the real DapoCore on the discrete-event fleet, for arbitrary knobs and
// datasets where most prompts are never or always solved (and some flip as the policy moves).

const knobs = fc.record({
  explore: fc.double({ min: 0.01, max: 0.5, noNaN: true }),
  max_skips: fc.integer({ min: 0, max: 12 }),
  target_informative: fc.double({ min: 0.3, max: 0.95, noNaN: true }),
  half_life_versions: fc.option(fc.integer({ min: 1, max: 30 }), { nil: null }),
  initial_keep: fc.double({ min: 0.05, max: 0.95, noNaN: true }),
  adapt_step: fc.double({ min: 0.005, max: 0.2, noNaN: true }),
});
/** Per prompt: a pass rate in {0, 1, 0.5} by a seeded pattern, or one that flips at version `flip`. */
const workload = fc.record({
  prompts: fc.integer({ min: 5, max: 60 }),
  pattern: fc.array(fc.constantFrom(0, 1, 0.5, -1), { minLength: 1, maxLength: 7 }),
  flip: fc.integer({ min: 1, max: 20 }),
});

describe('selection: no prompt is starved, every skip is visible (property)', () => {
  it('a prompt is never skipped more than max_skips turns in a row; submissions + skips are exactly the dataset turns taken', () => {
    fc.assert(
      fc.property(knobs, workload, fc.integer({ min: 0, max: 1000 }), fc.constantFrom('async', 'sync'), (sel, w, seed, mode) => {
        const rate = (i: number, v: number): number => {
          const p = w.pattern[i % w.pattern.length]!;
          return p >= 0 ? p : v < w.flip ? 0 : 1; // -1: never solved until version `flip`, then always
        };
        let worst = 0;
        const r = runDes({
          seed,
          capacity: 24,
          steps: 25,
          prompts: w.prompts,
          passRate: rate,
          config: { mode, n: 4, batch_size: 3, selection: { mode: 'history', ...sel } },
          afterHandover: (core) => {
            for (const rec of core.history.all()) worst = Math.max(worst, rec.skip_streak);
          },
        });
        const core = r.core;
        for (const rec of core.history.all()) worst = Math.max(worst, rec.skip_streak);
        expect(worst).toBeLessThanOrEqual(sel.max_skips);
        const records = core.history.all();
        const turns = records.reduce((a, x) => a + x.submitted + x.skips, 0);
        const { epoch, index } = core.dataset.cursor;
        expect(turns).toBe(epoch * w.prompts + index);
        const skips = records.reduce((a, x) => a + x.skips, 0);
        expect(core.totals.skipped).toBe(skips);
        expect(r.batches.reduce((a, b) => a + Number(b.stats.skipped), 0) + core.window.skipped).toBe(skips);
        expect(records.reduce((a, x) => a + x.submitted, 0)).toBe(core.totals.groups_submitted);
        // Each epoch that completed gave every prompt its turn (run or skipped).
        if (epoch >= 1) expect(records).toHaveLength(w.prompts);
        expect(r.violations).toEqual([]);
      }),
      { numRuns: 60 },
    );
  });

  it('with max_skips k, a prompt that had t turns ran at least ⌊t / (k + 1)⌋ times, even when never informative', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 1000 }), (k, seed) => {
        const r = runDes({
          seed,
          capacity: 16,
          steps: 40,
          prompts: 12,
          passRate: (i) => (i % 3 === 0 ? 0.5 : i % 3 === 1 ? 0 : 1),
          config: { n: 4, batch_size: 2, selection: { mode: 'history', max_skips: k, explore: 0.01, initial_keep: 0.05 } },
        });
        const epochs = r.core.dataset.cursor.epoch;
        expect(epochs).toBeGreaterThanOrEqual(3);
        for (const rec of r.core.history.all()) {
          const turns = rec.submitted + rec.skips;
          expect(turns).toBeGreaterThanOrEqual(epochs);
          expect(rec.submitted).toBeGreaterThanOrEqual(Math.floor(turns / (k + 1)));
        }
      }),
      { numRuns: 40 },
    );
  });
});
