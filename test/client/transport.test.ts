import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RolloutClient } from '../../src/client/index.js';
import { RaasError } from '../../src/protocol/errors.js';

/**
 * The transport's own edges against real sockets: a server that accepts and never answers, and one
 * that cuts its answer off midway. Both are connection failures (retried, then `server_unreachable`),
 * never a hang; a held /process has no timeout and waits until its signal aborts.
 */
describe('Transport edges', () => {
  const cleanup: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanup.splice(0)) c();
  });

  async function tcpServer(onSocket: (s: net.Socket) => void): Promise<{ url: string; accepted: () => number }> {
    let accepted = 0;
    const sockets = new Set<net.Socket>();
    const server = net.createServer((s) => {
      accepted++;
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {});
      onSocket(s);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => {
      for (const s of sockets) s.destroy();
      server.close();
    });
    return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, accepted: () => accepted };
  }

  it('a server that never answers: the call times out, is retried, then fails as server_unreachable', async () => {
    const srv = await tcpServer(() => {});
    const c = new RolloutClient({ url: srv.url, retries: 1, backoff: { base_ms: 1, max_ms: 2 } });
    cleanup.push(() => c.close());
    const t0 = Date.now();
    const err = await c.status({ timeout_ms: 150 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RaasError);
    expect((err as RaasError).code).toBe('server_unreachable');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(280);
    expect(srv.accepted()).toBe(2);
    expect(await c.health({ timeout_ms: 100 })).toBe(false);
  });

  it('an answer cut off midway is a connection failure, not a truncated body', async () => {
    const srv = await tcpServer((s) =>
      s.once('data', () => {
        s.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"status":');
        setTimeout(() => s.destroy(), 20);
      }),
    );
    const c = new RolloutClient({ url: srv.url, retries: 0 });
    cleanup.push(() => c.close());
    await expect(c.status()).rejects.toMatchObject({ code: 'server_unreachable' });
  });

  it('a held /process has no timeout: it waits until its signal aborts, then rejects with the reason', async () => {
    const srv = await tcpServer(() => {});
    const c = new RolloutClient({ url: srv.url, timeout_ms: 50 });
    cleanup.push(() => c.close());
    const ac = new AbortController();
    const p = c.process({ instance: { data_source: 'chat' }, job_id: 'held-1' }, { signal: ac.signal, cancelOnAbort: false });
    const settled = await Promise.race([
      p.then(
        () => 'answered',
        () => 'failed',
      ),
      new Promise((r) => setTimeout(() => r('waiting'), 300)),
    ]);
    expect(settled).toBe('waiting');
    const why = new Error('stop waiting');
    ac.abort(why);
    await expect(p).rejects.toBe(why);
  });
});
