import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { untilRunning } from '../sim/helpers.js';
import { talkHandler } from './fixtures/talk-handler.js';
import { ManualClock } from './helpers.js';

// A slow simulator: every turn is 250-350 tokens at 1 ms per token, so a pause lands mid-turn.
const SLOW = {
  seed: 4,
  request_log: 500,
  latency: { decode_ms_per_token: 1 },
  filler: { median_tokens: 300, sigma: 0.1, min_tokens: 250, max_tokens: 350 },
};

const post = async (url: string, body: unknown = {}): Promise<{ status: number; body: any }> => {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
};
const status = async (srv: RolloutServer): Promise<any> => (await fetch(`${srv.url}/status`)).json();

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

type Part = { weight_version: string; tokens: number; finish_reason: string };
const partsOf = (result: any): Part[][] => (result.details.turns as Array<{ parts: Part[] }>).map((t) => t.parts);

describe('POST /pause and /resume (real rollout server, real simulator with decode latency)', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  beforeAll(async () => {
    sim = await startSim(SLOW);
    srv = await startRolloutServer(
      { port: 0, log_level: 'silent', llm: { backends: [{ address: sim.url, weight_version: '0' }] } },
      { handlers: [talkHandler] },
    );
  });
  afterEach(async () => {
    await post(`${srv.url}/resume`);
    await post(`${srv.url}/add_llm_server`, { address: sim.url, weight_version: '0' });
  });
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
  });

  const submit = (id: string, turns = 2): Promise<{ status: number; body: any }> =>
    post(`${srv.url}/process`, { job_id: id, instance: { data_source: 'talk', turns }, sampling_params: { seed: 3 } });

  it('drain: the calls in flight finish, the jobs wait before their next turn, and go on after /resume', async () => {
    const jobs = [submit('drain-a'), submit('drain-b')];
    await untilRunning(sim.url, 2);
    const paused = await post(`${srv.url}/pause`, { mode: 'drain' });
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ status: 'paused', mode: 'drain', in_flight: 2, aborted: 0, disconnected: 0 });
    // Answered only once nothing runs on the backend; both finished turns ended normally.
    const log = sim.requestLog;
    expect(log.slice(-2).map((e) => e.finish)).toEqual(['stop', 'stop']);
    await until('both jobs held', async () => (await status(srv)).generation.held === 2);
    expect((await status(srv)).generation).toEqual({ paused: true, mode: 'drain', in_flight: 0, held: 2 });
    expect(sim.requestLog.length).toBe(log.length);

    expect((await post(`${srv.url}/resume`)).body).toEqual({ status: 'running', released: 2 });
    for (const r of await Promise.all(jobs)) {
      expect(r.body).toMatchObject({ critical_error: null, num_turns: 2, weight_versions: ['0', '0'] });
      expect(partsOf(r.body).map((p) => p.map((x) => x.finish_reason))).toEqual([['stop'], ['stop']]);
    }
  });

  it('abort: the backend cuts the calls, the turn continues after the update with the new weights', async () => {
    const jobs = [submit('abort-a'), submit('abort-b')];
    await untilRunning(sim.url, 2);
    const before = sim.requestLog.length;
    const paused = await post(`${srv.url}/pause`, { mode: 'abort' });
    expect(paused.body).toMatchObject({ status: 'paused', mode: 'abort', in_flight: 2, aborted: 2, disconnected: 0 });
    const cut = sim.requestLog.slice(before);
    expect(cut.map((e) => e.finish)).toEqual(['abort', 'abort']);
    for (const e of cut) expect(e.ids.length).toBeGreaterThan(0);

    // The trainer's weight update, as the coordinator registers it: same address, new version.
    await post(`${srv.url}/add_llm_server`, { address: sim.url, weight_version: '1' });
    await post(`${srv.url}/resume`);
    const results = await Promise.all(jobs);
    for (const r of results) {
      expect(r.body).toMatchObject({ critical_error: null, num_turns: 2 });
      const [turn0, turn1] = partsOf(r.body);
      // The first turn keeps its ids from weights 0 and is finished by weights 1; the next turn is all 1.
      expect(turn0!.map((p) => [p.finish_reason, p.weight_version])).toEqual([
        ['abort', '0'],
        ['stop', '1'],
      ]);
      expect(turn1!.map((p) => p.weight_version)).toEqual(['1']);
      // One entry per model call: the cut call, its continuation, the next turn.
      expect(r.body.weight_versions).toEqual(['0', '1', '1']);
    }
    // Each continuation re-sent the prompt plus the ids the aborted call had produced.
    for (const c of cut) {
      const sent = [...c.prompt_ids, ...c.ids].join();
      const next = sim.requestLog.find((e) => e.prompt_ids.join() === sent);
      expect(next?.max_tokens).toBe(c.max_tokens - c.ids.length);
    }
  });

  it('answers at once with nothing in flight, and refuses an unknown mode naming the field', async () => {
    expect((await post(`${srv.url}/pause`)).body).toMatchObject({ status: 'paused', mode: 'drain', in_flight: 0, held: 0 });
    const bad = await post(`${srv.url}/pause`, { mode: 'sleep' });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'bad_request' });
    expect(bad.body.error.message).toMatch(/mode/);
  });
});

describe('POST /pause against a backend without an abort route', () => {
  // A vLLM stand-in that never answers its first completion and has no /abort_requests (404).
  let calls = 0;
  const held: http.ServerResponse[] = [];
  let backend: http.Server;
  let srv: RolloutServer;
  beforeAll(async () => {
    backend = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        if (req.url === '/v1/models') return res.end(JSON.stringify({ data: [{ id: 'm', max_model_len: 4096 }] }));
        if (req.url !== '/v1/completions') return res.writeHead(404).end(JSON.stringify({ detail: 'Not Found' }));
        if (calls++ === 0) return void held.push(res);
        const ids = [9707, 151645];
        res.end(
          JSON.stringify({
            choices: [
              {
                index: 0,
                token_ids: ids,
                logprobs: { token_logprobs: [-0.5, -0.1], tokens: ids.map((i) => `token_id:${i}`) },
                finish_reason: 'stop',
              },
            ],
          }),
        );
      });
    });
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
    srv = await startRolloutServer({ port: 0, log_level: 'silent', llm: { backends: [{ address: url }] } }, { handlers: [talkHandler] });
  });
  afterAll(async () => {
    await srv?.close();
    for (const r of held) r.destroy();
    await new Promise((r) => backend.close(r));
  });

  it('abort drops the connection at once; after /resume the turn is generated again', async () => {
    const job = post(`${srv.url}/process`, { job_id: 'no-abort-route', instance: { data_source: 'talk', turns: 1 } });
    await until('the first call', async () => held.length === 1);
    // abort_grace_s is not waited for: the backend refused the abort.
    const paused = await post(`${srv.url}/pause`, { mode: 'abort', abort_grace_s: 600 });
    expect(paused.body).toMatchObject({ in_flight: 1, aborted: 0, disconnected: 1 });
    await until('the job held', async () => (await status(srv)).generation.held === 1);
    await post(`${srv.url}/resume`);
    const r = (await job).body;
    expect(r).toMatchObject({ critical_error: null, num_turns: 1 });
    expect(r.tokens.response_ids).toEqual([9707, 151645]);
    expect(partsOf(r)[0]!.map((p) => [p.finish_reason, p.tokens])).toEqual([
      ['abort', 0],
      ['stop', 2],
    ]);
  });
});

describe('a paused server and the job timeout', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  const clock = new ManualClock();
  beforeAll(async () => {
    sim = await startSim({ seed: 2 });
    srv = await startRolloutServer(
      { port: 0, log_level: 'silent', llm: { backends: [{ address: sim.url }] } },
      { handlers: [talkHandler], clock },
    );
  });
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
  });

  it('time spent held by a pause does not count against timeout_s', async () => {
    await post(`${srv.url}/pause`, { mode: 'drain' });
    const job = post(`${srv.url}/process`, { job_id: 'held-long', timeout_s: 1, instance: { data_source: 'talk', turns: 1 } });
    await until('the job held', async () => (await status(srv)).generation.held === 1);
    await clock.advance(5000, 500);
    await post(`${srv.url}/resume`);
    expect((await job).body).toMatchObject({ critical_error: null, finish_reason: 'max_iterations', num_turns: 1 });
  });
});
