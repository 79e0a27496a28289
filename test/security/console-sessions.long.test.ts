// Red team against the console's sessions, its token and GET /events, without a browser: session
// fixation, sign-in CSRF, one tenant signing everyone out, one tenant reading another's figures,
// the token in the server's log and its comparison by timing, hostile resume ids and filters, and
// never-reading event streams. The pages' headers, static routes, raas view and DNS rebinding are in
// console-http.long.test.ts; the attacks that need a browser in console-browser.long.test.ts.
import { spawn } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAuthenticator } from '../../src/server/auth.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import type { BackendPool } from '../../src/server/llm/pool.js';
import { TenantSet } from '../../src/server/tenants/tenants.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { rawGet } from './console-kit.js';
import { ROOT, hex, sleep } from './helpers.js';

const CLI = path.join(ROOT, 'dist/src/cli.js');
const bearer = (t: string): Record<string, string> => ({ authorization: `Bearer ${t}` });

// ---------------------------------------------------------------------------------------------
// Sessions and the token
// ---------------------------------------------------------------------------------------------

describe('console sessions and the token', () => {
  const ADMIN = `admin-${hex(8)}`;
  const A = `tenant-a-${hex(8)}`;
  const B = `tenant-b-${hex(8)}`;
  let srv: RolloutServer;
  let simA: SimHandle;
  let simB: SimHandle;
  const login = (token: string, headers: Record<string, string> = {}) =>
    fetch(`${srv.url}/ui/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: `token=${encodeURIComponent(token)}`,
    });
  const cookieOf = (r: Response): string | undefined => r.headers.get('set-cookie')?.split(';')[0];
  const overview = async (cookie: string) => (await fetch(`${srv.url}/ui/api/overview`, { headers: { cookie } })).status;

  beforeAll(async () => {
    simA = await startSim({ model: 'rt-a/M', filler: { median_tokens: 4, sigma: 0.1, max_tokens: 8 } });
    simB = await startSim({ model: 'rt-b/M', filler: { median_tokens: 4, sigma: 0.1, max_tokens: 8 } });
    srv = await startRolloutServer({
      port: 0,
      log_level: 'silent',
      token: ADMIN,
      tenants: [
        { name: 'a', token: A, backends: [{ address: simA.url }] },
        { name: 'b', token: B, backends: [{ address: simB.url }] },
      ],
    });
  });
  afterAll(async () => {
    await srv?.close();
    await simA?.close();
    await simB?.close();
  });

  it('never adopts a session id the browser brought (fixation): signing in always makes a fresh random one', async () => {
    const planted = 'raas_session=attacker-chosen-session-id-000000000000000000000';
    const r = await login(A, { cookie: planted });
    const got = cookieOf(r)!;
    expect(got).toMatch(/^raas_session=[\w-]{43}$/);
    expect(got).not.toBe(planted);
    expect(await overview(planted)).toBe(401);
    // A link sign-in too.
    const link = await fetch(`${srv.url}/ui?token=${A}`, { redirect: 'manual', headers: { cookie: planted } });
    expect(cookieOf(link)).not.toBe(planted);
    expect(await overview(planted)).toBe(401);
    // Ids do not repeat and do not follow from each other.
    const ids = new Set<string>();
    for (let i = 0; i < 20; i++) ids.add(cookieOf(await login(A))!);
    expect(ids.size).toBe(20);
  });

  it('refuses a sign-in form posted from another site (sign-in CSRF: a victim signed in as the attacker tenant)', async () => {
    const r = await login(A, { origin: 'http://attacker.example', 'sec-fetch-site': 'cross-site' });
    expect(r.headers.get('set-cookie'), 'a cross-site form signed the browser in').toBeNull();
    expect(r.status).toBeGreaterThanOrEqual(400);
    // The console's own form still signs in.
    const own = await login(A, { origin: srv.url, 'sec-fetch-site': 'same-origin' });
    expect(own.status).toBe(303);
    expect(cookieOf(own)).toMatch(/^raas_session=/);
  });

  it("a tenant cannot sign the admin out by signing in many times (the session table's eviction)", async () => {
    const admin = cookieOf(await login(ADMIN))!;
    expect(await overview(admin)).toBe(200);
    for (let i = 0; i < 1100; i++) {
      const r = await login(B);
      await r.arrayBuffer();
    }
    expect(await overview(admin), "the admin's session was evicted by another tenant's sign-ins").toBe(200);
  });

  it("shows a tenant no figure of another tenant's jobs: throughput, totals and mean reward are its own", async () => {
    const chat = (token: string, id: string) =>
      fetch(`${srv.url}/process`, {
        method: 'POST',
        headers: { ...bearer(token), 'content-type': 'application/json' },
        body: JSON.stringify({ instance: { data_source: 'chat', instance_id: id, pass_rate: 1 }, job_id: id }),
      }).then((r) => r.json());
    for (let i = 0; i < 3; i++) await chat(B, `b-only-${i}`);
    const ov = (await (await fetch(`${srv.url}/ui/api/overview`, { headers: bearer(A) })).json()) as {
      totals: Record<string, number>;
      throughput: { buckets: Array<{ done: number; admitted: number; mean_reward: number | null }> };
      by_state: Record<string, number>;
    };
    expect(ov.by_state).toEqual({});
    expect(ov.totals, "tenant a's console counts tenant b's jobs").toEqual({ admitted: 0, done: 0, failed: 0, cancelled: 0, timed_out: 0 });
    expect(ov.throughput.buckets.filter((b) => b.done > 0 || b.admitted > 0 || b.mean_reward !== null)).toEqual([]);
  });

  it('compares the token in constant time: a near miss costs what a far miss costs (server token and tenant tokens)', () => {
    // 1 MiB tokens make a byte-by-byte comparison's early exit large enough to see in process
    // (measured here: a plain === takes ~200x longer on the near miss); the headers are built and
    // flattened once, and the fastest of 40 alternating runs is compared, so GC and string
    // flattening do not count.
    const secret = 's'.repeat(1 << 20);
    const flat = (x: string): string => Buffer.from(x).toString();
    const near = flat(`Bearer ${secret.slice(0, -1)}x`);
    const far = flat(`Bearer x${secret.slice(1)}`);
    const single = makeAuthenticator(TenantSet.single(undefined as unknown as BackendPool), secret);
    // A server with tenants looks tokens up by digest: the same attack against a tenant's token.
    const multi = makeAuthenticator({ sole: undefined, tokens: new Map([[{ name: 'a' }, secret]]) } as unknown as TenantSet, undefined);
    for (const [name, check] of [
      ['server token', single],
      ['tenant token', multi],
    ] as const) {
      expect(check(`Bearer ${secret}`), name).toBeDefined();
      expect(check(near), name).toBeUndefined();
      const best = { near: Infinity, far: Infinity };
      for (let i = 0; i < 40; i++)
        for (const k of i % 2 ? (['near', 'far'] as const) : (['far', 'near'] as const)) {
          const t0 = process.hrtime.bigint();
          check(k === 'near' ? near : far);
          best[k] = Math.min(best[k], Number(process.hrtime.bigint() - t0));
        }
      const ratio = best.near / best.far;
      expect(ratio, `${name}: near miss ${best.near} ns, far miss ${best.far} ns`).toBeGreaterThan(0.67);
      expect(ratio, `${name}: near miss ${best.near} ns, far miss ${best.far} ns`).toBeLessThan(1.5);
    }
  });
});

describe('the token never reaches the log of raas serve', () => {
  it('redacts every spelling of a sign-in link the server accepts', async () => {
    const token = `LOGSECRET${hex(10)}`;
    const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--token-env', 'RT_LOG_TOKEN', '--log-level', 'info'], {
      env: { ...process.env, RT_LOG_TOKEN: token },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (c: Buffer) => {
      log += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      log += c.toString();
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const t = setInterval(() => {
          const m = /raas serve listening on (http:\/\/\S+)/.exec(log);
          if (m) {
            clearInterval(t);
            resolve(m[1]!);
          }
        }, 50);
        child.on('exit', (code) => reject(new Error(`raas serve exited ${code}: ${log}`)));
      });
      const signedIn: string[] = [];
      for (const p of [
        `/ui?token=${token}`,
        `/ui/?a=1&token=${token}`,
        `/ui?%74oken=${token}`,
        `/ui?tok%65n=${token}`,
        `/ui?%74%6f%6b%65%6e=${token}`,
      ]) {
        const r = await rawGet(url, p);
        if (r.headers['set-cookie']) signedIn.push(p);
      }
      // The links the server signs in with are exactly those the test means to check.
      expect(signedIn.length).toBeGreaterThanOrEqual(2);
      await sleep(300);
      const lines = log.split('\n').filter((l) => l.includes(token));
      expect(lines, `links that signed in: ${signedIn.join(', ')}`).toEqual([]);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// GET /events
// ---------------------------------------------------------------------------------------------

describe('GET /events under abuse', () => {
  const ADMIN = `ev-admin-${hex(8)}`;
  const A = `ev-tenant-a-${hex(8)}`;
  let srv: RolloutServer;
  beforeAll(async () => {
    srv = await startRolloutServer({ port: 0, log_level: 'silent', token: ADMIN, tenants: [{ name: 'a', token: A, backends: [] }] });
  });
  afterAll(async () => srv?.close());

  /** Opens a stream and returns what it sent within `ms`, or up to its first event or reset frame. */
  const head = (pathQ: string, headers: Record<string, string>, ms = 400): Promise<{ status: number; text: string }> =>
    new Promise((resolve, reject) => {
      const req = http.get(`${srv.url}${pathQ}`, { headers }, (res) => {
        let text = '';
        const done = () => {
          clearTimeout(t);
          req.destroy();
          resolve({ status: res.statusCode ?? 0, text });
        };
        const t = setTimeout(done, ms);
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
          if (/\n(id|event): /.test(text) && text.endsWith('\n\n')) done();
        });
        res.on('end', done);
      });
      req.on('error', reject);
    });

  it('answers hostile resume ids with a reset (or the events after them), never an error, a hang or a crash', async () => {
    const ids = [
      '-1',
      '1e400',
      'NaN',
      'Infinity',
      '0x10',
      '9007199254740993',
      '99999999999999999999999999999999',
      '9'.repeat(8000),
      '1.5',
      ' 0',
      '0,1',
      '__proto__',
      '%00',
    ];
    for (const id of ids) {
      const viaHeader = await head('/events', { ...bearer(A), 'last-event-id': id });
      expect(viaHeader.status, id).toBe(200);
      expect(viaHeader.text, id).toMatch(/^retry: 2000\n\n/);
      if (id !== ' 0') expect(viaHeader.text, id).toContain('event: reset\ndata: {"reason":"unknown_id"');
      const viaQuery = await head(`/events?last_event_id=${encodeURIComponent(id)}`, bearer(A));
      expect(viaQuery.status, id).toBe(200);
    }
    const t0 = performance.now();
    expect((await fetch(`${srv.url}/health`)).status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(1000);
  });

  it('refuses unknown event types with a JSON error naming the field, whatever their spelling', async () => {
    for (const q of ['types=bogus', 'types=job,bogus', 'types=__proto__', 'types=constructor', 'types=stats', 'types=job%00']) {
      const r = await fetch(`${srv.url}/events?${q}`, { headers: bearer(A) });
      expect(r.status, q).toBe(400);
      const body = (await r.json()) as { error: { code: string; message: string } };
      expect(body.error.code, q).toBe('bad_request');
      expect(body.error.message, q).toMatch(/^types: /);
    }
  });

  // Was a defect: no limit on event streams, each never-reading one held ~14 MiB (4 MiB of bytes, kept
  // as strings and buffers). Now at most console.max_streams (8) per token, each cut off past 1 MiB unread.
  it("bounds what one tenant's never-reading event streams cost the server", async () => {
    // The tenant fills the event log with large events of its own (backend changes), then opens
    // streams that resume from the start and never read a byte.
    const bigAddress = (i: number) => `http://127.0.0.1:9/${'p'.repeat(1900)}${i}`;
    const post = (route: string, body: unknown) =>
      fetch(`${srv.url}${route}`, {
        method: 'POST',
        headers: { ...bearer(A), 'content-type': 'application/json' },
        body: JSON.stringify(body),
      }).then((r) => r.arrayBuffer());
    for (let i = 0; i < 2500; i++) {
      await post('/add_llm_server', { address: bigAddress(i), probe: false, weight_version: 'w'.repeat(256) });
      await post('/remove_llm_server', { address: bigAddress(i) });
    }
    const mem = (): number => {
      const m = process.memoryUsage();
      return m.heapUsed + m.arrayBuffers;
    };
    const before = mem();
    const streams: http.ClientRequest[] = [];
    let accepted = 0;
    try {
      for (let k = 0; k < 40; k++) {
        const status = await new Promise<number>((resolve, reject) => {
          const req = http.get(`${srv.url}/events?last_event_id=0`, { headers: bearer(A) }, (res) => {
            res.pause();
            resolve(res.statusCode ?? 0);
          });
          req.on('error', reject);
          streams.push(req);
        });
        if (status === 200) accepted++;
      }
      await sleep(2000);
      expect(accepted).toBe(8);
      const refused = await fetch(`${srv.url}/events`, { headers: bearer(A) });
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('too_many_streams');
      // The cap is per token: the admin still opens one.
      const ac = new AbortController();
      const admin = await fetch(`${srv.url}/events`, { headers: bearer(ADMIN), signal: ac.signal });
      expect(admin.status).toBe(200);
      ac.abort();
      const grown = (mem() - before) / 2 ** 20;
      expect(grown, `${accepted} never-reading streams of one tenant cost the server ${grown.toFixed(0)} MiB`).toBeLessThan(64);
    } finally {
      for (const s of streams) s.destroy();
    }
    expect((await fetch(`${srv.url}/health`)).status).toBe(200);
  }, 120_000);
});
