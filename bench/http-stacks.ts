/**
 * `npm run bench:http`: the HTTP client stacks raas could use for its LLM calls, side by side in one
 * run against one local server answering a vLLM-sized completion (a 2 KB JSON body with 256 token
 * ids): raas's own `postJson` (node:http with a keep-alive agent), got (what the trainer-side
 * client uses) and fetch (undici, bundled with Node). Prints the client CPU per request (user +
 * system of this process, the server runs in a child), the p50 / p99 latency at concurrency 1 and
 * the throughput at concurrency 64, and the ratios against postJson.
 * Flags: --n N requests per stack and phase (default 4000), --json.
 */
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import got from 'got';
import { postJson } from '../src/server/llm/http.js';

const argN = process.argv.indexOf('--n');
const N = argN >= 0 ? Number(process.argv[argN + 1]) : 4000;

const SERVER = `
const http = require('node:http');
const ids = Array.from({ length: 256 }, (_, i) => 1000 + i);
const body = JSON.stringify({ id: 'cmpl-1', object: 'text_completion', model: 'm', choices: [{ index: 0, text: '', token_ids: ids, finish_reason: 'length', logprobs: null }], usage: { prompt_tokens: 512, completion_tokens: 256 } });
http.createServer((req, res) => { req.resume(); req.on('end', () => { res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) }); res.end(body); }); })
  .listen(0, '127.0.0.1', function () { process.send(this.address().port); });
`;

type Call = (url: string, body: unknown) => Promise<unknown>;
const gotClient = got.extend({
  retry: { limit: 0 },
  throwHttpErrors: false,
  agent: { http: new (await import('node:http')).Agent({ keepAlive: true, maxSockets: Infinity }) },
});
const STACKS: Array<[string, Call]> = [
  ['postJson (node:http, raas)', (url, body) => postJson(url, body, undefined, 10_000)],
  ['got', (url, body) => gotClient.post(url, { json: body }).json()],
  [
    'fetch (undici)',
    async (url, body) =>
      (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })).json(),
  ],
];

const q = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1)))] ?? NaN;
};

async function measure(call: Call, url: string): Promise<{ cpu_us: number; p50_ms: number; p99_ms: number; rps64: number }> {
  const body = { model: 'm', prompt: Array.from({ length: 512 }, (_, i) => i), max_tokens: 256, temperature: 1, stop_token_ids: [151645] };
  for (let i = 0; i < 200; i++) await call(url, body);
  const lat: number[] = [];
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    await call(url, body);
    lat.push(performance.now() - t);
  }
  const cpu = process.cpuUsage(cpu0);
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (next++ < N) await call(url, body);
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  return { cpu_us: (cpu.user + cpu.system) / N, p50_ms: q(lat, 0.5), p99_ms: q(lat, 0.99), rps64: N / wall };
}

const child = spawn(process.execPath, ['-e', SERVER], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
const port = await new Promise<number>((r) => child.once('message', (m) => r(Number(m))));
const url = `http://127.0.0.1:${port}/v1/completions`;
const load0 = loadavg()[0]!;
process.stderr.write(`bench:http: ${N} requests per stack and phase, load avg ${load0.toFixed(2)}\n`);
const rows: Array<{ name: string; cpu_us: number; p50_ms: number; p99_ms: number; rps64: number }> = [];
// Two rounds, the order swapped in the second, medians of the two.
const results = new Map<string, Array<Awaited<ReturnType<typeof measure>>>>();
for (const order of [STACKS, [...STACKS].reverse()])
  for (const [name, call] of order) results.set(name, [...(results.get(name) ?? []), await measure(call, url)]);
for (const [name] of STACKS) {
  const rs = results.get(name)!;
  const m = (k: 'cpu_us' | 'p50_ms' | 'p99_ms' | 'rps64'): number => rs.reduce((a, r) => a + r[k], 0) / rs.length;
  rows.push({ name, cpu_us: m('cpu_us'), p50_ms: m('p50_ms'), p99_ms: m('p99_ms'), rps64: m('rps64') });
}
const base = rows[0]!;
for (const r of rows) {
  process.stdout.write(
    `${r.name.padEnd(28)} client CPU ${r.cpu_us.toFixed(0).padStart(4)} µs/request (${(r.cpu_us / base.cpu_us).toFixed(2)}x)  p50 ${r.p50_ms.toFixed(3)} ms  p99 ${r.p99_ms.toFixed(3)} ms  ${r.rps64.toFixed(0).padStart(6)} req/s at concurrency 64 (${(r.rps64 / base.rps64).toFixed(2)}x)\n`,
  );
}
process.stdout.write(`load avg ${load0.toFixed(2)} -> ${loadavg()[0]!.toFixed(2)}\n`);
if (process.argv.includes('--json')) process.stdout.write(`${JSON.stringify({ n: N, load_avg_1m: load0, rows })}\n`);
child.kill();
process.exit(0);
