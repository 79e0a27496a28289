import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Coordinator } from '../../src/dapo/index.js';
import { Batch } from '../../src/protocol/batch.js';
import { RaasError } from '../../src/protocol/errors.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import type { SimLogEntry } from '../../src/sim/engine.js';
import { parseMetrics } from '../../src/sim/index.js';
import { talkHandler } from '../server/fixtures/talk-handler.js';

// A co-located trainer's cycle against a real rollout server and real simulated vLLM backends:
// next batch → pause → the engines go away (the simulators are stopped: a training step on their
// GPUs) → update_weights → the engines come back on the same ports → resume.

const SIM = {
  seed: 6,
  request_log: 5000,
  latency: { decode_ms_per_token: 0.4 },
  filler: { median_tokens: 120, sigma: 0.3, min_tokens: 40, max_tokens: 200 },
};

function talkDataset(count: number): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'raas-pause-')), 'talk.jsonl');
  const rows = Array.from({ length: count }, (_, i) =>
    JSON.stringify({ data_source: 'talk', instance_id: `t${i}`, turns: 2 + (i % 2), pass_rate: 0.5 }),
  );
  writeFileSync(file, rows.join('\n') + '\n');
  return file;
}

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

/** Simulators that can be stopped and started again on their ports, keeping every request they served. */
class Engines {
  sims: SimHandle[] = [];
  ports: number[] = [];
  readonly served: SimLogEntry[] = [];
  async start(count?: number): Promise<void> {
    const ports = count === undefined ? this.ports : Array.from({ length: count }, () => 0);
    this.sims = await Promise.all(ports.map((port) => startSim({ ...SIM, port })));
    this.ports = this.sims.map((s) => Number(new URL(s.url).port));
  }
  async stop(): Promise<void> {
    for (const s of this.sims) this.served.push(...s.requestLog);
    await Promise.all(this.sims.map((s) => s.close()));
    this.sims = [];
  }
  get urls(): string[] {
    return this.ports.map((p) => `http://127.0.0.1:${p}`);
  }
  async running(): Promise<number> {
    let n = 0;
    for (const s of this.sims) n += parseMetrics(await (await fetch(`${s.url}/metrics`)).text())['vllm:num_requests_running'] ?? 0;
    return n;
  }
}

describe('pause() / resume() for co-located trainers (real rollout server, simulators stopped during the update)', () => {
  for (const mode of ['drain', 'abort'] as const) {
    it(`${mode}: no group is dropped, and every call after an update runs under the new weight version`, async () => {
      const engines = new Engines();
      await engines.start(2);
      cleanups.push(() => engines.stop());
      const server: RolloutServer = await startRolloutServer(
        { port: 0, log_level: 'silent', workers: { run: 16 } },
        { handlers: [talkHandler] },
      );
      cleanups.push(() => server.close());
      const c = new Coordinator({
        name: `colo-${mode}`,
        seed: 11,
        servers: [{ url: server.url }],
        backends: engines.urls,
        dataset: { path: talkDataset(200) },
        n: 4,
        batch_size: 2,
        max_staleness: 4,
        steps: 3,
        max_inflight_jobs: 16,
        sampling_params: { seed: 5, max_tokens_per_turn: 256 },
      });
      cleanups.push(() => c.close());

      const batches: Batch[] = [];
      const pauses = [];
      for (let step = 0; step < 3; step++) {
        batches.push(Batch.parse(await c.nextBatch()));
        const p = await c.pause({ mode });
        pauses.push(p);
        // Answered only once nothing runs on the engines: they may go to sleep now.
        expect(await engines.running()).toBe(0);
        expect(p.servers[0]).toMatchObject({ status: 'paused', mode, held: expect.any(Number) });
        await engines.stop();
        expect(c.status().paused).toBe(mode);
        expect((await c.updateWeights()).policy_version).toBe(step + 1);
        await engines.start();
        const r = await c.resume();
        expect(r).toMatchObject({ resumed: true, policy_version: step + 1 });
      }
      const st = c.status();
      await c.close();
      await engines.stop();

      // Jobs were in flight at the pauses, and (abort) the engines cut calls that were continued later.
      expect(pauses.reduce((n, p) => n + p.servers[0]!.in_flight, 0)).toBeGreaterThan(0);
      // Calls the engines cut on request (the cancels of close() are dropped connections instead).
      const cut = engines.served.filter((e) => e.finish === 'abort' && e.abort_message === 'Abort request');
      if (mode === 'abort') {
        expect(pauses.reduce((n, p) => n + p.servers[0]!.aborted, 0)).toBe(cut.length);
        expect(cut.length).toBeGreaterThan(0);
      } else {
        expect(cut).toEqual([]);
      }
      expect(st.totals.dropped_error).toBe(0);
      expect(st.totals.dropped_stale).toBe(0);
      const metrics = await (await fetch(`${server.url}/metrics`)).text();
      expect(parseMetrics(metrics)['raas_backend_moves_total'] ?? 0).toBe(0);

      let mixed = 0;
      for (const b of batches) {
        expect(b.groups).toHaveLength(2);
        for (const g of b.groups) {
          for (const r of g.rollouts) {
            expect(r.finish_reason).not.toBe('error');
            const versions = r.weight_versions.map(Number);
            // Calls run under the submission's version or a later one, never ahead of the batch, in order.
            for (const v of versions) expect(v).toBeGreaterThanOrEqual(r.policy_version);
            for (const v of versions) expect(v).toBeLessThanOrEqual(b.policy_version);
            expect([...versions].sort((a, b2) => a - b2)).toEqual(versions);
            if (new Set(versions).size > 1) mixed++;
          }
        }
      }
      // Some rollouts straddled an update: their later calls carry the new version.
      expect(mixed).toBeGreaterThan(0);
    }, 90_000);
  }

  it('pause() refuses an unknown mode naming the field; resume() without a pause is harmless', async () => {
    const engines = new Engines();
    await engines.start(1);
    cleanups.push(() => engines.stop());
    const server = await startRolloutServer({ port: 0, log_level: 'silent' }, { handlers: [talkHandler] });
    cleanups.push(() => server.close());
    const c = new Coordinator({
      name: 'colo-bad',
      servers: [{ url: server.url }],
      backends: engines.urls,
      dataset: { path: talkDataset(20) },
      n: 2,
      batch_size: 1,
    });
    cleanups.push(() => c.close());
    const err = await c.pause({ mode: 'sleep' as never }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RaasError);
    expect(err).toMatchObject({ code: 'bad_request', message: expect.stringMatching(/^pause: mode/) });
    expect(await c.resume()).toMatchObject({ resumed: true, released: 0 });
    // Paused before anything was buffered: a batch could never come, so nextBatch says why at once.
    await c.pause({ mode: 'drain' });
    await expect(c.nextBatch()).rejects.toMatchObject({ code: 'generation_paused', message: expect.stringMatching(/resume\(\)/) });
    await c.close();
    // close() resumed the server it had paused.
    const status = await (await fetch(`${server.url}/status`)).json();
    expect(status.generation).toMatchObject({ paused: false });
  });
});
