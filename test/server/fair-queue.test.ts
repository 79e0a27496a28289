import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ShareHolder } from '../../src/server/pipeline/fair-queue.js';
import { StageLimiter } from '../../src/server/pipeline/limiter.js';
import { ManualClock, flush } from './helpers.js';

const holder = (name: string, weight = 1, maxInStage = Number.POSITIVE_INFINITY): ShareHolder => ({ name, weight, inStage: 0, maxInStage });

/**
 * Keeps every holder backlogged on one limiter for `totalMs` of the hand-driven clock: each holder
 * always has `size` more jobs waiting than it runs; each job holds its slot for the holder's service
 * time. Returns the slot time and the grants each holder got.
 */
async function backlogged(
  size: number,
  load: Array<{ h: ShareHolder; serviceMs: number; priority?: number }>,
  totalMs: number,
): Promise<{ busyMs: Map<string, number>; grants: Map<string, number>; order: string[] }> {
  const clock = new ManualClock();
  const lim = new StageLimiter('run', size, clock);
  const busyMs = new Map<string, number>();
  const grants = new Map<string, number>();
  const order: string[] = [];
  let stop = false;
  const worker = async (l: (typeof load)[number]): Promise<void> => {
    while (!stop) {
      const release = await lim.acquire(new AbortController().signal, { holder: l.h, priority: l.priority });
      // Grants after the measured window (the queues emptying out) are not counted.
      if (stop) {
        release();
        break;
      }
      order.push(l.h.name);
      grants.set(l.h.name, (grants.get(l.h.name) ?? 0) + 1);
      const t0 = clock.now();
      await new Promise<void>((r) => clock.setTimeout(r, l.serviceMs));
      busyMs.set(l.h.name, (busyMs.get(l.h.name) ?? 0) + clock.now() - t0);
      release();
    }
  };
  // `size` concurrent submitters per holder keep its lane non-empty whenever a slot frees.
  const loops = load.flatMap((l) => Array.from({ length: size + 1 }, () => worker(l)));
  await flush();
  await clock.advance(totalMs, 1);
  stop = true;
  await clock.advance(1000, 1);
  await Promise.all(loops);
  return { busyMs, grants, order };
}

describe('StageLimiter: weighted fair queuing over tenants', () => {
  it('equal weights and equal jobs: the grants alternate between two backlogged tenants', async () => {
    const a = holder('a');
    const b = holder('b');
    const { grants, order } = await backlogged(
      1,
      [
        { h: a, serviceMs: 5 },
        { h: b, serviceMs: 5 },
      ],
      500,
    );
    expect(Math.abs(grants.get('a')! - grants.get('b')!)).toBeLessThanOrEqual(1);
    // Never more than two in a row for one tenant (the first grant may follow the arrival order).
    expect(order.slice(2).join('')).not.toMatch(/aaa|bbb/);
  });

  it('weights 2:1 give slot time 2:1 (within 5 %)', async () => {
    const { busyMs } = await backlogged(
      4,
      [
        { h: holder('a', 2), serviceMs: 7 },
        { h: holder('b', 1), serviceMs: 7 },
      ],
      3000,
    );
    const share = busyMs.get('a')! / (busyMs.get('a')! + busyMs.get('b')!);
    expect(share).toBeGreaterThan((2 / 3) * 0.95);
    expect(share).toBeLessThan((2 / 3) * 1.05);
  });

  it('shares are of stage time, not of jobs: a tenant with 10x longer jobs gets 1/10 the grants and the same slot time', async () => {
    const { busyMs, grants } = await backlogged(
      2,
      [
        { h: holder('long'), serviceMs: 20 },
        { h: holder('short'), serviceMs: 2 },
      ],
      4000,
    );
    const share = busyMs.get('long')! / (busyMs.get('long')! + busyMs.get('short')!);
    expect(share).toBeGreaterThan(0.45);
    expect(share).toBeLessThan(0.55);
    expect(grants.get('short')! / grants.get('long')!).toBeGreaterThan(8);
  });

  it('a higher priority class is served first while it has waiters; the lower class gets the slots it leaves', async () => {
    const { busyMs } = await backlogged(
      2,
      [
        { h: holder('train'), serviceMs: 5, priority: 0 },
        { h: holder('eval'), serviceMs: 5, priority: 1 },
      ],
      500,
    );
    // eval is always backlogged here: train only ran the slots granted before eval's waiters arrived.
    expect(busyMs.get('train') ?? 0).toBeLessThanOrEqual(10);
    expect(busyMs.get('eval')).toBeGreaterThan(900);
  });

  it('a tenant that was idle banks no credit: after it arrives the two alternate, it does not take every slot to catch up', async () => {
    const clock = new ManualClock();
    const lim = new StageLimiter('run', 1, clock);
    const a = holder('a');
    const b = holder('b');
    const order: string[] = [];
    const run = async (h: ShareHolder, n: number): Promise<void> => {
      await Promise.all(
        Array.from({ length: n }, async () => {
          const rel = await lim.acquire(new AbortController().signal, { holder: h });
          order.push(h.name);
          await new Promise<void>((r) => clock.setTimeout(r, 10));
          rel();
        }),
      );
    };
    const aRuns = run(a, 40);
    await clock.advance(200, 1); // a alone for 20 jobs
    const bRuns = run(b, 10);
    await clock.advance(1000, 1);
    await Promise.all([aRuns, bRuns]);
    const tail = order.slice(20, 40).join('');
    expect(tail).not.toMatch(/bbb/);
    expect(tail.split('b').length - 1).toBeGreaterThanOrEqual(9);
  });

  it('aborted waiters cost their tenant nothing: after 100 of its queued jobs are cancelled, the two still alternate', async () => {
    const clock = new ManualClock();
    const lim = new StageLimiter('run', 1, clock);
    const a = holder('a');
    const b = holder('b');
    const first = await lim.acquire(new AbortController().signal, { holder: b });
    const doomed = Array.from({ length: 100 }, () => {
      const c = new AbortController();
      return { c, p: lim.acquire(c.signal, { holder: a }).catch(() => 'aborted') };
    });
    for (const d of doomed) d.c.abort(new Error('cancelled'));
    expect(await Promise.all(doomed.map((d) => d.p))).toEqual(Array(100).fill('aborted'));
    expect(lim.depth).toBe(0);
    const order: string[] = [];
    const queued = [a, b, a, b, a, b].map((h) =>
      lim.acquire(new AbortController().signal, { holder: h }).then((rel) => {
        order.push(h.name);
        rel();
      }),
    );
    first();
    await Promise.all(queued);
    expect(order).toEqual(['a', 'b', 'a', 'b', 'a', 'b']);
  });

  it('a tenant at its cross-stage cap gets no slot in any stage; a release in one stage lets another stage grant (onCapFreed)', async () => {
    const clock = new ManualClock();
    const init = new StageLimiter('init', 4, clock);
    const ev = new StageLimiter('eval', 4, clock);
    init.onCapFreed = () => ev.pump();
    ev.onCapFreed = () => init.pump();
    const capped = holder('capped', 1, 1);
    const other = holder('other');
    const r1 = await init.acquire(new AbortController().signal, { holder: capped });
    let evalGranted = false;
    const waiting = ev.acquire(new AbortController().signal, { holder: capped }).then((rel) => {
      evalGranted = true;
      return rel;
    });
    // Another tenant is not held up by the capped one.
    const r2 = await ev.acquire(new AbortController().signal, { holder: other });
    await flush();
    expect([evalGranted, capped.inStage, ev.depth]).toEqual([false, 1, 1]);
    r1();
    const r3 = await waiting;
    expect([evalGranted, capped.inStage]).toEqual([true, 1]);
    r2();
    r3();
    expect([capped.inStage, other.inStage, init.busy, ev.busy]).toEqual([0, 0, 0, 0]);
  });

  it('resize: growing grants waiters at once; shrinking takes no slot back and grants none until enough are released', async () => {
    const lim = new StageLimiter('eval', 1);
    const rels: Array<() => void> = [];
    const got = Array.from({ length: 4 }, () => lim.acquire(new AbortController().signal).then((r) => rels.push(r)));
    await flush();
    expect([lim.busy, lim.depth]).toEqual([1, 3]);
    lim.resize(3);
    await flush();
    expect([lim.busy, lim.depth]).toEqual([3, 1]);
    lim.resize(1);
    rels[0]!();
    rels[1]!();
    await flush();
    // busy 1 = size 1: the last waiter still waits.
    expect([lim.busy, lim.depth, lim.size]).toEqual([1, 1, 1]);
    rels[2]!();
    await Promise.all(got);
    expect([lim.busy, lim.depth]).toEqual([1, 0]);
    rels[3]!();
    expect(lim.busy).toBe(0);
  });

  it('property: whatever the weights and service times, each backlogged tenant gets its weighted share of slot time within 10 %', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.record({ w: fc.integer({ min: 1, max: 4 }), ms: fc.integer({ min: 1, max: 12 }) }), { minLength: 2, maxLength: 4 }),
        fc.integer({ min: 1, max: 4 }),
        async (tenants, size) => {
          const load = tenants.map((t, i) => ({ h: holder(`t${i}`, t.w), serviceMs: t.ms }));
          const { busyMs } = await backlogged(size, load, 2500);
          const total = [...busyMs.values()].reduce((x, y) => x + y, 0);
          const wsum = tenants.reduce((x, t) => x + t.w, 0);
          for (const [i, t] of tenants.entries()) {
            const share = (busyMs.get(`t${i}`) ?? 0) / total;
            expect(Math.abs(share - t.w / wsum)).toBeLessThan(0.1 * (t.w / wsum) + 0.02);
          }
        },
      ),
      { numRuns: 12, seed: 23 },
    );
  });
});
