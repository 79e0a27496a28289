import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { unknownProcessKeys, warningHeader } from '../../src/protocol/strict.js';

// /process keys the server does not read: lenient by default (ProRL's request model drops unknown
// keys, NVIDIA-NeMo/ProRL-Agent-Server openhands/nvidia/utils.py@40c1d8a:129-132, and NeMo-Gym's
// prorl_agent sends `responses_create_params` at the top level, responses_api_agents/prorl_agent/
// app.py@b785ff0), with a Warning header naming them; strict on request (Prefer: handling=strict,
// RFC 7240 §4.4) or for the whole server (unknown_request_keys: reject).
let sim: SimHandle;
let lenient: RolloutServer;
let strict: RolloutServer;

beforeAll(async () => {
  sim = await startSim();
  [lenient, strict] = await Promise.all([
    startRolloutServer({ port: 0, log_level: 'silent', llm: { backends: [{ address: sim.url }] } }),
    startRolloutServer({ port: 0, log_level: 'silent', unknown_request_keys: 'reject', llm: { backends: [{ address: sim.url }] } }),
  ]);
}, 60_000);
afterAll(async () => {
  await Promise.all([lenient?.close(), strict?.close()]);
  await sim?.close();
});

async function process(srv: RolloutServer, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${srv.url}/process`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> };
}

const typo = {
  instance: { data_source: 'chat', instance_id: 's1', turns: 1 },
  sampling_params: { temprature: 0.7, seed: 3 },
  job_idd: 'x',
};

describe('/process keys the server does not read', () => {
  it('lenient (default): the job runs, the Warning header names each key and the nearest valid one', async () => {
    const r = await process(lenient, typo);
    expect(r.status).toBe(200);
    expect(r.body.critical_error).toBeNull();
    expect(r.headers.get('warning')).toBe(
      '299 raas "ignored unknown keys: job_idd (did you mean job_id?), sampling_params.temprature (did you mean sampling_params.temperature?)"',
    );
    expect(r.headers.get('preference-applied')).toBeNull();
    const clean = await process(lenient, {
      instance: { data_source: 'chat', instance_id: 's2', turns: 1 },
      sampling_params: { temperature: 0.7 },
    });
    expect(clean.headers.get('warning')).toBeNull();
  }, 30_000);

  it('Prefer: handling=strict answers 400 unknown_key before any job starts', async () => {
    const before = (await (await fetch(`${lenient.url}/status`)).json()) as { jobs?: number };
    const r = await process(lenient, typo, { prefer: 'handling=strict' });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('unknown_key');
    expect(r.body.error.message).toBe(
      'unknown keys `job_idd` (did you mean `job_id`?), `sampling_params.temprature` (did you mean `sampling_params.temperature`?): this server reads no such key; remove it (a backend field goes in sampling_params.extra_body)',
    );
    expect(r.headers.get('preference-applied')).toBe('handling=strict');
    expect((await (await fetch(`${lenient.url}/status`)).json()) as { jobs?: number }).toEqual(
      expect.objectContaining({ jobs: before.jobs }),
    );
    // A clean body passes in strict mode.
    const ok = await process(
      lenient,
      { instance: { data_source: 'chat', instance_id: 's3', turns: 1 } },
      { prefer: 'return=minimal, handling=strict' },
    );
    expect(ok.status).toBe(200);
  }, 30_000);

  it('unknown_request_keys: reject makes every request strict; Prefer: handling=lenient restores leniency', async () => {
    const r = await process(strict, { ...typo, responses_create_params: { input: [] } });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toMatch(
      /^unknown keys `job_idd` \(did you mean `job_id`\?\), `responses_create_params`, `sampling_params\.temprature`/,
    );
    const l = await process(strict, typo, { prefer: 'handling=lenient' });
    expect(l.status).toBe(200);
    expect(l.headers.get('warning')).toMatch(/^299 raas "ignored unknown keys: job_idd/);
    expect(l.headers.get('preference-applied')).toBe('handling=lenient');
  }, 30_000);
});

describe('unknownProcessKeys and the Warning header', () => {
  it('knows every key of the request model and of sampling_params, forwarded ones included', () => {
    expect(
      unknownProcessKeys({
        instance: { anything: 1 },
        sampling_params: { temperature: 1, min_p: 0.1, extra_body: { x: 1 }, max_output_tokens: 5 },
        job_id: 'a',
        attach: false,
        timeout_s: 1,
        group_id: 'g',
        policy_version: 0,
      }),
    ).toEqual([]);
    expect(unknownProcessKeys({ sampling_params: { zzzzzz: 1 } })).toEqual([{ path: 'sampling_params.zzzzzz', near: undefined }]);
    expect(unknownProcessKeys('not an object')).toEqual([]);
  });

  it('stays printable ASCII, names at most five keys', () => {
    const keys = ['a\nb', 'c"d', 'é', 'x4', 'x5', 'x6', 'x7'].map((path) => ({ path }));
    const h = warningHeader(keys);
    expect(h).toBe('299 raas "ignored unknown keys: a?b, c\'d, ?, x4, x5 and 2 more"');
    expect(h).toMatch(/^[\x20-\x7e]+$/);
  });
});
