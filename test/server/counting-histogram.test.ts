import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CountingHistogram } from '../../src/server/counting-histogram.js';

const buckets = [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800];

describe('CountingHistogram', () => {
  it("exposes exactly the text prom-client's Histogram writes for the same observations", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.tuple(
            fc.constantFrom('init', 'run', 'eval'),
            fc.constantFrom('default', 'team a', 'b"\\\n'),
            fc.oneof(fc.double({ min: 0, max: 4000, noNaN: true }), fc.constantFrom(0, 0.001, 1, 1800, 1800.5)),
          ),
          { maxLength: 200 },
        ),
        async (obs) => {
          const a = new Registry();
          const b = new Registry();
          const theirs = new Histogram({
            name: 'x_seconds',
            help: 'help "text"\\',
            labelNames: ['stage', 'tenant'],
            buckets,
            registers: [a],
          });
          const ours = new CountingHistogram('x_seconds', 'help "text"\\', ['stage', 'tenant'], buckets, [b]);
          for (const [stage, tenant, v] of obs) {
            theirs.labels({ stage, tenant }).observe(v);
            ours.child({ stage, tenant })(v);
          }
          expect(await b.metrics()).toBe(await a.metrics());
          // The JSON form too, but for prom-client's exemplar slots (this histogram keeps none).
          const plain = (ms: Awaited<ReturnType<Registry['getMetricsAsJSON']>>) =>
            ms.map((m) => ({ ...m, values: m.values.map(({ exemplar: _e, ...v }: { exemplar?: unknown }) => v) }));
          expect(plain(await b.getMetricsAsJSON())).toEqual(plain(await a.getMetricsAsJSON()));
        },
      ),
      { numRuns: 100 },
    );
  });

  it('refuses a value that is not finite, as prom-client does, and resets with the registry', async () => {
    const r = new Registry();
    const h = new CountingHistogram('y_seconds', 'y', ['stage'], buckets, [r]);
    const rec = h.child({ stage: 'run' });
    expect(() => rec(Number.NaN)).toThrow(TypeError);
    rec(2);
    expect(await r.metrics()).toMatch(/y_seconds_count\{stage="run"\} 1\n/);
    r.resetMetrics();
    expect(await r.metrics()).toMatch(/y_seconds_count\{stage="run"\} 0\n/);
  });
});
