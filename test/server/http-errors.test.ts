import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ERROR_CODES } from '../../src/protocol/errors.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import type { AgentHandler } from '../../src/server/handlers/types.js';

// Every bad-input class against a real server (app.inject keeps it fast); the answer is always the error shape.
describe('bad input', () => {
  let srv: RolloutServer;
  const seen: unknown[] = [];
  const echo: AgentHandler<Record<string, unknown>> = {
    name: 'echo',
    aliases: ['echo-alias'],
    instance: z.looseObject({ must: z.string().optional() }),
    async init(ctx) {
      seen.push({ instance: ctx.job.instance, sampling: ctx.job.samplingParams });
      return {};
    },
    async run() {
      return {
        messages: [],
        tokens: { prompt_ids: [], response_ids: [], response_mask: [], logprobs: [] },
        finish_reason: 'finish',
        artifacts: {},
      };
    },
    async eval() {
      return { reward: 0, resolved: false };
    },
  };
  const inject = (method: 'GET' | 'POST' | 'PUT', url: string, payload?: string | object, headers: Record<string, string> = {}) =>
    srv.app.inject({ method, url, payload, headers: payload === undefined ? headers : { 'content-type': 'application/json', ...headers } });

  beforeAll(async () => {
    srv = await startRolloutServer(
      { port: 0, log_level: 'silent', body_limit_bytes: 4096, llm: { backends: [{ address: '127.0.0.1:9/v1' }] } },
      { handlers: [echo] },
    );
  });
  afterAll(() => srv.close());

  const cases: Array<[string, () => Promise<{ statusCode: number; body: string }>, number, string, RegExp]> = [
    ['unknown route', () => inject('GET', '/nowhere'), 404, 'route_not_found', /GET \/nowhere/],
    ['wrong method', () => inject('GET', '/process'), 405, 'method_not_allowed', /use POST/],
    [
      'body over the limit',
      () => inject('POST', '/process', JSON.stringify({ instance: { data_source: 'echo', pad: 'x'.repeat(5000) } })),
      413,
      'body_too_large',
      /body_limit_bytes/,
    ],
    [
      'not JSON',
      () => inject('POST', '/process', 'hello', { 'content-type': 'text/plain' }),
      415,
      'unsupported_media_type',
      /application\/json/,
    ],
    ['malformed JSON', () => inject('POST', '/process', '{"instance": ', {}), 400, 'bad_request', /not valid JSON/],
    ['a JSON array', () => inject('POST', '/process', '[1,2]'), 400, 'bad_request', /\(body\)/],
    ['missing instance', () => inject('POST', '/process', {}), 400, 'bad_request', /^instance:/],
    [
      'unknown data_source',
      () => inject('POST', '/process', { instance: { data_source: 'nope' } }),
      400,
      'unknown_data_source',
      /"nope".*"chat".*"echo"/,
    ],
    [
      'instance failing its schema',
      () => inject('POST', '/process', { instance: { data_source: 'echo', must: 5 } }),
      400,
      'invalid_instance',
      /instance\.must/,
    ],
    [
      'bad sampling param',
      () => inject('POST', '/process', { instance: { data_source: 'echo' }, sampling_params: { temperature: 'hot' } }),
      400,
      'bad_request',
      /sampling_params\.temperature/,
    ],
    [
      'job_id over 256 characters',
      () => inject('POST', '/process', { instance: { data_source: 'echo' }, job_id: 'a'.repeat(257) }),
      400,
      'bad_request',
      /job_id/,
    ],
    [
      'attach without a job_id',
      () => inject('POST', '/process', { instance: { data_source: 'echo' }, attach: true }),
      400,
      'bad_request',
      /attach.*job_id/,
    ],
    ['cancel without job_id', () => inject('POST', '/cancel', {}), 400, 'bad_request', /job_id/],
    ['add_llm_server without address', () => inject('POST', '/add_llm_server', { api: 'vllm' }), 400, 'bad_request', /address/],
    ['add_llm_server with a bad api', () => inject('POST', '/add_llm_server', { address: 'x:1', api: 'tgi' }), 400, 'bad_request', /api/],
    ['unknown job', () => inject('GET', '/jobs/ghost'), 404, 'job_not_found', /ghost/],
    ['unknown job with a 200-character id', () => inject('GET', `/jobs/${'a'.repeat(200)}`), 404, 'job_not_found', /aaaa/],
    ['job id over the length limit', () => inject('GET', `/jobs/${'a'.repeat(600)}`), 400, 'bad_request', /job_id/],
    ['malformed percent-encoding', () => inject('GET', '/jobs/%zz'), 400, 'bad_request', /malformed/],
    ['a job path with another method', () => inject('POST', '/jobs/x', {}), 405, 'method_not_allowed', /use GET/],
  ];
  it.each(cases)('%s', async (_name, call, status, code, message) => {
    const res = await call();
    expect(res.statusCode).toBe(status);
    const body = JSON.parse(res.body);
    expect(body.error.code).toBe(code);
    expect(body.error.message).toMatch(message);
    expect(body.detail).toBe(body.error.message);
    expect(ERROR_CODES[code as keyof typeof ERROR_CODES].status).toBe(status);
  });

  it('survives a burst of garbage and still serves', async () => {
    const junk = [
      '',
      'null',
      '"s"',
      '{"instance":null}',
      '{"instance":{"data_source":["x"]}}',
      '{"__proto__":{"x":1},"instance":{"data_source":"echo"}}',
      '\u0000\u0001',
      '{'.repeat(2000),
    ];
    for (const j of junk) {
      const res = await inject('POST', '/process', j);
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(JSON.parse(res.body).error.code).toBeTypeOf('string');
    }
    expect((await inject('GET', '/health')).statusCode).toBe(200);
  });

  it('passes unknown instance and sampling_params fields through to the handler; aliases and ProRL addresses work', async () => {
    const res = await inject('POST', '/process', {
      instance: { task: 'echo-alias', extra: { deep: [1] } },
      sampling_params: { temperature: 0.5, repetition_penalty: 1.1 },
      job_id: 'pt-1',
    });
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body).data_source).toBe('echo');
    expect(seen.at(-1)).toMatchObject({
      instance: { task: 'echo-alias', extra: { deep: [1] } },
      sampling: { temperature: 0.5, repetition_penalty: 1.1 },
    });
    // ProRL's ".../v1" addresses register as vLLM at the bare origin.
    const st = JSON.parse((await inject('GET', '/status')).body);
    expect(st.backends[0]).toMatchObject({ address: 'http://127.0.0.1:9', api: 'vllm' });
  });

  it('accepts /start, /stop and /clear_llm_server with or without a JSON content type', async () => {
    expect((await inject('POST', '/start')).statusCode).toBe(200);
    expect((await inject('POST', '/start', '', { 'content-type': 'application/json' })).statusCode).toBe(200);
  });

  it('serves Prometheus text on /metrics', async () => {
    const res = await inject('GET', '/metrics');
    expect(res.headers['content-type']).toMatch(/text\/plain/);
    for (const name of [
      'raas_queue_depth',
      'raas_workers_busy',
      'raas_jobs_total',
      'raas_stage_duration_seconds',
      'raas_backend_active',
      'raas_backend_assigned',
      'raas_llm_call_duration_seconds',
      'raas_backend_moves_total',
    ]) {
      expect(res.body).toContain(`# TYPE ${name}`);
    }
    expect(res.body).toMatch(/raas_jobs_total\{state="done"\} [1-9]/);
    // The process's own metrics, once per process however many servers it runs (docs/api.md).
    expect(res.body).toMatch(/^nodejs_heap_size_used_bytes [1-9]\d*$/m);
    expect(res.body.match(/^# TYPE process_resident_memory_bytes /gm)).toHaveLength(1);
  });
});
