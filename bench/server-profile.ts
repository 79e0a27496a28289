// Profile driver: child runs raas (or bare) only; parent drives closed loop c clients, N requests.
import { fork } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { z } from 'zod';
const TARGET = process.env.TARGET ?? 'raas';
const N = Number(process.env.N ?? 20000); const C = Number(process.env.C ?? 64);
const noop: any = { name: 'noop', instance: z.looseObject({}), init: async () => ({}), run: async () => ({ messages: [], tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] }, finish_reason: 'finish', artifacts: {} }), eval: async () => ({ reward: 1, resolved: true }) };
if (process.env.ROLE === 'server') {
  let port: number; let close: () => Promise<void>;
  if (TARGET === 'raas') {
    const { HandlerRegistry, builtinHandlers, startRolloutServer } = await import(process.env.DIST ? `${process.env.DIST}/src/server/index.js` : '../src/server/index.js');
    const registry = new HandlerRegistry(builtinHandlers()); registry.register(noop);
    const raas = await startRolloutServer({ port: 0, log_level: 'warn', workers: { init: 256, run: 256, eval: 256 }, llm: { backends: [{ address: 'http://127.0.0.1:9' }] } } as any, { registry });
    port = raas.port; close = () => raas.close();
  } else {
    const bare = Fastify({ logger: false, keepAliveTimeout: 65_000 }); bare.post('/process', async (req) => req.body);
    await bare.listen({ port: 0, host: '127.0.0.1', backlog: 4096 }); port = (bare.server.address() as any).port; close = () => bare.close();
  }
  process.send!({ port });
  const { Session } = await import('node:inspector/promises'); const session = new Session(); session.connect();
  process.on('message', async (m) => { if (m === 'prof-start') { await session.post('Profiler.enable'); await session.post('Profiler.setSamplingInterval', { interval: 100 }); await session.post('Profiler.start'); return process.send!({ ok: 1 }); }
    if (m === 'prof-stop') { const { profile } = await session.post('Profiler.stop'); (await import('node:fs')).writeFileSync(process.env.PROF_OUT!, JSON.stringify(profile)); return process.send!({ ok: 1 }); }
    if (m === 'cpu') return process.send!({ cpu: process.cpuUsage() }); await close(); process.exit(0); });
} else {
  const execArgv = process.execArgv;
  const child = fork(fileURLToPath(import.meta.url), [], { execArgv,  env: { ...process.env, ROLE: 'server' }, stdio: 'inherit' });
  const { port } = await new Promise<any>((r) => child.once('message', r));
  let sys = 0;
  const cpu = (): Promise<number> => new Promise((r) => { child.once('message', (m: any) => { sys = m.cpu.system; r(m.cpu.user + m.cpu.system); }); child.send('cpu'); });
  const agent = new http.Agent({ keepAlive: true, maxSockets: C });
  let next = 0; let seq = 0;
  const one = (i: number) => new Promise<void>((resolve, reject) => {
    const body = JSON.stringify({ instance: { data_source: 'noop', instance_id: `i${i}` }, sampling_params: { temperature: 1, max_tokens_per_turn: 64 }, job_id: `b-${seq++}` });
    const req = http.request({ host: '127.0.0.1', port, path: '/process', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => { res.on('data', () => {}); res.on('end', () => res.statusCode === 200 ? resolve() : reject(new Error('status ' + res.statusCode))); });
    req.on('error', reject); req.end(body);
  });
  const run = async (total: number) => { next = 0; await Promise.all(Array.from({ length: C }, async () => { while (next < total) await one(next++); })); };
  await run(2000);
  const ask = (m: string) => new Promise((r) => { child.once('message', r); child.send(m); });
  if (process.env.PROF_OUT) await ask('prof-start');
  const rounds: number[] = [];
  for (let r = 0; r < Number(process.env.R ?? 3); r++) { const c0 = await cpu(); const s0 = sys; const t0 = performance.now(); await run(N); const w = performance.now() - t0; rounds.push(((await cpu()) - c0) / N); console.log(`${TARGET} c=${C}: ${(N / w * 1000).toFixed(0)} jobs/s, cpu ${rounds.at(-1)!.toFixed(1)} us/req (sys ${((sys - s0) / N).toFixed(1)})`); }
  if (process.env.PROF_OUT) await ask('prof-stop');
  agent.destroy(); child.send('stop'); await new Promise((r) => child.once('exit', r));
}
