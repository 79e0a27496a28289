import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AutosizeConfig } from '../../src/protocol/config-workers.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { Autosizer, decide, type StageSignal } from '../../src/server/pipeline/autosize.js';
import { spawn } from 'node:child_process';
import { hostSampler, type HostLoad } from '../../src/server/pipeline/host-load.js';
import { StageLimiter } from '../../src/server/pipeline/limiter.js';
import { ServiceTimes } from '../../src/server/pipeline/service-times.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { systemClock } from '../../src/util/clock.js';
import { ManualClock, flush, get, post, stagedHandler } from './helpers.js';

const signal = (s: Partial<StageSignal>): StageSignal => ({
  size: 16,
  min: 1,
  max: 256,
  start: 16,
  queued: 0,
  peakBusy: 16,
  arrivalsPerS: 0,
  serviceS: 1,
  gradient: 1,
  maxStep: 0.5,
  shrinkStep: 0.5,
  recentHigh: 0,
  cpuOver: false,
  memory: 'ok',
  ...s,
});

describe('autosize: one decision', () => {
  it('a queue grows the stage by what waits (or to what the load needs), at most one step (half its size), within its bounds', () => {
    expect(decide(signal({ queued: 3 }))).toMatchObject({ size: 19, reason: 'queue' });
    expect(decide(signal({ queued: 100 })).size).toBe(24);
    expect(decide(signal({ size: 1, queued: 100 })).size).toBe(2); // a step is at least one slot
    expect(decide(signal({ queued: 100, max: 20 }))).toMatchObject({ size: 20, reason: 'queue' });
    expect(decide(signal({ size: 20, queued: 100, max: 20 })).reason).toBe('queue (at a bound)');
    // Little's law: 12 jobs/s × 1.5 s × 1.25 = 23 slots, more than the 2 waiting.
    expect(decide(signal({ queued: 2, arrivalsPerS: 12, serviceS: 1.5 })).size).toBe(23);
  });

  it('the CPU and memory budgets stop growth; memory over budget by 10 % shrinks by a step; contention shrinks only with the CPU budget used', () => {
    expect(decide(signal({ queued: 50, cpuOver: true }))).toMatchObject({ size: 16, reason: 'queue, but the CPU budget is used' });
    expect(decide(signal({ queued: 50, memory: 'full' }))).toMatchObject({ size: 16, reason: 'queue, but the memory budget is used' });
    expect(decide(signal({ queued: 50, memory: 'over' }))).toMatchObject({ size: 8, reason: 'memory over budget' });
    expect(decide(signal({ queued: 50, cpuOver: true, gradient: 0.75 })).size).toBe(12);
    // Slower jobs at high concurrency without a CPU limit (a longer task mix, a slower backend): not a reason to shrink.
    expect(decide(signal({ queued: 50, gradient: 0.5 })).size).toBe(24);
  });

  it('idle slots are given back down to the need, 1.5x the busiest moment, and never below where the stage started', () => {
    expect(decide(signal({ size: 40, peakBusy: 4 }))).toMatchObject({ size: 20, reason: 'idle slots' });
    expect(decide(signal({ size: 20, peakBusy: 4 })).size).toBe(16);
    expect(decide(signal({ size: 16, peakBusy: 0 }))).toMatchObject({ size: 16, reason: 'steady' });
    expect(decide(signal({ size: 64, peakBusy: 10, arrivalsPerS: 20, serviceS: 2 })).size).toBe(50);
    expect(decide(signal({ size: 4, start: 2, peakBusy: 0, min: 2 })).size).toBe(2);
  });

  it('growth and shrinking have their own rates; a wish to shrink waits out the stabilization window, the budgets do not', () => {
    expect(decide(signal({ size: 16, queued: 100, maxStep: 1 })).size).toBe(32);
    expect(decide(signal({ size: 64, peakBusy: 0, shrinkStep: 0.25 })).size).toBe(48);
    // It wanted 64 within the window: it keeps 64, and says why; what it wants now is recorded.
    expect(decide(signal({ size: 64, peakBusy: 0, recentHigh: 64 }))).toEqual({
      size: 64,
      wanted: 16,
      reason: 'idle slots, kept for the stabilization window',
    });
    expect(decide(signal({ size: 64, peakBusy: 0, recentHigh: 40 })).size).toBe(40);
    expect(decide(signal({ size: 64, memory: 'over', recentHigh: 64 })).size).toBe(32);
  });
});

describe('autosize: service times per kind and concurrency', () => {
  it('jobs that slow down with concurrency give a gradient below 1; slower kinds of task alone do not', () => {
    const t = new ServiceTimes();
    // Contention: the same kind takes 100 ms alone and 400 ms at 16 at once.
    for (let i = 0; i < 10; i++) t.add('swe', 1, 100);
    for (let i = 0; i < 10; i++) t.add('swe', 16, 400);
    expect(t.gradient(1.5, 16)).toBeCloseTo(0.5, 5);
    t.roll();
    // A mix: math takes 5 ms and swe 100 ms, at low and high concurrency alike.
    const mix = new ServiceTimes();
    for (let i = 0; i < 20; i++) {
      mix.add('math', 1, 5);
      mix.add('swe', 1, 100);
      mix.add('math', 16, 5.5);
      mix.add('swe', 16, 110);
    }
    expect(mix.gradient(1.5, 16)).toBe(1);
    // Without a trusted low-concurrency baseline nothing is concluded.
    const fresh = new ServiceTimes();
    for (let i = 0; i < 10; i++) fresh.add('chat', 16, 900);
    expect(fresh.gradient(1.5, 16)).toBe(1);
  });
});

describe('the host sampler', () => {
  it("counts the CPU of this server's child processes as its own, and reads the host's memory", async () => {
    const sample = hostSampler();
    sample();
    const t0 = performance.now();
    // A child that burns 0.4 s of CPU (the way a sandbox's test run does), however long the machine takes to give it.
    const child = spawn('python3', ['-c', 'import time\nt=time.process_time()\nwhile time.process_time()-t<0.4: pass'], {
      stdio: 'ignore',
    });
    await new Promise((r) => child.on('exit', r));
    const h = sample();
    const cpuSeconds = (h.ownCores * (performance.now() - t0)) / 1000;
    expect(cpuSeconds).toBeGreaterThan(0.3);
    expect(h.busyCores).toBeGreaterThanOrEqual(h.ownCores * 0.5);
    expect(h.eventLoop).toBeGreaterThanOrEqual(0);
    expect(h.eventLoop).toBeLessThanOrEqual(1);
    expect(h.usedMb).toBeGreaterThan(0);
    expect(h.usedMb).toBeLessThan(h.totalMb);
  });
});

describe('Autosizer over real limiters', () => {
  const host =
    (h: Partial<HostLoad> = {}) =>
    (): HostLoad => ({ busyCores: 0.5, ownCores: 0.3, eventLoop: 0.2, cores: 2, usedMb: 1000, totalMb: 8000, ...h });
  const cfg = AutosizeConfig.parse({ interval_s: 1 });

  it('grows an auto stage with a queue at a bounded rate every interval, leaves a fixed stage alone, holds over the CPU budget', async () => {
    const clock = new ManualClock();
    const pools = {
      init: new StageLimiter('init', 4, clock),
      run: new StageLimiter('run', 64, clock),
      eval: new StageLimiter('eval', 16, clock),
    };
    let load = host();
    const a = new Autosizer(pools, { init: 4, run: 64, eval: { min: 1, max: 100 } }, cfg, clock, () => load());
    const held: Array<() => void> = [];
    for (let i = 0; i < 110; i++) void pools.eval.acquire(new AbortController().signal).then((r) => held.push(r));
    for (let i = 0; i < 10; i++) void pools.init.acquire(new AbortController().signal).then((r) => held.push(r));
    await flush();
    expect([pools.eval.size, pools.eval.depth]).toEqual([16, 94]);
    await clock.advance(1000, 100);
    expect([pools.eval.size, pools.eval.busy]).toEqual([32, 32]);
    load = host({ busyCores: 2, ownCores: 1.9, cores: 2 });
    await clock.advance(1000, 100);
    expect(pools.eval.size).toBe(32);
    // A saturated event loop is the budget too, whatever the cores.
    load = host({ eventLoop: 0.95 });
    await clock.advance(1000, 100);
    expect([pools.eval.size, a.state('eval')?.reason]).toEqual([32, 'queue, but the CPU budget is used']);
    load = host();
    await clock.advance(1000, 100);
    expect(pools.eval.size).toBe(64);
    await clock.advance(1000, 100);
    expect(pools.eval.size).toBe(100);
    await clock.advance(1000, 100);
    expect(a.state('eval')).toEqual({ mode: 'auto', min: 1, max: 100, reason: 'queue (at a bound)' });
    expect([pools.init.size, a.state('init')]).toEqual([4, undefined]);
    a.close();
    for (const r of held) r();
  });

  it('shrinking never takes a slot from a running job: the jobs finish, and no new one starts until busy is below the size', async () => {
    const clock = new ManualClock();
    const pools = {
      init: new StageLimiter('init', 16, clock),
      run: new StageLimiter('run', 16, clock),
      eval: new StageLimiter('eval', 16, clock),
    };
    const a = new Autosizer(pools, { init: 16, run: 'auto', eval: 16 }, cfg, clock, host({ usedMb: 7900 }));
    const rels: Array<() => void> = [];
    for (let i = 0; i < 20; i++) void pools.run.acquire(new AbortController().signal).then((r) => rels.push(r));
    await flush();
    expect([pools.run.busy, pools.run.depth]).toEqual([16, 4]);
    // Memory over budget (85 % of 8000 MB = 6800; 7900 > 1.1 x that): a quarter down per interval.
    await clock.advance(1000, 100);
    expect([pools.run.size, pools.run.busy]).toEqual([12, 16]);
    for (const r of rels.splice(0, 3)) r();
    await flush();
    // 13 still run, more than the 12 slots: nobody starts.
    expect([pools.run.busy, pools.run.depth]).toEqual([13, 4]);
    for (const r of rels.splice(0, 2)) r();
    await flush();
    // 11 run: one waiter gets the freed slot.
    expect([pools.run.busy, pools.run.depth]).toEqual([12, 3]);
    a.close();
    for (const r of rels) r();
    await flush();
  });
});

describe('workers: auto on a rollout server', () => {
  let srv: RolloutServer;
  let sim: SimHandle;
  beforeAll(async () => {
    sim = await startSim({});
    srv = await startRolloutServer(
      {
        port: 0,
        log_level: 'silent',
        workers: { init: 64, run: 64, eval: { min: 2, max: 48 } },
        autosize: { interval_s: 0.1 },
        llm: { backends: [{ address: sim.url }] },
      },
      { handlers: [stagedHandler(systemClock)] },
    );
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
  });

  it('an EVAL queue grows the EVAL pool; /status and /metrics show the sizes in force and why; POST /workers fixes a stage', async () => {
    const jobs = [...Array(60)].map((_, i) =>
      post(`${srv.url}/process`, { instance: { data_source: 'staged', eval_ms: 400 }, job_id: `auto-${i}` }),
    );
    let biggest = 0;
    let seen: Record<string, unknown> | undefined;
    let ended = false;
    const all = Promise.all(jobs).finally(() => (ended = true));
    while (!ended) {
      const st = (await get(`${srv.url}/status`)).body;
      if (st.workers.eval.size > biggest) [biggest, seen] = [st.workers.eval.size, st.workers.eval];
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const r of await all) expect(r.body).toMatchObject({ critical_error: null });
    expect(biggest).toBeGreaterThan(16);
    expect(biggest).toBeLessThanOrEqual(48);
    expect(seen).toMatchObject({ mode: 'auto', min: 2, max: 48, reason: expect.stringMatching(/queue/) });
    expect((await get(`${srv.url}/status`)).body.workers.init).toEqual({ size: 64, busy: 0 });
    expect((await get(`${srv.url}/metrics`)).text).toMatch(/raas_workers_size\{stage="eval"\} \d+/);
    const fixed = await post(`${srv.url}/workers`, { eval: 5, init: 'auto' });
    expect(fixed.body.workers.eval).toEqual({ size: 5, busy: 0 });
    expect(fixed.body.workers.init).toMatchObject({ mode: 'auto', min: 1, max: 256 });
    const bad = await post(`${srv.url}/workers`, { eval: 0 });
    expect([bad.status, bad.body.error.code]).toEqual([400, 'bad_request']);
  });
});
