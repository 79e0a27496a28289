import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendPool, HandlerRegistry, Pipeline, ServerConfig, startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { defaultClientFactory } from '../../src/server/llm/pool.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { systemClock } from '../../src/util/clock.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { ChatInstance } from '../../src/server/handlers/chat.js';
import { get, post } from './helpers.js';

// ProRL Agent Server's /process semantics, as its clients rely on them, against a real rollout
// server on port 0 and the simulated vLLM backend. Sources, cited per expectation:
//   ss  = NVIDIA-NeMo/ProRL-Agent-Server scripts/start_server.py@40c1d8a
//   asp = NVIDIA-NeMo/ProRL-Agent-Server openhands/nvidia/async_server_process.py@40c1d8a
//   nu  = NVIDIA-NeMo/ProRL-Agent-Server openhands/nvidia/utils.py@40c1d8a
//   tmr = NVIDIA-NeMo/ProRL-Agent-Server openhands/nvidia/timer.py@40c1d8a
//   gym = NVIDIA-NeMo/Gym responses_api_agents/prorl_agent/app.py@b785ff0 (refs/pull/1290/head)

/** A handler whose trajectory ends with a tool message after the last assistant message (a finish tool's answer). */
const trailing: AgentHandler<Record<string, unknown>> = {
  name: 'trailing',
  instance: ChatInstance,
  async init() {
    return {};
  },
  async run() {
    return {
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: 'done', tool_calls: [{ name: 'finish', arguments: {} }], token_ids: [7, 8], logprobs: [-0.1, -0.2] },
        { role: 'tool', content: 'finished', tool_call_id: 'call_0' },
      ],
      tokens: {
        prompt_ids: [1],
        response_ids: [7, 8],
        response_mask: [1, 1],
        logprobs: [-0.1, -0.2],
        spans: [{ message_index: 1, start: 0, end: 2 }],
      },
      finish_reason: 'finish',
      artifacts: {},
    };
  },
  async eval() {
    return { reward: 1, resolved: true };
  },
};

describe('ProRL semantics by default', () => {
  let sim: SimHandle;
  let srv: RolloutServer;
  const chat = (instance: Record<string, unknown>, sampling: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
    post(`${srv.url}/process`, {
      instance: { data_source: 'chat', ...instance },
      sampling_params: { temperature: 1, max_tokens_per_turn: 24, ...sampling },
      ...extra,
    });
  const text = (r: { body: { messages: Array<{ role: string; content: string }> } }) =>
    r.body.messages
      .filter((m) => m.role === 'assistant')
      .map((m) => m.content)
      .join('|');

  beforeAll(async () => {
    sim = await startSim({ seed: 5, filler: { median_tokens: 16, sigma: 0.3, max_tokens: 24 } });
    srv = await startRolloutServer(
      { port: 0, log_level: 'silent', llm: { backends: [{ address: `${sim.url}/v1` }] } },
      { handlers: [trailing] },
    );
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
    await sim?.close();
  });

  it('three samples of one instance under one job id are three rollouts, sampled anew without a seed', async () => {
    // gym app.py:326,346: job_id = instance_id for every repeat, sent concurrently; ss:608 takes the
    // id as given and ss:625-626 has no duplicate check: every /process is a job of its own.
    const ps = await Promise.all(
      [0, 1, 2].map(() => chat({ instance_id: 'astropy__astropy-12907', turns: 2 }, {}, { job_id: 'astropy__astropy-12907' })),
    );
    for (const r of ps) expect(r.status).toBe(200);
    expect(ps.map((r) => r.body.job_id)).toEqual(Array(3).fill('astropy__astropy-12907'));
    expect(new Set(ps.map(text)).size).toBe(3);
    // ss:92 (the future is popped) and asp:828-830 forget a finished job: the id runs again, sampled anew.
    const again = await chat({ instance_id: 'astropy__astropy-12907', turns: 2 }, {}, { job_id: 'astropy__astropy-12907' });
    expect(ps.map(text)).not.toContain(text(again));
  });

  it('with sampling_params.seed the samples of one job id are identical', async () => {
    // asp:118-121: sampling_params become the LLMConfig, whose `seed` reaches the backend.
    const ps = await Promise.all([0, 1, 2].map(() => chat({ instance_id: 'seeded', turns: 2 }, { seed: 11 }, { job_id: 'seeded' })));
    expect(new Set(ps.map(text)).size).toBe(1);
    expect(ps[0].body.tokens).toEqual(ps[2].body.tokens);
  });

  it('"unknown" reused for different instances, at once and after each other', async () => {
    // gym app.py:326: metadata.get("instance_id", "unknown") — rows without an id share it.
    const ps = await Promise.all(['u1', 'u2'].map((id) => chat({ instance_id: id }, {}, { job_id: 'unknown' })));
    expect(ps.map((r) => [r.status, r.body.instance_id])).toEqual([
      [200, 'u1'],
      [200, 'u2'],
    ]);
    const later = await chat({ instance_id: 'u3' }, {}, { job_id: 'unknown' });
    expect([later.status, later.body.instance_id, later.body.job_id]).toEqual([200, 'u3', 'unknown']);
  });

  it('ignores an unknown top-level key and counts it', async () => {
    // nu:129-132: ProcessRequest is a pydantic model without extra="forbid": unknown keys are dropped.
    const r = await chat({ instance_id: 'x1' }, {}, { job_id: 'x1', responses_create_params: { input: [] } });
    expect(r.status).toBe(200);
    expect(r.body.critical_error).toBeNull();
    expect((await get(`${srv.url}/metrics`)).text).toMatch(/raas_ignored_request_keys_total\{key="responses_create_params"\} 1/);
  });

  it('logs each ignored key once, at debug level', async () => {
    const lines: Array<{ level: string; obj: unknown }> = [];
    const at = (level: string) => (obj: unknown) => void lines.push({ level, obj });
    const config = ServerConfig.parse({});
    const p = new Pipeline({
      config,
      registry: new HandlerRegistry(),
      pool: new BackendPool(config.llm, defaultClientFactory({})),
      tokenizer: qwen3Tokenizer,
      clock: systemClock,
      log: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') },
    });
    try {
      // An unknown data_source stops these before any job starts; the keys were read first.
      for (const extra of ['a', 'b', 'a']) await p.submit({ instance: { data_source: 'nope' }, [extra]: 1 }).catch(() => undefined);
      expect(lines).toEqual([
        { level: 'debug', obj: { key: 'a' } },
        { level: 'debug', obj: { key: 'b' } },
      ]);
    } finally {
      await p.close();
    }
  });

  it('a missing data_source means the swebench handler', async () => {
    // asp:774: instance.get('data_source', 'swebench'); gym app.py:329 sends the SWE-bench row as is.
    const row = {
      instance_id: 'django__django-11099',
      repo: 'django/django',
      base_commit: 'ef082ebb84f00e38af4e8880d04e8365c2766d34',
      problem_statement: 'x',
      FAIL_TO_PASS: '["t"]',
      PASS_TO_PASS: '[]',
    };
    const r = await post(`${srv.url}/process`, { instance: row, sampling_params: {}, job_id: 'django__django-11099' });
    // The swe handler runs it; nothing here provides the repository, so INIT fails: 200 with
    // critical_error "init", filter true, messages [], a traceback (nu:397-422).
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      data_source: 'swe',
      instance_id: 'django__django-11099',
      critical_error: 'init',
      success: false,
      filter: true,
      reward: 0,
      messages: [],
    });
    expect(r.body.traceback).toBeTypeOf('string');
  });

  it('accepts a job id with "/" and spaces, on /process, /jobs/:id and /cancel', async () => {
    // nu:129-132 (job_id: str | None) and nu:135-136 (CancelRequest.job_id: str): any string.
    const id = 'org/repo issue 7';
    const r = await chat({ instance_id: 'slash' }, {}, { job_id: id });
    expect([r.status, r.body.job_id]).toEqual([200, id]);
    expect((await get(`${srv.url}/jobs/${encodeURIComponent(id)}`)).body).toMatchObject({ job_id: id, state: 'done' });
    expect((await post(`${srv.url}/cancel`, { job_id: id })).body).toMatchObject({ job_id: id, cancelled: false, state: 'done' });
  });

  it('a finished result: ProRL keys and timing, success and filter, no token fields on messages by default', async () => {
    const r = (await chat({ instance_id: 'keys', turns: 2 }, {}, { job_id: 'keys' })).body;
    // nu:600-612: filter is false exactly when there is no critical error and success is true.
    expect(r).toMatchObject({ critical_error: null, success: true, filter: false, finish: true });
    expect(r).not.toHaveProperty('traceback');
    // tmr:130-146: ProRL's timing keys, nested under timing (asp:390-393); ours alongside.
    for (const k of [
      'init_time',
      'run_time',
      'eval_time',
      'others_time',
      'counted_elapsed',
      'queued_s',
      'init_s',
      'run_s',
      'eval_s',
      'counted_s',
    ])
      expect(typeof r.timing[k]).toBe('number');
    expect(r.timing.timeout_triggered).toBe(false);
    expect(r.timing.counted_elapsed).toBeCloseTo(r.timing.init_time + r.timing.run_time + r.timing.eval_time, 3);
    // nu:309-325: token_ids, input_ids and logprobs only under token_level_generation.
    for (const m of r.messages) for (const k of ['token_ids', 'input_ids', 'logprobs']) expect(m).not.toHaveProperty(k);
    const withIds = (await chat({ instance_id: 'ids' }, { token_level_generation: true }, { job_id: 'ids' })).body;
    const a = withIds.messages.find((m: { role: string }) => m.role === 'assistant');
    expect(a.token_ids.length).toBeGreaterThan(0);
    expect(a.input_ids).toEqual(withIds.tokens.prompt_ids);
    expect(a.logprobs).toHaveLength(a.token_ids.length);
  });

  it('messages end with the last assistant message; the rest is kept under trailing_messages', async () => {
    // nu:271-272 and nu:282-283 drop trailing non-assistant messages.
    const r = (await post(`${srv.url}/process`, { instance: { data_source: 'trailing' }, job_id: 'trim' })).body;
    expect(r.messages.map((m: { role: string }) => m.role)).toEqual(['user', 'assistant']);
    expect(r.messages[1]).toEqual({ role: 'assistant', content: 'done', tool_calls: [{ name: 'finish', arguments: {} }] });
    expect(r.trailing_messages).toEqual([{ role: 'tool', content: 'finished', tool_call_id: 'call_0' }]);
  });

  it('/status: status "running", running a boolean, pending_jobs; our counts under other keys', async () => {
    // ss:480-505 and asp:838-866: {status: "running", pending_jobs, running: bool, jobs, init, run, eval}.
    const st = (await get(`${srv.url}/status`)).body;
    expect(st).toMatchObject({
      status: 'running',
      running: true,
      pending_jobs: 0,
      jobs: 0,
      init: 0,
      run: 0,
      eval: 0,
      queued: 0,
      in_stage: 0,
    });
  });

  it('/cancel of an id the server does not know answers 200', async () => {
    // ss:508-531: the child's "Job … not found" (asp:740) is swallowed; the answer is 200.
    const c = await post(`${srv.url}/cancel`, { job_id: 'never-submitted' });
    expect([c.status, c.body.cancelled]).toEqual([200, false]);
  });

  it('a stopped server answers 503 with detail on /process, /status, /cancel and /stop', async () => {
    expect((await post(`${srv.url}/stop`)).status).toBe(200);
    try {
      // ss:339-344 (ServerNotRunningError → 503 {detail}); guarded at ss:418-423, 480-484, 508-512, 596-598.
      const answers = [
        await chat({ instance_id: 's' }),
        await get(`${srv.url}/status`),
        await post(`${srv.url}/cancel`, { job_id: 's' }),
        await post(`${srv.url}/stop`),
      ];
      for (const a of answers) {
        expect(a.status).toBe(503);
        expect(a.body.detail).toMatch(/^Server is not running\. Please start the server first\./);
      }
    } finally {
      await post(`${srv.url}/start`);
    }
  });
});

describe('a failed rollout', () => {
  let srv: RolloutServer;
  beforeAll(async () => {
    // A backend nothing listens on, no retries: RUN fails at its first LLM call.
    srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      llm: { backends: [{ address: 'http://127.0.0.1:9' }], retries: 0, max_moves: 0 },
    });
  });
  afterAll(async () => {
    await srv?.close();
  });

  it('has reward 0, resolved false, filter true and a traceback, even when EVAL would have paid', async () => {
    // pass_rate 1: the chat handler's EVAL grades reward 1 whatever RUN did.
    const r = (await post(`${srv.url}/process`, { instance: { data_source: 'chat', instance_id: 'dead', pass_rate: 1 }, job_id: 'dead' }))
      .body;
    // nu:425-485: a RUN exception gives critical_error "run", resolved False, success False, a traceback.
    expect(r).toMatchObject({ critical_error: 'run', reward: 0, resolved: false, success: false, filter: true });
    expect(r.error).toMatch(/backend/);
    expect(r.traceback).toMatch(/\n\s+at /);
  });
});
