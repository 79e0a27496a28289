import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RolloutClient, RolloutFleet } from '../../src/client/index.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { startProxy, type Proxy as TcpProxy } from './proxy.js';
import { until } from './until.js';

/** Filler answers of exactly 40 tokens at `ms` per token: a chat turn takes about 40·ms. */
const slowSim = (ms: number): Promise<SimHandle> =>
  startSim({ latency: { decode_ms_per_token: ms }, filler: { median_tokens: 40, sigma: 0, min_tokens: 40, max_tokens: 40 } });

const group = (g: string, n: number, turns: number) =>
  Array.from({ length: n }, (_, k) => ({
    instance: { data_source: 'chat', instance_id: g, turns, pass_rate: 1 },
    sampling_params: { seed: 1 },
    job_id: `${g}-r${k}`,
    group_id: g,
  }));

/** Starts `raas serve` as a real process and resolves with it and the URL it prints. */
async function serveProcess(llm: string): Promise<{ proc: ChildProcess; url: string }> {
  const proc = spawn(process.execPath, [path.resolve('dist/src/cli.js'), 'serve', '--port', '0', '--llm', llm, '--log-level', 'silent'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    proc.stdout!.on('data', (d: Buffer) => {
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    proc.stderr!.on('data', (d: Buffer) => (err += d));
    proc.on('exit', (code) => reject(new Error(`raas serve exited with ${code}: ${err}`)));
  });
  return { proc, url };
}

// Real processes and servers: generous per-test timeouts, since a loaded 2-core CI box can take
// seconds just to start `raas serve` (the tests themselves wait on events, not on fixed delays).
const SLOW = 120_000;

describe('RolloutFleet over real rollout servers and simulated backends', () => {
  const closers: Array<() => Promise<unknown>> = [];
  let simFast: SimHandle;
  let simSlow: SimHandle;
  let b: RolloutServer;

  beforeAll(async () => {
    simFast = await slowSim(4); // ~160 ms per turn
    simSlow = await slowSim(250); // ~10 s per turn: copies here never finish within a test
    b = await startRolloutServer({ port: 0, llm: { backends: [{ address: simFast.url }] } });
    closers.push(
      () => simFast.close(),
      () => simSlow.close(),
      () => b.close(),
    );
  });
  afterAll(async () => {
    for (const c of closers.reverse()) await c();
  }, SLOW);

  it(
    'fails over a group when its rollout server process is killed mid-group (SIGKILL)',
    async () => {
      const a = await serveProcess(simFast.url);
      closers.push(async () => a.proc.exitCode ?? a.proc.kill('SIGKILL'));
      const fleet = new RolloutFleet({
        servers: [{ url: a.url }, { url: b.url }],
        health_interval_ms: 200,
        client: { backoff: { base_ms: 20, max_ms: 50 } },
      });
      closers.push(() => fleet.close());
      const ps = fleet.submitGroup(group('kill', 4, 3), { server: a.url });
      const probe = new RolloutClient({ url: a.url, retries: 0 });
      await until(() => fleet.servers()[0].in_flight === 4, 'the group on A');
      for (;;) {
        const s = await probe.status();
        if (s.jobs >= 4) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      probe.close();
      a.proc.kill('SIGKILL');
      const results = await Promise.all(ps);
      expect(results.map((r) => r.job_id)).toEqual(['kill-r0', 'kill-r1', 'kill-r2', 'kill-r3']);
      expect(results.every((r) => r.critical_error === null && r.num_turns === 3)).toBe(true);
      // 4 moves; more only if the loaded machine made B miss health checks too (its jobs then re-attach on B).
      expect(fleet.stats().failed_over).toBeGreaterThanOrEqual(4);
      expect(fleet.servers().map(({ url, healthy, in_flight }) => ({ url, healthy, in_flight }))).toEqual([
        { url: a.url, healthy: false, in_flight: 0 },
        { url: b.url, healthy: true, in_flight: 0 },
      ]);
      // B ran the moved jobs under the same ids.
      const onB = new RolloutClient({ url: b.url });
      expect((await onB.job('kill-r0'))?.state).toBe('done');
      onB.close();
    },
    SLOW,
  );

  it(
    'moves jobs a server cancelled unasked (it was shut down) to another server',
    async () => {
      const c = await startRolloutServer({ port: 0, llm: { backends: [{ address: simFast.url }] } });
      closers.push(() => c.close());
      const fleet = new RolloutFleet({ servers: [{ url: c.url }, { url: b.url }], health_interval_ms: 60_000 });
      closers.push(() => fleet.close());
      const ps = fleet.submitGroup(group('shut', 3, 3), { server: c.url });
      await until(() => c.pipeline.status().jobs >= 3, 'the group on C');
      await c.close(); // graceful: cancels every job and answers the waiters with critical_error "cancelled"
      const results = await Promise.all(ps);
      expect(results.map((r) => r.critical_error)).toEqual([null, null, null]);
      expect(fleet.stats().failed_over).toBe(3);
    },
    SLOW,
  );

  it(
    'recovers through GET /jobs/:id what a partitioned server finished, and ignores the duplicates',
    async () => {
      const d = await startRolloutServer({ port: 0, llm: { backends: [{ address: simFast.url }] } });
      const e = await startRolloutServer({ port: 0, llm: { backends: [{ address: simSlow.url }] } });
      const proxy: TcpProxy = await startProxy(d.url);
      closers.push(
        () => d.close(),
        () => e.close(),
        () => proxy.close(),
      );
      const fleet = new RolloutFleet({
        servers: [{ url: proxy.url }, { url: e.url }],
        health_interval_ms: 50,
        client: { backoff: { base_ms: 10, max_ms: 20 } },
      });
      closers.push(() => fleet.close());
      const ps = fleet.submitGroup(group('part', 3, 2), { server: proxy.url });
      await until(() => d.pipeline.status().jobs >= 3, 'the group on D');
      proxy.cut(); // D keeps running; the fleet sees resets and refusals
      await until(() => fleet.servers()[1].in_flight === 3, 'failover to E', 10_000);
      const direct = new RolloutClient({ url: d.url });
      for (;;) {
        const states = await Promise.all(['part-r0', 'part-r1', 'part-r2'].map((id) => direct.job(id).then((j) => j?.state)));
        if (states.every((s) => s === 'done')) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      direct.close();
      proxy.heal();
      const results = await Promise.all(ps);
      expect(results.map((r) => r.backend)).toEqual([simFast.url, simFast.url, simFast.url]);
      expect(fleet.stats().recovered).toBe(3);
      // E's copies are cancelled; their cancelled answers arrive and are ignored.
      await until(() => fleet.stats().duplicates === 3, 'duplicates ignored', 10_000);
      expect(e.pipeline.status().jobs).toBe(0);
    },
    SLOW,
  );
});
