import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RolloutClient } from '../../src/client/index.js';
import { CancelledError } from '../../src/protocol/errors.js';
import { startFakeServer, type FakeServer } from './fake-server.js';
import { until } from './until.js';

describe('RolloutClient routes against a real fastify server', () => {
  let srv: FakeServer;
  let client: RolloutClient;

  beforeAll(async () => {
    srv = await startFakeServer({ token: 's3cret' });
    client = new RolloutClient({ url: `${srv.url}/`, token: 's3cret' });
  });
  afterAll(async () => {
    client.close();
    client.close(); // safe twice
    await srv.close();
  });

  it('sends the bearer token, and a missing one surfaces as unauthorized', async () => {
    expect(await client.health()).toBe(true);
    expect(srv.log.at(-1)?.auth).toBe('Bearer s3cret');
    const anon = new RolloutClient({ url: srv.url });
    try {
      await expect(anon.status()).rejects.toMatchObject({ code: 'unauthorized', status: 401 });
      expect(await anon.health()).toBe(false);
    } finally {
      anon.close();
    }
  });

  it('types every route: status, llm servers, start/stop, jobs', async () => {
    const added = await client.addLlmServer({ address: 'http://127.0.0.1:9/v1', weight_version: '3' });
    expect(added.backends).toEqual([{ address: 'http://127.0.0.1:9/v1', api: 'vllm', weight_version: '3', active: 0, assigned: 0 }]);
    await client.addLlmServer({ address: 'http://127.0.0.1:10', api: 'sglang' });
    expect((await client.removeLlmServer('http://127.0.0.1:9/v1')).backends.map((b) => b.address)).toEqual(['http://127.0.0.1:10']);
    expect((await client.status()).backends).toHaveLength(1);
    await client.clearLlmServers();
    expect((await client.status()).backends).toHaveLength(0);
    expect((await client.stop()).status).toBe('stopped');
    expect((await client.start()).status).toBe('running');
    await expect(client.addLlmServer({ address: '' })).rejects.toThrow(/address/);
  });

  it('always sends a job_id, and GET /jobs/:id gives the result or undefined', async () => {
    const r = await client.process({ instance: { data_source: 'chat', instance_id: 'x' } });
    const sent = srv.log.filter((l) => l.path === '/process').at(-1)!.body as { job_id: string; attach: boolean };
    expect(sent.job_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent.attach).toBe(true);
    expect(r.job_id).toBe(sent.job_id);
    const j = await client.job(sent.job_id);
    expect(j?.state).toBe('done');
    expect(j?.result?.job_id).toBe(sent.job_id);
    expect(await client.job('never-seen')).toBeUndefined();
  });

  it('cancel of an unknown job answers cancelled: false, state "unknown"', async () => {
    expect(await client.cancel('never-seen')).toEqual({ status: 'ok', job_id: 'never-seen', cancelled: false, state: 'unknown' });
  });

  it('rejects a malformed request before sending, naming the field', async () => {
    const before = srv.log.length;
    await expect(client.process({ instance: { data_source: 'chat' }, job_id: 'x'.repeat(257) })).rejects.toThrow(/job_id/);
    await expect(client.process({ instance: { data_source: 'chat' }, sampling_params: { top_p: 2 } })).rejects.toThrow(
      /sampling_params\.top_p/,
    );
    expect(srv.log.length).toBe(before);
  });

  it('an aborted signal ends the wait and cancels the job on the server', async () => {
    const ac = new AbortController();
    const p = client.process({ instance: { data_source: 'chat', hold_ms: -1 }, job_id: 'abort-1' }, { signal: ac.signal });
    await until(() => srv.jobs.has('abort-1'), 'the job to start');
    ac.abort();
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    expect(srv.log.filter((l) => l.path === '/cancel').map((l) => l.body)).toContainEqual({ job_id: 'abort-1' });
    expect(srv.jobs.get('abort-1')?.state).toBe('cancelled');
  });

  it('an abort reason that is an Error is what process rejects with', async () => {
    const ac = new AbortController();
    const p = client.process({ instance: { data_source: 'chat', hold_ms: -1 }, job_id: 'abort-2' }, { signal: ac.signal });
    await until(() => srv.jobs.has('abort-2'), 'the job to start');
    const reason = new Error('trainer shutting down');
    ac.abort(reason);
    await expect(p).rejects.toBe(reason);
    expect(srv.jobs.get('abort-2')?.state).toBe('cancelled');
  });

  it('a cancel from elsewhere releases the held answer with critical_error "cancelled"', async () => {
    const p = client.process({ instance: { data_source: 'chat', hold_ms: -1 }, job_id: 'held-1' });
    await until(() => srv.jobs.has('held-1'), 'the job to start');
    const ack = await client.cancel('held-1');
    expect(ack).toMatchObject({ job_id: 'held-1', cancelled: true });
    expect((await p).critical_error).toBe('cancelled');
  });

  it('close() ends a held /process at once without cancelling the job on the server', async () => {
    const own = new RolloutClient({ url: srv.url, token: 's3cret' });
    const p = own.process({ instance: { data_source: 'chat', hold_ms: -1 }, job_id: 'closed-1' });
    await until(() => srv.jobs.has('closed-1'), 'the job to start');
    own.close();
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    expect(srv.jobs.get('closed-1')?.state).toBe('run');
    await expect(own.status()).rejects.toThrow(/closed/);
    await client.cancel('closed-1');
  });

  it('rejects URLs that are not http(s) with a message naming the fix', () => {
    expect(() => new RolloutClient({ url: 'localhost:8000' })).toThrow(/http:\/\//);
  });

  it('holds hundreds of concurrent long polls over the keep-alive agent', async () => {
    const n = 200;
    const ps = Array.from({ length: n }, (_, i) => client.process({ instance: { data_source: 'chat', hold_ms: -1 }, job_id: `many-${i}` }));
    await until(() => Array.from({ length: n }, (_, i) => srv.jobs.has(`many-${i}`)).every(Boolean), 'all jobs to start');
    await Promise.all(Array.from({ length: n }, (_, i) => client.cancel(`many-${i}`)));
    const results = await Promise.all(ps);
    expect(results.every((r) => r.critical_error === 'cancelled')).toBe(true);
  });
});
