import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { runDes } from './des.js';
import type { DapoCore } from '../../src/dapo/core.js';
import type { Batch } from '../../src/protocol/batch.js';

/**
 * Properties of DapoCore over the discrete-event fleet (test/dapo/des.ts): whatever the config, the
 * job durations, the weight-update pattern and the live capacity (servers dying and coming back),
 * a run produces exactly the batches asked for, each with batch_size groups of n rollouts, and the
 * handover leaves nothing running or buffered that the next update would push past max_staleness.
 */
describe('DapoCore properties (discrete-event fleet)', () => {
  const config = fc.record({
    seed: fc.integer({ min: 1, max: 1_000_000 }),
    // n >= 2: a group of one rollout is never informative (all its rewards are equal).
    n: fc.integer({ min: 2, max: 5 }),
    B: fc.integer({ min: 1, max: 6 }),
    eta: fc.integer({ min: 0, max: 3 }),
    carry: fc.boolean(),
    sync: fc.boolean(),
    ordered: fc.boolean(),
    capacity: fc.integer({ min: 1, max: 40 }),
    steps: fc.integer({ min: 1, max: 7 }),
    sigma: fc.double({ min: 0.1, max: 1.5, noNaN: true }),
    trainMs: fc.integer({ min: 0, max: 400 }),
    updates: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 5 }),
    // The live capacity: a share of the fleet goes down at `downAt` (virtual ms) and comes back at `upAt`.
    outage: fc.option(
      fc.record({
        downAt: fc.integer({ min: 0, max: 2000 }),
        length: fc.integer({ min: 1, max: 3000 }),
        share: fc.double({ min: 0, max: 1, noNaN: true }),
      }),
      { nil: undefined },
    ),
  });

  it('produces exactly the requested number of batches, each with batch_size groups of n rollouts, within the bound', () => {
    fc.assert(
      fc.property(config, (c) => {
        const cap = (t: number): number =>
          c.outage && t >= c.outage.downAt && t < c.outage.downAt + c.outage.length
            ? Math.floor(c.capacity * (1 - c.outage.share))
            : c.capacity;
        const run = runDes({
          seed: c.seed,
          steps: c.steps,
          capacity: c.capacity,
          sigma: c.sigma,
          trainMs: c.trainMs,
          config: {
            n: c.n,
            batch_size: c.B,
            max_staleness: c.eta,
            carry_over: c.carry,
            mode: c.sync ? 'sync' : 'async',
            ordered_handover: c.ordered,
          },
          updatesPerStep: (s) => c.updates[s % c.updates.length],
          capacityAt: c.outage ? cap : undefined,
        });
        expect(run.batches).toHaveLength(c.steps);
        const ids = new Set<string>();
        run.batches.forEach((b, i) => {
          expect(b.step).toBe(i);
          expect(b.groups).toHaveLength(c.B);
          if (i > 0) expect(b.policy_version).toBeGreaterThanOrEqual(run.batches[i - 1].policy_version);
          for (const g of b.groups) {
            expect(g.rollouts).toHaveLength(c.n);
            for (const r of g.rollouts) {
              expect(ids.has(r.job_id)).toBe(false);
              ids.add(r.job_id);
              expect(r.staleness).toBeLessThanOrEqual(c.eta);
            }
          }
          expect(b.stats.worker_utilization).toBeGreaterThanOrEqual(0);
          expect(b.stats.worker_utilization).toBeLessThanOrEqual(1 + 1e-9);
        });
        // Buffered, running and cancelling groups together never exceed the admission bound.
        if (!c.sync) expect(run.maxHeld).toBeLessThanOrEqual((c.eta + 1) * c.B);
        expect(run.violations).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it('at handover, cancels the running groups and drops the buffered ones that one more update would make too stale', () => {
    let cancelledAtHandover = 0;
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.integer({ min: 0, max: 2 }),
        fc.integer({ min: 2, max: 5 }),
        (seed, eta, B) => {
          const seen: string[] = [];
          let handovers = 0;
          const check = (core: DapoCore, batch: Batch, cancels: string[]): void => {
            handovers++;
            cancelledAtHandover += cancels.length;
            const next = batch.policy_version + 1;
            for (const g of core.groups.values()) {
              if ((g.state === 'running' || g.state === 'buffered') && next - g.submittedVersion > eta) {
                seen.push(
                  `step ${batch.step}: group ${g.index} ${g.state}, submitted at v${g.submittedVersion}, staleness ${next - g.submittedVersion} > ${eta} after the next update`,
                );
              }
            }
          };
          // A slow trainer (500 virtual ms) so that groups are running at every handover.
          runDes({
            seed,
            steps: 5,
            capacity: 32,
            trainMs: 500,
            config: { n: 4, batch_size: B, max_staleness: eta, carry_over: true },
            afterHandover: check,
          });
          expect(handovers).toBe(5);
          expect(seen).toEqual([]);
        },
      ),
      { numRuns: 60 },
    );
    // The handover did have running groups to cancel (max_staleness >= 1 leaves older groups running).
    expect(cancelledAtHandover).toBeGreaterThan(0);
  });
});
