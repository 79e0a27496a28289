/**
 * Profiles one server alone (raas with the no-op handler of bench/server.ts, or the bare fastify
 * echo): a child process serves, this process drives C keep-alive clients in a closed loop and
 * prints the server's CPU per request (user + system, and system alone) for each of R rounds of N
 * requests. With PROF_OUT it writes an inspector CPU profile of the server process, started after
 * a 2,000-request warm-up (so module loading stays out of it).
 *
 *   DIST=$PWD/dist TARGET=raas N=20000 R=2 PROF_OUT=/tmp/raas.cpuprofile npx tsx bench/server-profile.ts
 *
 * TARGET: raas (default) or bare. DIST: a compiled tree (its src/server/index.js) instead of the
 * source under tsx; it needs a package.json with "type": "module" beside it (dist/ has the repo's).
 */
import { fork } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { z } from 'zod';
import type { AgentHandler } from '../src/server/handlers/types.js';

const TARGET = process.env.TARGET ?? 'raas';
const N = Number(process.env.N ?? 20000);
const C = Number(process.env.C ?? 64);
const ROUNDS = Number(process.env.R ?? 3);

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

async function serve(): Promise<void> {
  let port: number;
  let close: () => Promise<void>;
  if (TARGET === 'raas') {
    const mod = (await import(
      process.env.DIST ? `${process.env.DIST}/src/server/index.js` : '../src/server/index.js'
    )) as typeof import('../src/server/index.js');
    const registry = new mod.HandlerRegistry(mod.builtinHandlers());
    registry.register(noop);
    const raas = await mod.startRolloutServer(
      { port: 0, log_level: 'warn', workers: { init: 256, run: 256, eval: 256 }, llm: { backends: [{ address: 'http://127.0.0.1:9' }] } },
      { registry },
    );
    port = raas.port;
    close = () => raas.close();
  } else {
    const bare = Fastify({ logger: false, keepAliveTimeout: 65_000 });
    bare.post('/process', async (req) => req.body);
    await bare.listen({ port: 0, host: '127.0.0.1', backlog: 4096 });
    port = (bare.server.address() as { port: number }).port;
    close = () => bare.close();
  }
  const { Session } = await import('node:inspector/promises');
  const session = new Session();
  session.connect();
  process.on('message', async (m) => {
    if (m === 'prof-start') {
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 100 });
      await session.post('Profiler.start');
      return process.send!({ ok: 1 });
    }
    if (m === 'prof-stop') {
      const { profile } = await session.post('Profiler.stop');
      fs.writeFileSync(process.env.PROF_OUT!, JSON.stringify(profile));
      return process.send!({ ok: 1 });
    }
    if (m === 'cpu') return process.send!({ cpu: process.cpuUsage() });
    await close();
    process.exit(0);
  });
  process.send!({ port });
}

async function drive(): Promise<void> {
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: process.execArgv,
    env: { ...process.env, ROLE: 'server' },
    stdio: 'inherit',
  });
  const { port } = await new Promise<{ port: number }>((r) => child.once('message', (m) => r(m as { port: number })));
  const ask = <T>(m: string): Promise<T> =>
    new Promise((r) => {
      child.once('message', (x) => r(x as T));
      child.send(m);
    });
  const agent = new http.Agent({ keepAlive: true, maxSockets: C });
  let seq = 0;
  const one = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const i = seq++;
      const body = JSON.stringify({
        instance: { data_source: 'noop', instance_id: `i${i}` },
        sampling_params: { temperature: 1, max_tokens_per_turn: 64 },
        job_id: `b-${i}`,
      });
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
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const run = async (total: number): Promise<void> => {
    let started = 0;
    await Promise.all(
      Array.from({ length: C }, async () => {
        while (started++ < total) await one();
      }),
    );
  };
  await run(2000);
  if (process.env.PROF_OUT) await ask('prof-start');
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = (await ask<{ cpu: NodeJS.CpuUsage }>('cpu')).cpu;
    const t0 = performance.now();
    await run(N);
    const wall = performance.now() - t0;
    const c1 = (await ask<{ cpu: NodeJS.CpuUsage }>('cpu')).cpu;
    const cpu = (c1.user + c1.system - c0.user - c0.system) / N;
    console.log(
      `${TARGET} c=${C}: ${((N / wall) * 1000).toFixed(0)} jobs/s, cpu ${cpu.toFixed(1)} us/req (sys ${((c1.system - c0.system) / N).toFixed(1)})`,
    );
  }
  if (process.env.PROF_OUT) await ask('prof-stop');
  agent.destroy();
  child.send('stop');
  await new Promise((r) => child.once('exit', r));
}

if (process.env.ROLE === 'server') await serve();
else await drive();
