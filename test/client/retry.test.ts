import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { RolloutClient } from '../../src/client/index.js';
import { backoffDelay, parseRetryAfter } from '../../src/client/retry.js';
import { RaasError } from '../../src/protocol/errors.js';
import { startFakeServer, type FakeServer } from './fake-server.js';
import { settleIo, until } from './until.js';

describe('backoff and Retry-After parsing', () => {
  it('doubles from base_ms up to max_ms, with at most half of it random', () => {
    const b = { base_ms: 100, max_ms: 1000 };
    expect(backoffDelay(0, b, () => 0)).toBe(50);
    expect(backoffDelay(0, b, () => 1)).toBe(100);
    expect(backoffDelay(3, b, () => 0.5)).toBe(600);
    expect(backoffDelay(10, b, () => 1)).toBe(1000);
    expect(backoffDelay(10, b, () => 0)).toBe(500);
  });

  it('reads delta-seconds and HTTP-dates, and ignores garbage', () => {
    expect(parseRetryAfter('7')).toBe(7000);
    expect(parseRetryAfter(['2', '9'])).toBe(2000);
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).toBe(30_000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 00:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter('999999')).toBe(5 * 60_000);
  });
});

describe('RolloutClient retries against a real fastify server (fake timers)', () => {
  let srv: FakeServer;
  let client: RolloutClient;
  const processCalls = (): Array<{ job_id?: string }> =>
    srv.log.filter((l) => l.path === '/process').map((l) => l.body as { job_id?: string });

  beforeAll(async () => {
    srv = await startFakeServer();
  });
  afterAll(async () => {
    await srv.close();
  });
  afterEach(() => {
    client?.close();
    vi.useRealTimers();
    srv.log.length = 0;
    srv.failProcess.length = 0;
  });

  function fake(): void {
    // Only the timers: real sockets and setImmediate keep running so the server answers.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  }

  it('honours Retry-After on 503 and retries with the same job_id', async () => {
    fake();
    client = new RolloutClient({ url: srv.url, retries: 3, backoff: { base_ms: 10, max_ms: 20 } });
    srv.failProcess.push({ status: 503, retryAfter: '7' });
    const p = client.process({ instance: { data_source: 'chat' }, job_id: 'ra-1' });
    await until(() => processCalls().length === 1 && vi.getTimerCount() === 1, 'the first 503');
    await vi.advanceTimersByTimeAsync(6_999);
    await settleIo();
    expect(processCalls()).toHaveLength(1); // the 10–20 ms backoff did not replace Retry-After
    await vi.advanceTimersByTimeAsync(1);
    const result = await p;
    expect(result.job_id).toBe('ra-1');
    expect(processCalls().map((b) => b.job_id)).toEqual(['ra-1', 'ra-1']);
  });

  it('retries 5xx with capped exponential backoff, then gives up with the server error code', async () => {
    fake();
    client = new RolloutClient({ url: srv.url, retries: 2, backoff: { base_ms: 1000, max_ms: 1500 }, random: () => 1 });
    srv.failProcess.push({ status: 500, code: 'internal' }, { status: 502, code: 'backend_unavailable' }, { status: 503 });
    const p = client.process({ instance: { data_source: 'chat' }, job_id: 'ra-2' });
    const caught = p.catch((e: unknown) => e);
    await until(() => processCalls().length === 1 && vi.getTimerCount() === 1, 'first failure');
    await vi.advanceTimersByTimeAsync(999);
    await settleIo();
    expect(processCalls()).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1); // retry 1 after base_ms
    await until(() => processCalls().length === 2 && vi.getTimerCount() === 1, 'second failure');
    await vi.advanceTimersByTimeAsync(1499); // retry 2 after min(max_ms, 2·base_ms)
    await settleIo();
    expect(processCalls()).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    const err = await caught;
    expect(err).toBeInstanceOf(RaasError);
    expect((err as RaasError).code).toBe('queue_full');
    expect((err as RaasError).status).toBe(503);
    expect(processCalls().map((b) => b.job_id)).toEqual(['ra-2', 'ra-2', 'ra-2']);
  });

  it('retries /process only as an attach: a request with attach: false is sent once', async () => {
    client = new RolloutClient({ url: srv.url, retries: 5, backoff: { base_ms: 1, max_ms: 2 } });
    srv.failProcess.push({ status: 503 }, { status: 503 });
    await expect(client.process({ instance: { data_source: 'chat' }, job_id: 'ra-5', attach: false })).rejects.toMatchObject({
      code: 'queue_full',
      status: 503,
    });
    expect(processCalls()).toEqual([expect.objectContaining({ job_id: 'ra-5', attach: false })]);
    srv.failProcess.length = 0;
    // The default attaches, so the retry finds the job instead of starting another.
    srv.failProcess.push({ status: 503 });
    expect((await client.process({ instance: { data_source: 'chat' }, job_id: 'ra-6' })).job_id).toBe('ra-6');
    expect(processCalls().slice(1)).toEqual([
      expect.objectContaining({ job_id: 'ra-6', attach: true }),
      expect.objectContaining({ job_id: 'ra-6', attach: true }),
    ]);
  });

  it('never retries a 4xx', async () => {
    client = new RolloutClient({ url: srv.url, retries: 5 });
    srv.failProcess.push({ status: 400, code: 'unknown_data_source' });
    await expect(client.process({ instance: { data_source: 'nope' }, job_id: 'ra-3' })).rejects.toMatchObject({
      code: 'unknown_data_source',
      status: 400,
    });
    expect(processCalls()).toHaveLength(1);
  });

  it('retries connection errors until the server is back, with the same job_id', async () => {
    const later = await startFakeServer({ name: 'later' });
    const port = later.port;
    await later.close(); // nothing listens on `port` now: connection refused
    client = new RolloutClient({ url: `http://127.0.0.1:${port}`, retries: 50, backoff: { base_ms: 20, max_ms: 40 } });
    const p = client.process({ instance: { data_source: 'chat' }, job_id: 'ra-4' });
    await new Promise((r) => setTimeout(r, 100)); // a few refused attempts
    const back = await startFakeServer({ name: 'back', port });
    try {
      const result = await p;
      expect(result.backend).toBe('back');
      expect(back.log.filter((l) => l.path === '/process').map((l) => (l.body as { job_id: string }).job_id)).toEqual(['ra-4']);
    } finally {
      await back.close();
    }
  });

  it('fails with server_unreachable once the retry budget is spent', async () => {
    const gone = await startFakeServer();
    const port = gone.port;
    await gone.close();
    client = new RolloutClient({ url: `http://127.0.0.1:${port}`, retries: 2, backoff: { base_ms: 1, max_ms: 2 } });
    await expect(client.status()).rejects.toMatchObject({ code: 'server_unreachable' });
  });
});
