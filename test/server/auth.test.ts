import { afterAll, describe, expect, it } from 'vitest';
import { networkInterfaces } from 'node:os';
import { isLoopbackHost, startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { get, post } from './helpers.js';

describe('bearer token for non-loopback binds', () => {
  const servers: RolloutServer[] = [];
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
  });

  it('tells loopback from other addresses', () => {
    for (const h of ['127.0.0.1', '127.8.9.10', 'localhost', '::1', '[::1]', '::ffff:127.0.0.1']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', '128.0.0.1', 'example.com', '::ffff:10.0.0.1']) expect(isLoopbackHost(h), h).toBe(false);
  });

  it('refuses 0.0.0.0 without --token, naming the fix', async () => {
    await expect(startRolloutServer({ host: '0.0.0.0', port: 0, log_level: 'silent' })).rejects.toMatchObject({
      code: 'config_invalid',
      message: expect.stringMatching(/--token.*--insecure/),
    });
  });

  it('binds 0.0.0.0 with --insecure and answers without a token', async () => {
    const s = await startRolloutServer({ host: '0.0.0.0', port: 0, insecure: true, log_level: 'silent' });
    servers.push(s);
    expect((await get(`http://127.0.0.1:${s.port}/status`)).status).toBe(200);
  });

  it('with a token, every route but /health needs the bearer (constant-time compare)', async () => {
    const s = await startRolloutServer({ host: '0.0.0.0', port: 0, token: 'sekrit-token-1', log_level: 'silent' });
    servers.push(s);
    const external =
      Object.values(networkInterfaces())
        .flat()
        .find((i) => i && i.family === 'IPv4' && !i.internal)?.address ?? '127.0.0.1';
    const base = `http://${external}:${s.port}`;
    expect((await get(`${base}/health`)).status).toBe(200);
    const none = await get(`${base}/status`);
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('unauthorized');
    expect((await get(`${base}/status`, { authorization: 'Bearer wrong-token-1' })).status).toBe(401);
    expect((await get(`${base}/status`, { authorization: 'Bearer sekrit-token-1x' })).status).toBe(401);
    expect((await get(`${base}/status`, { authorization: 'Basic sekrit-token-1' })).status).toBe(401);
    expect((await get(`${base}/status`, { authorization: 'Bearer sekrit-token-1' })).status).toBe(200);
    const p = await post(`${base}/process`, { instance: { data_source: 'chat' } });
    expect(p.status).toBe(401);
    expect(p.headers.get('www-authenticate')).toBe('Bearer');
  });
});
