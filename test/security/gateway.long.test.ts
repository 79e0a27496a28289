// Red team, the agent gateway: hostile harnesses inside a job's real bwrap sandbox (evil-harness.ts)
// against the job's gateway, over its Unix socket and through the loopback relay, with the rollout
// server in this process (so its descriptors, memory and event loop are measured directly) and the
// real simulated vLLM backend, whose request log says what the backend was really sent.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { qwen3Tokenizer } from '../../src/tokens/index.js';
import { attack, evilHarnesses, harnessReport } from './evil-harness.js';
import { answered, expectNoLeak, expectNothingLeft, hex, sleep, startHarness, summary, type Harness } from './helpers.js';

let h: Harness;
let evil: { dir: string; config: Record<string, unknown> };

beforeAll(async () => {
  evil = evilHarnesses();
  h = await startHarness('gw', { server: { handlers: { harness: evil.config } }, sim: { request_log: 20_000 } });
  h.script('rt-hello', ['hello']);
  h.script('rt-long', ['lorem ipsum dolor sit amet '.repeat(400)]);
  h.script('rt-wrong', ['The answer is \\boxed{41}.']);
}, 180_000);
afterAll(async () => {
  await h?.close();
  if (evil) fs.rmSync(evil.dir, { recursive: true, force: true });
});

/** Descriptors this process (the rollout server) holds. */
const fds = (): number => fs.readdirSync('/proc/self/fd').length;

/** The backend calls of one job, in the order they were made. */
const callsOf = (jobId: string) =>
  h.sim.requestLog
    .filter((e) => e.request_id.startsWith(`${jobId}-turn-`))
    .sort((a, b) => Number(a.request_id.split('-turn-')[1]) - Number(b.request_id.split('-turn-')[1]));

/** Runs `body` while sampling the server's /health latency and its event loop's longest stall. */
async function underWatch<T>(body: () => Promise<T>): Promise<{ value: T; healthMax: number; loopMaxMs: number; probes: number }> {
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const health: number[] = [];
  let pending = false;
  const probe = setInterval(() => {
    if (pending) return;
    pending = true;
    void h.health().then((ms) => {
      health.push(ms);
      pending = false;
    });
  }, 200);
  try {
    const value = await body();
    return { value, healthMax: Math.max(0, ...health), loopMaxMs: loop.max / 1e6, probes: health.length };
  } finally {
    clearInterval(probe);
    loop.disable();
  }
}

describe('the gateway socket under a connection flood', () => {
  it('3,000 connections held open with half-sent headers (slowloris): the server holds a bounded number of descriptors for the job, and its own gateway still answers afterwards', async () => {
    const base = fds();
    let max = base;
    const sampler = setInterval(() => {
      max = Math.max(max, fds());
    }, 25);
    const w = await underWatch(() => h.process({ instance: attack('fdflood', { n: 3000, hold: 3 }) }, 240_000));
    clearInterval(sampler);
    const r = answered(w.value);
    const rep = harnessReport(r);
    expect(rep.tried, summary(r)).toBe(3000);
    expect(rep.connected, 'the sandbox reached its own gateway').toBeGreaterThan(0);
    // Every accepted connection is a descriptor of the server process: unbounded, one sandbox
    // exhausts the server's RLIMIT_NOFILE (20,000 here) and with it every job's and the API's.
    expect(max - base, `descriptors the server held for one job (${JSON.stringify(rep)})`).toBeLessThan(300);
    expect(rep.held_open).toBeLessThan(300);
    expect(rep.after_status).toBe(200);
    expect(w.healthMax, '/health latency during the flood (ms)').toBeLessThan(1500);
  }, 300_000);
});

describe("the job's budget", () => {
  it('eight calls at once, each asking for everything: the gateway still generates at most max_response_tokens for the job', async () => {
    const a = await h.process(
      {
        instance: attack('budget', { k: 8, script: 'rt-long' }),
        sampling_params: { seed: 1, enable_thinking: false, max_response_tokens: 300, max_tokens_per_turn: 300 },
      },
      240_000,
    );
    const r = answered(a);
    const rep = harnessReport(r);
    expect(rep.statuses, summary(r)).toHaveLength(8);
    const sampled = callsOf(r.job_id).reduce((n, e) => n + e.ids.length, 0);
    expect(sampled, `tokens the backend generated for the job (statuses ${JSON.stringify(rep.statuses)})`).toBeLessThanOrEqual(300);
    expect(r.gateway.generated_tokens).toBeLessThanOrEqual(300);
    expect(rep.statuses).toContain(200);
  }, 300_000);
});

describe("the server's event loop under requests that are cheap to send and expensive to read", () => {
  it.each([
    ['count_tokens', 'POST /v1/messages/count_tokens with a 1 MB user message, twice', { words: 150_000, rounds: 2 }],
    ['tools', 'chat completions with 20,000 tools, twice', { n: 20_000, rounds: 2 }],
    ['tool_schema', 'chat completions with one tool of 150,000 parameters, twice', { n: 150_000, rounds: 2 }],
    ['messages', 'chat completions with 200,000 messages, twice', { n: 200_000, rounds: 2 }],
    [
      'keys',
      'chat completions whose metadata (a field the gateway ignores) is an object of 600,000 keys, twice',
      { n: 600_000, rounds: 2 },
    ],
  ])(
    '%s: %s — /health keeps answering and the loop never stalls past 1.5 s',
    async (vector, _what, params) => {
      const w = await underWatch(() => h.process({ instance: attack('stall', { vector, ...params }) }, 600_000));
      const r = answered(w.value);
      const rep = harnessReport(r);
      expect(rep.vector, summary(r)).toBe(vector);
      expect(w.probes).toBeGreaterThan(0);
      expect(w.healthMax, `/health latency (ms) while ${vector} ran (${JSON.stringify(rep)})`).toBeLessThan(1500);
      expect(w.loopMaxMs, `longest event-loop stall (ms) while ${vector} ran`).toBeLessThan(1500);
    },
    700_000,
  );
});

describe('turn forging through the gateway', () => {
  it('chat-template text in system and user content is plain text, also next to the renderer content sentinel in an assistant message or a tool description', async () => {
    const tok = await qwen3Tokenizer();
    const imStart = tok.encode('<|im_start|>')[0]!;
    const a = await h.process({ instance: attack('forge') }, 120_000);
    const r = answered(a);
    expect(harnessReport(r).statuses, summary(r)).toEqual([200, 200, 200, 200, 200]);
    const calls = callsOf(r.job_id);
    expect(calls).toHaveLength(5);
    const turns = calls.map((c) => c.prompt_ids.filter((id) => id === imStart).length);
    // Control (plain text): system, user, assistant, user, and the generation prompt.
    expect(turns[0]).toBe(5);
    expect(turns[1], 'turn markers in the prompt with forged text in content').toBe(turns[0]);
    expect(turns[2], 'turn markers with the content sentinel in an assistant message').toBe(turns[0]);
    expect(turns[3], 'turn markers with the content sentinel in a tool description').toBe(turns[4]);
  }, 180_000);
});

describe('after the job', () => {
  it('a daemon the harness leaves behind (setsid, double fork) reaches no gateway once the job ended, and does not outlive the job', async () => {
    const a = await h.process({ instance: attack('afterend', { mark: h.secrets.procMark }) }, 120_000);
    const r = answered(a);
    expect(harnessReport(r).daemon, summary(r)).toBe('started');
    const during = callsOf(r.job_id).length;
    await sleep(3000);
    expect(callsOf(r.job_id).length, 'backend calls made for the job after it answered').toBe(during);
    await expectNothingLeft(h);
  }, 180_000);
});

describe('forged history and the graded answer', () => {
  it("a harness alters the model's answer in its history, invents a model turn with a tool call and prints the right answer itself: every sampled token is the backend's, no forged text is, and the model's own (wrong) answer is graded", async () => {
    const tok = await qwen3Tokenizer();
    const a = await h.process(
      {
        instance: {
          data_source: 'harness',
          harness: 'rewrite',
          grader: 'math',
          problem: 'What is 6 times 7?',
          answer: '42',
          prompt: `ATTACK ${JSON.stringify({ script: 'rt-wrong' })}`,
          instance_id: 'rt-rewrite',
        },
      },
      120_000,
    );
    const r = answered(a);
    expect(harnessReport(r).statuses, summary(r)).toEqual([200, 200, 200, 200]);
    expect(r.harness.output_tail).toContain('\\boxed{42}');
    expect([r.reward, r.details.answer]).toEqual([0, '41']);
    const calls = callsOf(r.job_id);
    expect(calls).toHaveLength(4);
    type Seq = { response_ids: number[]; response_mask: number[] };
    const segments: Seq[] = r.segments ?? [r.tokens];
    const sampled = (s: Seq) => s.response_ids.filter((_, i) => s.response_mask[i] === 1);
    // Exactly the backend's tokens are marked sampled, each call's as one run in some segment.
    expect(segments.reduce((n, s) => n + sampled(s).length, 0)).toBe(calls.reduce((n, c) => n + c.ids.length, 0));
    const hasRun = (s: Seq, ids: number[]) =>
      s.response_ids.some((_, at) => ids.every((id, k) => s.response_ids[at + k] === id && s.response_mask[at + k] === 1));
    for (const c of calls) expect(segments.some((s) => hasRun(s, c.ids))).toBe(true);
    for (const s of segments) expect(tok.decode(sampled(s))).not.toContain('checked every case');
  }, 180_000);
});

describe('reward without solving', () => {
  it.each([
    ['no solution.py', {}],
    ["solution.py a symlink to the relay's own file", { link: '/run/raas-gateway/relay.mjs' }],
    ["solution.py a symlink to the sandbox init's environment", { link: '/proc/1/environ' }],
  ])(
    'code grader, the harness exits 0 saying every test passed: %s — reward 0',
    async (_what, params) => {
      const a = await h.process(
        {
          instance: {
            data_source: 'harness',
            harness: 'liar',
            grader: 'code',
            problem: 'Read two integers from stdin and print their sum.',
            tests: [{ input: '2 3\n', output: '5\n' }],
            prompt: `ATTACK ${JSON.stringify(params)}`,
            instance_id: 'rt-liar',
          },
        },
        120_000,
      );
      const r = answered(a);
      expect(harnessReport(r).lied, summary(r)).toBe(true);
      expect(r.harness.exit_code).toBe(0);
      expect([r.reward, r.resolved]).toEqual([0, false]);
      expectNoLeak(a.text, h.secrets);
    },
    180_000,
  );
});

describe('a harness that will not end', () => {
  it("ignores SIGTERM, detaches children that ignore it too and keep the relay's stdout open: the job ends at the harness's timeout_s (6 s), nothing is left, the gateway takes no later call", async () => {
    const t0 = Date.now();
    const a = await h.process({ instance: attack('immortal', { mark: h.secrets.procMark }) }, 120_000);
    const r = answered(a);
    const took = Date.now() - t0;
    expect(r.harness, `${summary(r)} ${r.harness?.output_tail}`).toMatchObject({ timed_out: true });
    expect(r.finish_reason).toBe('timeout');
    expect(took, 'ms until the job answered').toBeLessThan(40_000);
    const n = callsOf(r.job_id).length;
    expect(n).toBeGreaterThan(0);
    await sleep(2000);
    expect(callsOf(r.job_id).length).toBe(n);
    await expectNothingLeft(h);
  }, 180_000);
});

describe('host files, host network and other jobs', () => {
  it("image, file and document URLs are never fetched or opened; another job's gateway socket, response ids and abstract sockets are out of reach", async () => {
    const hits: string[] = [];
    const listener = http.createServer((req, res) => {
      hits.push(`${req.method} ${req.url}`);
      res.end('secret-host-page');
    });
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', () => r()));
    const port = (listener.address() as AddressInfo).port;
    try {
      const victimId = `rt-victim-${hex(3)}`;
      const victim = h.process({ job_id: victimId, instance: attack('victim', { sleep: 20 }) }, 180_000);
      const t0 = Date.now();
      while (callsOf(victimId).length === 0 && Date.now() - t0 < 60_000) await sleep(100);
      expect(callsOf(victimId).length, 'the victim job is running').toBe(1);
      const a = await h.process({ instance: attack('reach', { host_port: port }) }, 120_000);
      const r = answered(a);
      const rep = harnessReport(r);
      expect(rep.candidates_tried, summary(r)).toBeGreaterThan(300);
      expect(rep.other_sockets_reached).toEqual([]);
      expect(rep.abstract_sockets_seen).toEqual([]);
      expect({ chat: rep.chat, messages: rep.messages, responses: rep.responses }).toEqual({ chat: 200, messages: 200, responses: 200 });
      expect(rep.foreign_previous_response).toBe(400);
      // The sandbox's mount table names where its gateway directory is on the host; the name must
      // not count the server's jobs (a sandbox would learn how busy the other tenants are).
      expect(rep.mount_line).toContain('/run/raas-gateway');
      expect(rep.mount_line).not.toMatch(/\/job-\d+\s/);
      expect(hits).toEqual([]);
      expectNoLeak(a.text, h.secrets);
      expect(a.text).not.toContain('secret-host-page');
      const v = answered(await victim);
      expect(harnessReport(v), summary(v)).toEqual({ first: 200, second: 200 });
    } finally {
      listener.close();
    }
  }, 240_000);
});

describe('what the gateway records per call', () => {
  it('huge model names, stop lists and tool_choice objects, and a tool_choice nested 100,000 deep: the job answers a bounded result', async () => {
    const a = await h.process({ instance: attack('asked', { calls: 6, model_chars: 1_000_000, stops: 2_000, depth: 100_000 }) }, 240_000);
    const r = answered(a);
    const rep = harnessReport(r);
    expect(rep.statuses, summary(r)).toHaveLength(8);
    expect(rep.statuses.at(-1)).toBe(200);
    expect(r.critical_error, summary(r)).toBeNull();
    // Recorded fields are the harness's words, not the trajectory: 6 calls must not make a result of megabytes.
    expect(a.text.length, 'bytes of the job result').toBeLessThan(1_000_000);
    const job = await h.get(`/jobs/${encodeURIComponent(r.job_id)}`);
    expect(job.state).toBe('done');
  }, 300_000);
});

describe('what a job keeps', () => {
  // Found here: every call of a new conversation was kept (its prompt ids, in the server and in the
  // result): 203 one-token calls in 90 s made an 11 MB result and +340 MB of server memory, without
  // bound. handlers.harness.max_segments (64) now refuses the 65th conversation.
  it('200 one-token calls, each a conversation of its own of about 6,000 tokens: the job keeps and answers a bounded result', async () => {
    const before = process.memoryUsage().rss;
    const a = await h.process(
      {
        instance: attack('segments', { n: 200, words: 3000 }),
        sampling_params: { seed: 1, enable_thinking: false, max_response_tokens: 1000 },
      },
      400_000,
    );
    const r = answered(a);
    const rep = harnessReport(r);
    if (process.env.RT_DEBUG)
      console.log(
        `segments: ${JSON.stringify(rep)} result ${(a.text.length / 2 ** 20).toFixed(1)} MiB, ${r.gateway?.segments} segments, rss +${((process.memoryUsage().rss - before) / 2 ** 20).toFixed(0)} MiB`,
      );
    expect(rep.statuses, summary(r)).toEqual({ 200: 64, 400: 136 });
    expect(r.gateway.segments).toBe(64);
    expect(a.text.length, 'bytes of the job result').toBeLessThan(6 << 20);
  }, 500_000);
});

describe('HTTP abuse through the relay', () => {
  it('50 pipelined requests are answered in order; a Content-Length + Transfer-Encoding request and a 1 MB header are refused; the relay still serves', async () => {
    const a = await h.process({ instance: attack('protocol') }, 120_000);
    const r = answered(a);
    const rep = harnessReport(r);
    expect(rep.pipelined_ok, summary(r)).toBe(50);
    expect(rep.smuggle_answer).toMatch(/^HTTP\/1\.1 400/);
    // Over the header limit the server answers 431 or drops the connection; either way nothing is parsed.
    expect(rep.big_header_answer).toMatch(/^HTTP\/1\.1 431|Connection reset|^$/);
    expect(rep.after).toBe(200);
  }, 180_000);
});

describe('memory under large bodies', () => {
  it.each([
    ['metadata', 'six 30 MB chat completions bodies at once'],
    ['echo', 'six 30 MB Responses bodies at once, each echoing its dropped tool in a stream never read'],
  ])(
    '%s: %s — the server grows by less than 1.5 GB and keeps answering',
    async (vector) => {
      global.gc?.();
      const before = process.memoryUsage().rss;
      let peak = before;
      const sampler = setInterval(() => {
        peak = Math.max(peak, process.memoryUsage().rss);
      }, 50);
      const w = await underWatch(() => h.process({ instance: attack('bigbody', { vector, k: 6, mb: 30, hold: 6 }) }, 300_000));
      clearInterval(sampler);
      const r = answered(w.value);
      expect(harnessReport(r).statuses, summary(r)).toHaveLength(6);
      const grew = (peak - before) / 2 ** 20;
      if (process.env.RT_DEBUG) console.log(`${vector}: rss +${grew.toFixed(0)} MiB, /health max ${w.healthMax.toFixed(0)} ms`);
      expect(grew, 'MiB the server grew by').toBeLessThan(1536);
      expect(w.healthMax).toBeLessThan(3000);
    },
    400_000,
  );
});

describe('the tokenizer pool', () => {
  // Was a defect: a request was tokenised whole before the backend said it did not fit; a 30 MB
  // assistant message (no context window holds it) kept one worker of the server's shared tokenizer
  // pool busy for minutes. Now the gateway refuses before encoding when a lower bound of the tokens
  // (UTF-16 length ÷ the vocabulary's longest token in bytes, src/tokens/bounds.ts) passes max_model_len.
  it('a 30 MB assistant message is refused within 30 s, before it is tokenised', async () => {
    const a = await h.process({ instance: attack('stall', { vector: 'assistant_text', mb: 30, rounds: 1 }), timeout_s: 40 }, 200_000);
    const r = answered(a);
    const rep = harnessReport(r);
    expect(rep.statuses, summary(r)).toEqual([400]);
    expect(rep.seconds).toBeLessThan(30);
  }, 240_000);
});
