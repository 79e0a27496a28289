import { afterAll, describe, expect, it } from 'vitest';
import got from 'got';
import { Coordinator, runEval } from '../../src/dapo/index.js';
import { Batch } from '../../src/protocol/batch.js';
import { RolloutClient } from '../../src/client/client.js';
import { chatDataset, countingChat, crash, serverWithSim } from './helpers.js';

const dataset = chatDataset(120);
const cleanups: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

describe('Coordinator on real rollout servers and simulated backends', () => {
  it('embedded: three steps with weight updates, batches in the one schema, nothing left running after close', async () => {
    const c = new Coordinator({
      name: 'emb',
      seed: 3,
      embedded: { backends: 2, sim: { latency: { decode_ms_per_token: 1 }, logprobs_mode: 'processed_logprobs' } },
      dataset: { path: dataset },
      n: 4,
      batch_size: 3,
      steps: 3,
    });
    const batches = [];
    for await (const b of c.batches()) {
      batches.push(Batch.parse(b));
      await c.updateWeights({});
    }
    expect(batches.map((b) => b.step)).toEqual([0, 1, 2]);
    expect(batches.map((b) => b.policy_version)).toEqual([0, 1, 2]);
    for (const b of batches) {
      // The embedded simulators' logprobs mode is recorded for the trainer to check.
      expect(b.logprobs_mode).toBe('processed_logprobs');
      expect(b.groups).toHaveLength(3);
      for (const g of b.groups) {
        expect(new Set(g.rollouts.map((r) => r.reward)).size).toBe(2);
        for (const r of g.rollouts) {
          expect(r.staleness).toBe(b.policy_version - r.policy_version);
          expect(r.staleness).toBeLessThanOrEqual(1);
          // every turn ran on a backend registered under the submission's version or a later one
          for (const wv of r.weight_versions) expect(Number(wv)).toBeGreaterThanOrEqual(r.policy_version);
          expect(r.tokens.response_ids.length).toBe(r.tokens.logprobs.length);
        }
      }
    }
    const st = c.status();
    expect(st.policy_version).toBe(3);
    const urls = st.servers.map((s) => s.url);
    await c.close();
    await c.close(); // safe twice
    for (const u of urls) await expect(got(`${u}/health`, { retry: { limit: 0 }, timeout: { request: 1000 } })).rejects.toThrow();
  });

  it('without carry-over, early termination cancels exactly the groups running at handover', async () => {
    const env = await serverWithSim({ decodeMs: 3 });
    cleanups.push(env.close);
    const c = new Coordinator({
      name: 'term',
      seed: 5,
      servers: [{ url: env.server.url }],
      dataset: { path: dataset },
      n: 4,
      batch_size: 2,
      carry_over: false,
      steps: 1,
    });
    cleanups.push(() => c.close());
    const b = await c.nextBatch();
    const client = new RolloutClient({ url: env.server.url });
    cleanups.push(async () => client.close());
    const submitted = b.stats.submitted;
    // every job submitted before the handover ends: done, or cancelled (confirmed) when its group was running
    const states = new Map<string, string>();
    for (let tries = 0; tries < 50; tries++) {
      states.clear();
      for (let g = 0; g < submitted; g++) {
        for (let k = 0; k < 4; k++) {
          const j = await client.job(`term-g${g}-r${k}`);
          states.set(`term-g${g}-r${k}`, j?.state ?? 'unknown');
        }
      }
      if ([...states.values()].every((s) => s === 'done' || s === 'cancelled')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const cancelled = [...states].filter(([, s]) => s === 'cancelled').map(([id]) => id);
    expect(cancelled.length).toBe(b.stats.jobs_cancelled);
    expect(b.stats.running_at_handover).toBe(0);
    for (const g of b.groups) for (const r of g.rollouts) expect(states.get(r.job_id)).toBe('done');
    // cancels hit whole groups' unfinished jobs only
    expect([...states.values()].every((s) => s === 'done' || s === 'cancelled')).toBe(true);
    await c.close();
  });

  it('resume after a coordinator restart re-attaches by job id and loses no completed rollout', async () => {
    const counting = countingChat();
    const env = await serverWithSim({ decodeMs: 4, handler: counting.handler });
    cleanups.push(env.close);
    const cfg = { name: 'res', seed: 9, servers: [{ url: env.server.url }], dataset: { path: dataset }, n: 4, batch_size: 2, steps: 4 };
    const a = new Coordinator(cfg);
    const first = await a.nextBatch();
    const state = JSON.parse(JSON.stringify(a.checkpoint()));
    const inFlight: string[] = state.groups.flatMap((g: { in_flight: string[] }) => g.in_flight);
    expect(inFlight.length).toBeGreaterThan(0);
    await a.close({ cancel: false }); // the trainer "crashes": its jobs keep running on the server
    const b = Coordinator.resume(cfg, state);
    cleanups.push(() => b.close());
    const next = await b.nextBatch();
    const third = await b.nextBatch();
    expect(next.step).toBe(1);
    expect(third.step).toBe(2);
    const seen = new Set([...first.groups, ...next.groups, ...third.groups].map((g) => g.group_id));
    expect(seen.size).toBe(6);
    await b.close();
    // no job ran twice: every in-flight job was re-attached, not restarted
    for (const [id, n] of counting.runs) expect({ id, n }).toEqual({ id, n: 1 });
    for (const id of inFlight) expect(counting.runs.get(id)).toBe(1);
  });

  it('resume after the in-flight jobs finished takes their stored results without running them again', async () => {
    const counting = countingChat();
    const env = await serverWithSim({ decodeMs: 4, handler: counting.handler });
    cleanups.push(env.close);
    const cfg = {
      name: 'res-done',
      seed: 9,
      servers: [{ url: env.server.url }],
      dataset: { path: dataset },
      n: 4,
      batch_size: 2,
      steps: 3,
    };
    const a = new Coordinator(cfg);
    await a.nextBatch();
    const state = JSON.parse(JSON.stringify(a.checkpoint()));
    const inFlight: string[] = state.groups.flatMap((g: { in_flight: string[] }) => g.in_flight);
    expect(inFlight.length).toBeGreaterThan(0);
    await a.close({ cancel: false });
    // Let the server finish every one of them before the coordinator comes back.
    const direct = new RolloutClient({ url: env.server.url });
    let finished: string[] = [];
    for (let i = 0; i < 400; i++) {
      const jobs = await Promise.all(inFlight.map((id) => direct.job(id)));
      finished = inFlight.filter((_, k) => jobs[k]?.result);
      // Ids the server never saw (admitted, not yet sent at the checkpoint) run at the resume.
      if (jobs.every((j) => !j || j.result)) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    direct.close();
    const b = Coordinator.resume(cfg, state);
    cleanups.push(() => b.close());
    const next = await b.nextBatch();
    expect(next.step).toBe(1);
    expect(finished.length).toBeGreaterThan(0);
    // The finished ones are answered from the server's store (attach: true): they arrive, none ran twice.
    const waiting = () =>
      b
        .checkpoint()
        .groups.flatMap((g) => g.in_flight)
        .filter((id) => finished.includes(id));
    for (let i = 0; i < 200 && waiting().length > 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(waiting()).toEqual([]);
    for (const id of inFlight) expect(counting.runs.get(id)).toBe(1);
    await b.close();
  });

  it('fails over when a rollout server is killed mid-step', async () => {
    const envA = await serverWithSim({ decodeMs: 3 });
    const envB = await serverWithSim({ decodeMs: 3 });
    cleanups.push(envA.close, envB.close);
    const a = { url: envA.server.url, kill: async () => crash(envA.server) };
    const bSrv = { url: envB.server.url };
    const c = new Coordinator({
      name: 'fo',
      seed: 2,
      servers: [{ url: a.url }, { url: bSrv.url }],
      dataset: { path: dataset },
      n: 4,
      batch_size: 3,
      steps: 3,
      health_interval_ms: 200,
    });
    cleanups.push(() => c.close());
    const b0 = await c.nextBatch();
    expect(c.status().servers.every((s) => s.healthy)).toBe(true);
    await a.kill();
    const b1 = await c.nextBatch({ timeout_s: 20 });
    const b2 = await c.nextBatch({ timeout_s: 20 });
    expect([b0, b1, b2].map((b) => b.groups.length)).toEqual([3, 3, 3]);
    const st = c.status();
    expect(st.servers.find((s) => s.url === a.url)?.healthy).toBe(false);
    await c.close();
  });

  it('runEval: one pass, n rollouts per prompt, pass@1 and pass@n per data source', async () => {
    const r = await runEval({ name: 'ev', seed: 2, embedded: { backends: 1 }, dataset: { path: dataset, limit: 12 }, n: 4 });
    expect(r.overall.prompts).toBe(12);
    expect(r.overall.rollouts).toBe(48);
    expect(r.overall.errors).toBe(0);
    // pass rates cycle 0, 1, .5, .3, .7, .5: two prompts can never pass, two always do
    expect(r.overall.pass_at_n).toBeLessThanOrEqual(10 / 12);
    expect(r.overall.pass_at_n).toBeGreaterThanOrEqual(2 / 12);
    expect(r.overall.pass_at_1).toBeGreaterThan(0.2);
    expect(r.overall.pass_at_1).toBeLessThan(0.8);
    expect(r.overall.pass_at_n).toBeGreaterThanOrEqual(r.overall.pass_at_1);
    expect(r.data_sources.chat).toEqual(r.overall);
  });
});
