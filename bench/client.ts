/**
 * Client-side cost of submitting jobs, measured side by side in one run: raw got (keep-alive, no
 * validation) as the baseline, got without keep-alive, RolloutClient.process (request and Result
 * parsed with the protocol schemas, retry layer), and RolloutFleet.submitGroup over two servers
 * (groups of 8). The servers are separate processes answering at once, so what is measured is the
 * trainer side's own CPU per job and the job rate it sustains at 256 concurrent requests.
 *
 *   npx tsx bench/client.ts [--jobs 4000] [--rounds 5] [--tokens 64]   (tokens per token array of a result)
 *
 * Writes bench/results/client-<tokens>.json. Variants run interleaved, round by round; medians are reported.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import got from 'got';
import { RolloutClient, RolloutFleet } from '../src/client/index.js';
import { Result } from '../src/protocol/process.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const JOBS = arg('jobs', 4000);
const ROUNDS = arg('rounds', 5);
const TOKENS = arg('tokens', 64);
const CONCURRENCY = 256;

async function startEcho(): Promise<{ url: string; proc: ChildProcess }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'client/echo-server.ts')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    proc.stdout!.on('data', (d: Buffer) => {
      const m = /listening (\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    });
    proc.on('exit', (c) => reject(new Error(`echo server exited ${c}`)));
  });
  return { url: `http://127.0.0.1:${port}`, proc };
}

const req = (i: number) => ({
  instance: { data_source: 'chat', instance_id: `p${i >> 3}` },
  sampling_params: { seed: 1 },
  job_id: `b-${i}`,
});

/** Runs `one(i)` for i < JOBS with CONCURRENCY in flight; returns jobs/s and client CPU µs per job. */
async function drive(one: (i: number) => Promise<unknown>): Promise<{ jobs_per_s: number; cpu_us_per_job: number }> {
  let next = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < JOBS) await one(next++);
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { jobs_per_s: JOBS / wall, cpu_us_per_job: (cpu.user + cpu.system) / JOBS };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  const servers = [await startEcho(), await startEcho()];
  const [a] = servers;
  const keepAlive = new http.Agent({ keepAlive: true, maxSockets: 1024 });
  const noKeepAlive = new http.Agent({ keepAlive: false, maxSockets: 1024 });
  const client = new RolloutClient({ url: a.url });
  const fleet = new RolloutFleet({ servers: servers.map((s) => ({ url: s.url })), health_interval_ms: 60_000 });
  let round = 0;
  const rawGot = (agent: http.Agent) => (i: number) =>
    got.post(`${a.url}/process`, { json: req(i + round * JOBS), agent: { http: agent }, retry: { limit: 0 } }).json();
  const variants: Record<string, (i: number) => Promise<unknown>> = {
    'got keep-alive (baseline)': rawGot(keepAlive),
    'got without keep-alive': rawGot(noKeepAlive),
    'got + protocol Result.parse (naive typed client)': async (i) =>
      Result.parse(
        await got.post(`${a.url}/process`, { json: req(i + round * JOBS), agent: { http: keepAlive }, retry: { limit: 0 } }).json(),
      ),
    'RolloutClient.process': (i) => client.process(req(i + round * JOBS)),
    // Groups of 8: submit when i is a group's first index; the others wait on their own promise.
    'RolloutFleet.submitGroup (2 servers, n=8)': (() => {
      const pending = new Map<number, Promise<unknown>>();
      return (i: number) => {
        if (!pending.has(i)) {
          const g = i - (i % 8);
          const ps = fleet.submitGroup(Array.from({ length: 8 }, (_, k) => req(g + k + round * JOBS)));
          ps.forEach((p, k) => pending.set(g + k, p));
        }
        const p = pending.get(i)!;
        pending.delete(i);
        return p;
      };
    })(),
  };
  const samples: Record<string, Array<{ jobs_per_s: number; cpu_us_per_job: number }>> = {};
  await drive(variants['got keep-alive (baseline)']); // warm-up: JIT, sockets
  for (round = 1; round <= ROUNDS; round++) {
    for (const [name, fn] of Object.entries(variants)) (samples[name] ??= []).push(await drive(fn));
  }
  const base = samples['got keep-alive (baseline)'];
  const baseRate = median(base.map((s) => s.jobs_per_s));
  const baseCpu = median(base.map((s) => s.cpu_us_per_job));
  const rows = Object.entries(samples).map(([name, s]) => {
    const rate = median(s.map((x) => x.jobs_per_s));
    const cpu = median(s.map((x) => x.cpu_us_per_job));
    return {
      variant: name,
      jobs_per_s: Math.round(rate),
      cpu_us_per_job: Math.round(cpu),
      rate_ratio: +(rate / baseRate).toFixed(2),
      cpu_ratio: +(cpu / baseCpu).toFixed(2),
    };
  });
  console.table(rows);
  const out = {
    bench: 'client',
    tokens_per_array: TOKENS,
    jobs_per_round: JOBS,
    rounds: ROUNDS,
    concurrency: CONCURRENCY,
    date: new Date().toISOString(),
    rows,
  };
  await mkdir(path.join(here, 'results'), { recursive: true });
  await writeFile(path.join(here, `results/client-${TOKENS}.json`), `${JSON.stringify(out, null, 2)}\n`);
  client.close();
  await fleet.close();
  keepAlive.destroy();
  noKeepAlive.destroy();
  for (const s of servers) s.proc.kill('SIGTERM');
}

await main();
