/**
 * Rollout server overhead: jobs/s and p50/p99 latency of POST /process with a no-op handler at 64
 * and 256 concurrent clients, next to the same client against a bare fastify route that echoes the
 * body, in one run. Servers run in a child process so the client does not share their event loop.
 *
 *   npm run bench:server            (BENCH_REQUESTS=4000 BENCH_ROUNDS=3 to change the sample)
 */
import { fork } from 'node:child_process';
import http from 'node:http';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { z } from 'zod';
import fs from 'node:fs';
import type { AgentHandler } from '../src/server/handlers/types.js';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 3000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = [64, 256];
/** Bare fastify's CPU per request ÷ raas's CPU per no-op job, at each concurrency. */
const CAPACITY_TARGET = 0.7;
/** Open-loop p99 raas adds over bare fastify at 256 in flight, ms. */
const ADDED_P99_TARGET_MS = 5;

/** A handler that does nothing in each stage: what is left is the server's own cost. */
const noop: AgentHandler<Record<string, unknown>> = {
  name: 'noop',
  instance: z.looseObject({}),
  init: async () => ({}),
  run: async () => ({
    messages: [],
    tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
    finish_reason: 'finish',
    artifacts: {},
  }),
  eval: async () => ({ reward: 1, resolved: true }),
};

/**
 * The server under test is the compiled one (dist/, what `raas serve` runs) when it is built: from
 * source, tsx's transform adds work of its own to every function the pipeline creates per job.
 * RAAS_BENCH_SRC=1 measures the source instead. Build first: `npx tsc -p tsconfig.json`.
 */
const DIST = new URL('../dist/src/server/index.js', import.meta.url);
const useDist = process.env.RAAS_BENCH_SRC !== '1' && fs.existsSync(DIST);

async function serveChild(): Promise<void> {
  const { HandlerRegistry, builtinHandlers, startRolloutServer } = (await import(
    useDist ? DIST.href : '../src/server/index.js'
  )) as typeof import('../src/server/index.js');
  const registry = new HandlerRegistry(builtinHandlers());
  registry.register(noop);
  // Workers sized like a busy server; the backend is never called by the no-op handler.
  const raas = await startRolloutServer(
    { port: 0, log_level: 'warn', workers: { init: 256, run: 256, eval: 256 }, llm: { backends: [{ address: 'http://127.0.0.1:9' }] } },
    { registry },
  );
  const bare = Fastify({ logger: false, keepAliveTimeout: 65_000 });
  bare.post('/process', async (req) => req.body);
  await bare.listen({ port: 0, host: '127.0.0.1', backlog: 4096 });
  const barePort = (bare.server.address() as { port: number }).port;
  process.send!({ raas: raas.port, bare: barePort });
  process.on('message', async (m) => {
    // CPU time of the server process, so the parent can charge each phase's CPU to its target.
    if (m === 'cpu') return process.send!({ cpu: process.cpuUsage() });
    await raas.close();
    await bare.close();
    process.exit(0);
  });
}

interface Sample {
  jobsPerS: number;
  p50: number;
  p99: number;
  /** Server-process CPU microseconds per request (robust to other load on the machine). */
  cpuUs?: number;
}

/** One measurement: `total` requests from `concurrency` keep-alive clients. */
async function measure(port: number, concurrency: number, total: number, bodyOf: (i: number) => string): Promise<Sample> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const lat: number[] = [];
  let next = 0;
  const one = (i: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const body = bodyOf(i);
      const t0 = performance.now();
      const req = http.request(
        {
          host: '127.0.0.1',
          port,
          path: '/process',
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          res.on('data', () => undefined);
          res.on('end', () => {
            if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
            lat.push(performance.now() - t0);
            resolve();
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const start = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) await one(next++);
    }),
  );
  const wall = (performance.now() - start) / 1000;
  agent.destroy();
  lat.sort((a, b) => a - b);
  return { jobsPerS: total / wall, p50: lat[Math.floor(lat.length * 0.5)], p99: lat[Math.floor(lat.length * 0.99)] };
}

/**
 * Open loop: requests start at a fixed rate (at most `maxInFlight` at once) whatever the answers do.
 * Below saturation this shows the latency the server itself adds; a closed loop at saturation only
 * shows concurrency / throughput.
 */
async function measureOpenLoop(
  port: number,
  rate: number,
  total: number,
  maxInFlight: number,
  bodyOf: (i: number) => string,
): Promise<Sample> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: maxInFlight });
  const lat: number[] = [];
  const start = performance.now();
  const pending: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    const body = bodyOf(i);
    const t0 = performance.now();
    pending.push(
      new Promise<void>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            path: '/process',
            method: 'POST',
            agent,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            res.on('data', () => undefined);
            res.on('end', () => {
              lat.push(performance.now() - t0);
              resolve();
            });
          },
        );
        req.on('error', reject);
        req.end(body);
      }),
    );
  }
  await Promise.all(pending);
  const wall = (performance.now() - start) / 1000;
  agent.destroy();
  lat.sort((a, b) => a - b);
  return { jobsPerS: total / wall, p50: lat[Math.floor(lat.length * 0.5)], p99: lat[Math.floor(lat.length * 0.99)] };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  // BENCH_PROFILE=<dir> writes a CPU profile of the server process there.
  const execArgv = process.env.BENCH_PROFILE
    ? [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`]
    : process.execArgv;
  const child = fork(fileURLToPath(import.meta.url), [], {
    env: { ...process.env, RAAS_BENCH_ROLE: 'servers' },
    stdio: 'inherit',
    execArgv,
  });
  const ports = await new Promise<{ raas: number; bare: number }>((resolve) =>
    child.once('message', (m) => resolve(m as { raas: number; bare: number })),
  );
  const cpu = (): Promise<number> =>
    new Promise((resolve) => {
      child.once('message', (m) => {
        const c = (m as { cpu: NodeJS.CpuUsage }).cpu;
        resolve(c.user + c.system);
      });
      child.send('cpu');
    });
  /** A closed-loop measurement that also charges the server's CPU time per request. */
  const measureCpu = async (port: number, c: number, total: number, bodyOf: (i: number) => string): Promise<Sample> => {
    const c0 = await cpu();
    const s = await measure(port, c, total, bodyOf);
    return { ...s, cpuUs: ((await cpu()) - c0) / total };
  };
  let run = 0;
  const body = (i: number) =>
    JSON.stringify({
      instance: { data_source: 'noop', instance_id: `i${i}` },
      sampling_params: { temperature: 1, max_tokens_per_turn: 64 },
      job_id: `b${run}-${i}`,
    });
  const rows: string[] = [];
  const openRows: string[] = [];
  const cpuRows: string[] = [];
  for (const c of CONCURRENCY) {
    run++;
    await measure(ports.bare, c, 500, body); // warm-up both
    run++;
    await measure(ports.raas, c, 500, body);
    const bare: Sample[] = [];
    const raas: Sample[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Alternate, so load from other processes hits both sides alike.
      run++;
      bare.push(await measureCpu(ports.bare, c, REQUESTS, body));
      run++;
      raas.push(await measureCpu(ports.raas, c, REQUESTS, body));
    }
    const b = {
      jobsPerS: median(bare.map((s) => s.jobsPerS)),
      p50: median(bare.map((s) => s.p50)),
      p99: median(bare.map((s) => s.p99)),
      cpuUs: median(bare.map((s) => s.cpuUs!)),
    };
    const x = {
      jobsPerS: median(raas.map((s) => s.jobsPerS)),
      p50: median(raas.map((s) => s.p50)),
      p99: median(raas.map((s) => s.p99)),
      cpuUs: median(raas.map((s) => s.cpuUs!)),
    };
    const capacity = b.cpuUs / x.cpuUs;
    // Spread over the rounds: each round's bare CPU over the same round's raas CPU.
    const perRound = bare.map((s, i) => s.cpuUs! / raas[i]!.cpuUs!).sort((p, q) => p - q);
    cpuRows.push(
      `| ${c} | ${b.cpuUs.toFixed(0)} | ${x.cpuUs.toFixed(0)} | ${capacity.toFixed(2)} (${perRound[0]!.toFixed(2)}–${perRound.at(-1)!.toFixed(2)}) ${capacity >= CAPACITY_TARGET ? 'met' : 'MISSED'} |`,
    );
    rows.push(
      `| ${c} | ${b.jobsPerS.toFixed(0)} | ${b.p50.toFixed(1)} / ${b.p99.toFixed(1)} | ${x.jobsPerS.toFixed(0)} | ${x.p50.toFixed(1)} / ${x.p99.toFixed(1)} | ${(x.jobsPerS / b.jobsPerS).toFixed(2)} | ${(x.p99 - b.p99).toFixed(1)} |`,
    );
    // Same offered rate for both, half of what raas sustained closed-loop: the added latency proper.
    const rate = Math.max(50, Math.round(x.jobsPerS / 2));
    const ob: Sample[] = [];
    const ox: Sample[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      run++;
      ob.push(await measureOpenLoop(ports.bare, rate, Math.min(REQUESTS, rate * 4), c, body));
      run++;
      ox.push(await measureOpenLoop(ports.raas, rate, Math.min(REQUESTS, rate * 4), c, body));
    }
    const obm = { p50: median(ob.map((s) => s.p50)), p99: median(ob.map((s) => s.p99)) };
    const oxm = { p50: median(ox.map((s) => s.p50)), p99: median(ox.map((s) => s.p99)) };
    openRows.push(
      `| ${c} | ${rate} | ${obm.p50.toFixed(1)} / ${obm.p99.toFixed(1)} | ${oxm.p50.toFixed(1)} / ${oxm.p99.toFixed(1)} | ${(oxm.p50 - obm.p50).toFixed(1)} | ${(oxm.p99 - obm.p99).toFixed(1)}${c === 256 ? (oxm.p99 - obm.p99 <= ADDED_P99_TARGET_MS ? ' met' : ' MISSED') : ''} |`,
    );
  }
  child.send('stop');
  await new Promise((r) => child.once('exit', r));
  process.stdout.write(
    [
      `POST /process, no-op handler vs bare fastify echo; ${REQUESTS} requests x ${ROUNDS} rounds per cell, medians; node ${process.version}; server from ${useDist ? `dist/ (built ${fs.statSync(DIST).mtime.toISOString()})` : 'src/ (tsx)'}; load average ${loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')} at the end`,
      '',
      '| clients | bare jobs/s | bare p50 / p99 ms | raas jobs/s | raas p50 / p99 ms | jobs/s ratio | added p99 ms (closed loop) |',
      '|---|---|---|---|---|---|---|',
      ...rows,
      '',
      'Server-process CPU per request (closed loop; what one core can serve, insensitive to other load):',
      '',
      `| clients | bare CPU us/req | raas CPU us/req | capacity ratio bare/raas, median (min–max of rounds) (target >= ${CAPACITY_TARGET}) |`,
      '|---|---|---|---|',
      ...cpuRows,
      '',
      'Open loop at a fixed offered rate (half of raas closed-loop jobs/s), same rate for both:',
      '',
      `| max in flight | rate /s | bare p50 / p99 ms | raas p50 / p99 ms | added p50 ms | added p99 ms (target <= ${ADDED_P99_TARGET_MS} at 256) |`,
      '|---|---|---|---|---|---|',
      ...openRows,
      '',
    ].join('\n'),
  );
}

if (process.env.RAAS_BENCH_ROLE === 'servers') await serveChild();
else await main();
