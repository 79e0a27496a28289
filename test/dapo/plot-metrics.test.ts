import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseTrainConfig } from '../../src/dapo/config.js';
import { CoordinatorMetrics, plural, stepLine } from '../../src/dapo/metrics.js';
import { serveMetrics } from '../../src/dapo/metrics-server.js';
import { niceAxis } from '../../src/dapo/plot.js';
import { runPlotSvg, type PlotStep } from '../../src/dapo/plot-run.js';
import { runTraining } from '../../src/dapo/train.js';
import { chatDataset } from './helpers.js';

const dir = mkdtempSync(path.join(tmpdir(), 'raas-plot-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('niceAxis', () => {
  it('gives 5 to 8 round intervals, headroom above the maximum and room below a negative minimum', () => {
    for (const [max, min] of [
      [0.77, 0],
      [1, 0],
      [0.0031, 0],
      [3.34, 0],
      [93.5, 0],
      [12000, 0],
      [0, 0],
      [4.1, -0.3],
      [0, -2],
      [1e-7, 0],
    ] as const) {
      const a = niceAxis(max, min);
      const intervals = a.ticks.length - 1;
      expect(intervals, `${max} ${min}`).toBeGreaterThanOrEqual(5);
      expect(intervals).toBeLessThanOrEqual(8);
      expect(a.top).toBeGreaterThan(max);
      expect(a.top).toBeGreaterThanOrEqual(max * 1.05);
      expect(a.bottom).toBeLessThanOrEqual(min);
      if (min < 0) expect(a.bottom).toBeLessThan(min);
      expect(a.ticks).toContain(0);
      const mant = a.step / 10 ** Math.floor(Math.log10(a.step));
      expect([1, 2, 2.5, 5].some((f) => Math.abs(mant - f) < 1e-9)).toBe(true);
    }
  });
});

/** Text elements of an SVG with their x, y and content. */
const texts = (svg: string): Array<{ x: number; y: number; s: string; anchor: string }> =>
  [...svg.matchAll(/<text x="([\d.]+)" y="([\d.]+)"([^>]*)>([^<]*)<\/text>/g)].map((m) => ({
    x: Number(m[1]),
    y: Number(m[2]),
    s: m[4]!,
    anchor: /text-anchor="(\w+)"/.exec(m[3]!)?.[1] ?? 'start',
  }));

describe('runPlotSvg', () => {
  const steps: PlotStep[] = Array.from({ length: 12 }, (_, i) => ({
    step: i,
    wall_s: 8 + i,
    accepted: 4,
    filtered: 12,
    dropped_error: 0,
    mean_reward: 0.59 + i * 0.02,
    batch_mean_reward: 0.5,
    informative_groups_per_s: 0.45,
    staleness_mean: 0.4,
    staleness_max: 1,
    tokens_generated: 1000,
    tokens_wasted: 50,
  }));
  const svg = runPlotSvg('raas train demo: per step', steps);

  it('has the six panels, each with a grid of >= 6 y ticks and a top above its data', () => {
    expect(svg.match(/<g class="panel">/g)).toHaveLength(6);
    for (const t of ['reward', 'informative groups/s', 'filtered share', 'waste', 'staleness', 'step time'])
      expect(svg).toContain(`font-weight="bold">${t}</text>`);
    const panels = svg.split('<g class="panel">').slice(1);
    for (const p of panels) {
      const yTicks = texts(p).filter((t) => t.anchor === 'end');
      expect(yTicks.length).toBeGreaterThanOrEqual(6);
      expect(p.match(/stroke="#e5e5e5"/g)!.length).toBeGreaterThanOrEqual(5); // grid lines
    }
    // filtered share 75% sits below the top tick (headroom)
    const filtered = texts(panels[2]!)
      .filter((t) => t.anchor === 'end')
      .map((t) => Number(t.s.replace('%', '')));
    expect(Math.max(...filtered)).toBeGreaterThan(75);
  });

  it('lays labels out without overlap (legend entries, x ticks)', () => {
    const CHAR = 6.2;
    const box = (t: { x: number; y: number; s: string; anchor: string }) => {
      const w = t.s.length * CHAR;
      const x0 = t.anchor === 'middle' ? t.x - w / 2 : t.anchor === 'end' ? t.x - w : t.x;
      return { x0, x1: x0 + w, y0: t.y - 11, y1: t.y };
    };
    const all = texts(svg).map(box);
    for (let i = 0; i < all.length; i++) {
      for (let j = i + 1; j < all.length; j++) {
        const a = all[i]!,
          b = all[j]!;
        const overlap = a.x0 < b.x1 - 0.5 && b.x0 < a.x1 - 0.5 && a.y0 < b.y1 - 0.5 && b.y0 < a.y1 - 0.5;
        expect(overlap, `${texts(svg)[i]!.s} / ${texts(svg)[j]!.s}`).toBe(false);
      }
    }
  });
});

describe('metrics.jsonl, the step line and Prometheus metrics of an embedded run', () => {
  it('writes one record per step with every figure of the step line, and serves the coordinator metrics', async () => {
    const cfg = parseTrainConfig(
      {
        name: 'm',
        seed: 3,
        embedded: { backends: 1, sim: { latency: { decode_ms_per_token: 0.2 } } },
        dataset: { path: chatDataset(60, dir) },
        n: 4,
        batch_size: 2,
        steps: 2,
        output_dir: path.join(dir, 'runs'),
      },
      'test',
    );
    const metrics = new CoordinatorMetrics();
    const prom = await serveMetrics(metrics.registry, 0);
    let lines = '';
    const stderr = {
      write: (s: string) => ((lines += s), process.env.DEBUG_PLOT ? process.stderr.write(s) : true),
      isTTY: false,
    } as unknown as NodeJS.WriteStream;
    try {
      const s = await runTraining(cfg, { stderr, metrics });
      const recs = readFileSync(path.join(s.run_dir, 'metrics.jsonl'), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l));
      expect(recs.map((r) => r.step)).toEqual([0, 1]);
      const stepLines = lines.split('\n').filter((l) => l.startsWith('step '));
      expect(stepLines).toHaveLength(2);
      for (const [i, r] of recs.entries()) {
        expect(stepLines[i]).toBe(stepLine(r));
        expect(stepLines[i]).toContain(`accepted ${r.accepted} of ${r.finished} finished groups (${r.filtered} filtered`);
        expect(r.finished).toBe(r.accepted + r.filtered + r.dropped_error);
        expect(r.groups).toBe(2);
        for (const k of [
          'wall_s',
          'mean_reward',
          'batch_mean_reward',
          'informative_groups_per_s',
          'worker_utilization',
          'staleness_mean',
          'staleness_max',
          'waste_fraction',
          'filtered_share',
          'tokens_generated',
          'elapsed_s',
          'policy_version',
          'carried_over',
          'cancelled',
        ]) {
          expect(typeof r[k], k).toBe('number');
        }
        expect(r.batch_mean_reward).toBeCloseTo(
          JSON.parse(readFileSync(path.join(s.run_dir, 'batches', `step-${i}.json`), 'utf8')).stats.batch_mean_reward,
          9,
        );
      }
      const text = await (await fetch(prom.url)).text();
      expect(text).toMatch(/^raas_coordinator_steps_total 2$/m);
      expect(text).toMatch(/^raas_coordinator_step 2$/m);
      expect(text).toMatch(
        new RegExp(`^raas_coordinator_groups_total\\{outcome="accepted"\\} ${recs[0].accepted + recs[1].accepted}$`, 'm'),
      );
      expect(text).toMatch(/^raas_coordinator_last_step_batch_mean_reward [\d.]+$/m);
      // selection is off: the skip counters exist and stay 0
      expect(text).toMatch(/^raas_coordinator_prompts_skipped_total\{kind="hard"\} 0$/m);
      expect(text).toMatch(/^raas_coordinator_policy_version 1$/m);
      const missing = await fetch(prom.url.replace('/metrics', '/nope'));
      expect(missing.status).toBe(404);
      expect((await missing.json()).error.code).toBe('route_not_found');
      // The plot reads the same rows.
      expect(readFileSync(path.join(s.run_dir, 'plot.svg'), 'utf8').match(/<g class="panel">/g)).toHaveLength(6);
    } finally {
      await prom.close();
    }
  }, 120_000);

  it('says "1 step" and "2 steps"', () => {
    expect(plural(1, 'step')).toBe('1 step');
    expect(plural(2, 'step')).toBe('2 steps');
  });
});

describe('raas sidecar --metrics-port (the built CLI)', () => {
  it('serves the coordinator metrics of the batches it hands over, and exits with the sidecar', async () => {
    const { spawn } = await import('node:child_process');
    const { writeFileSync } = await import('node:fs');
    const { ROOT } = await import('./helpers.js');
    const cfgFile = path.join(dir, 'side.yaml');
    writeFileSync(
      cfgFile,
      `name: side\nseed: 2\nembedded: {backends: 1}\ndataset: {path: ${chatDataset(40, dir)}}\nn: 4\nbatch_size: 2\nsteps: 2\noutput_dir: ${dir}/runs\n`,
    );
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/src/cli.js'), 'sidecar', '--config', cfgFile, '--metrics-port', '0'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '',
      err = '';
    child.stdout!.on('data', (c: Buffer) => (out += c));
    child.stderr!.on('data', (c: Buffer) => (err += c));
    const until = async (f: () => boolean, what: string): Promise<void> => {
      for (let i = 0; i < 1500 && !f(); i++) await new Promise((r) => setTimeout(r, 100));
      if (!f()) throw new Error(`timed out waiting for ${what}; stderr: ${err}`);
    };
    try {
      await until(() => /Prometheus metrics on (\S+)/.test(err), 'the metrics url');
      const url = /Prometheus metrics on (\S+)/.exec(err)![1]!;
      child.stdin!.write('{"id": 1, "op": "next_batch"}\n');
      await until(() => /"id":1,"ok":true/.test(out), 'the batch');
      const text = await (await fetch(url)).text();
      expect(text).toMatch(/^raas_coordinator_steps_total 1$/m);
      expect(text).toMatch(/^raas_coordinator_step 1$/m);
      expect(text).toMatch(/^raas_coordinator_groups_total\{outcome="accepted"\} [1-9]\d*$/m);
      child.stdin!.end();
      const code = await new Promise<number | null>((r) => child.once('close', r));
      expect(code, err.slice(-2000)).toBe(0);
      await expect(fetch(url)).rejects.toThrow(); // nothing outlives the sidecar
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 240_000);
});
