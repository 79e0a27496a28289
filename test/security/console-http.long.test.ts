// Red team against the console's HTTP surface, without a browser: the headers that keep hostile
// text from running (CSP, nosniff, no framing), the static routes against path traversal,
// `raas view` (loopback by default, no foreign Host: DNS rebinding, nothing outside its run
// directory through a planted link), sessions (fixation, sign-in CSRF, one tenant signing everyone
// out), the token (never in the log, compared in constant time), GET /events (hostile resume ids and
// filters, never-reading clients), and one tenant reading another's figures through the console.
// The browser-side attacks (script in rollout text, framing, cross-origin Cancel, the token in the
// browser's history) are in console-browser.long.test.ts.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAuthenticator } from '../../src/server/auth.js';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import type { BackendPool } from '../../src/server/llm/pool.js';
import { TenantSet } from '../../src/server/tenants/tenants.js';
import { startSim, type SimHandle } from '../../src/sim/index.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { startRunViewer, type RunViewer } from '../../src/ui/view-server.js';
import { rawGet } from './console-kit.js';
import { ROOT, hex, sleep } from './helpers.js';

const CLI = path.join(ROOT, 'dist/src/cli.js');
const bearer = (t: string): Record<string, string> => ({ authorization: `Bearer ${t}` });

/** A minimal run directory of raas train's shape (one step, one group of two rollouts). */
function writeRun(dir: string): void {
  fs.mkdirSync(path.join(dir, 'batches'), { recursive: true });
  const rollout = (job: string, reward: number) => ({
    job_id: job,
    trajectory_id: 0,
    reward,
    shaped_reward: reward,
    advantage: reward - 0.5,
    policy_version: 0,
    staleness: 0,
    weight_versions: ['0'],
    finish_reason: 'finish',
    num_turns: 1,
    tokens: { prompt_ids: [1, 2], response_ids: [3, 4], response_mask: [1, 1], logprobs: [-0.1, -0.2] },
  });
  const batch = {
    step: 0,
    policy_version: 0,
    groups: [{ group_id: 'g0', instance_id: 'i0', data_source: 'math', rollouts: [rollout('r0', 1), rollout('r1', 0)] }],
    stats: { submitted: 2, completed: 2, accepted: 1, filtered: 0, cancelled: 0, carried_over: 0, errors: 0, dropped_stale: 0 },
  };
  fs.writeFileSync(path.join(dir, 'batches', 'step-0.json'), JSON.stringify(batch));
  fs.writeFileSync(path.join(dir, 'metrics.jsonl'), `${JSON.stringify({ step: 0, policy_version: 0, wall_s: 1 })}\n`);
  fs.writeFileSync(path.join(dir, 'config.json'), '{}');
}

// ---------------------------------------------------------------------------------------------
// Headers and static routes, on raas serve (with a token) and on raas view
// ---------------------------------------------------------------------------------------------

describe('the pages: headers that keep hostile text inert, and static routes that serve only the pages', () => {
  const TOKEN = `hdr-${hex(8)}`;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-rt-console-'));
  let srv: RolloutServer;
  let view: RunViewer;

  beforeAll(async () => {
    srv = await startRolloutServer({ port: 0, log_level: 'silent', token: TOKEN });
    writeRun(path.join(tmp, 'run'));
    view = await startRunViewer({ dir: path.join(tmp, 'run'), tokenizer: qwen3Tokenizer });
  });
  afterAll(async () => {
    await view?.close();
    await srv?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('sends a CSP that allows no inline or foreign script and no framing, nosniff and no Referer to other origins on every page', async () => {
    const routes: Array<[string, string, Record<string, string>]> = [
      ['serve /ui', `${srv.url}/ui`, bearer(TOKEN)],
      ['serve /ui/login', `${srv.url}/ui/login`, {}],
      ['view /ui', `${view.url}/ui`, {}],
    ];
    for (const [name, url, headers] of routes) {
      const r = await fetch(url, { headers, redirect: 'manual' });
      expect(r.status, name).toBe(200);
      const csp = r.headers.get('content-security-policy') ?? '';
      const directive = (d: string): string | undefined =>
        csp
          .split(';')
          .map((s) => s.trim())
          .find((s) => s.startsWith(`${d} `));
      const script = directive('script-src') ?? directive('default-src');
      expect(script, `${name}: CSP script-src (got ${JSON.stringify(csp)})`).toBeDefined();
      expect(script, name).not.toMatch(/'unsafe-inline'|'unsafe-eval'|\*|https?:|data:/);
      expect(directive('frame-ancestors'), `${name}: CSP frame-ancestors`).toBe("frame-ancestors 'none'");
      expect(directive('object-src') ?? directive('default-src'), name).toMatch(/'none'|'self'/);
      expect(r.headers.get('x-content-type-options'), name).toBe('nosniff');
      expect(r.headers.get('referrer-policy'), name).toBe('same-origin');
    }
    // The pages' modules and the JSON they read are never sniffed into something else.
    for (const url of [
      `${srv.url}/ui/static/app.js`,
      `${srv.url}/ui/vendor/preact.mjs`,
      `${srv.url}/ui/api/overview`,
      `${view.url}/ui/api/run`,
    ]) {
      const r = await fetch(url, { headers: bearer(TOKEN) });
      expect(r.status, url).toBe(200);
      expect(r.headers.get('x-content-type-options'), url).toBe('nosniff');
    }
  });

  // A climbing path is refused by @fastify/static with 403: it answers 404 route_not_found, never a 500 internal error.
  it('serves nothing outside the pages through the static routes, however the path is spelled', async () => {
    // Files one, two and three levels above the pages' folder (src/ui/web or dist/src/ui/web).
    const outside = [/export async function registerWeb|registerWeb\(/, /"name": "raas"/, /^root:.*:0:0:/m];
    const climbs = [
      '../assets.js',
      '../assets.ts',
      '../../../package.json',
      '../../../../package.json',
      '%2e%2e/assets.ts',
      '%2e%2e/%2e%2e/%2e%2e/package.json',
      '..%2fassets.ts',
      '..%2f..%2f..%2fpackage.json',
      '%2e%2e%2f%2e%2e%2f%2e%2e%2fpackage.json',
      '..%5c..%5c..%5cpackage.json',
      '.%2e/.%2e/.%2e/package.json',
      '%252e%252e/%252e%252e/%252e%252e/package.json',
      '....//....//....//package.json',
      '..;/..;/..;/package.json',
      '%c0%ae%c0%ae/%c0%ae%c0%ae/package.json',
      '/etc/passwd',
      '%2fetc%2fpasswd',
      '..%00/package.json',
      'app.js%00.html',
      '../../../../../../../../etc/passwd',
      'tsconfig.json',
      '.%2ftsconfig.json',
    ];
    const found: string[] = [];
    for (const base of [srv.url, view.url])
      for (const prefix of ['/ui/static/', '/ui/vendor/', '/ui/static/./', '/ui//static/'])
        for (const c of climbs) {
          const r = await rawGet(base, `${prefix}${c}`, bearer(TOKEN));
          if (r.status === 200 && outside.some((re) => re.test(r.body))) found.push(`${base}${prefix}${c}`);
          if (r.status === 200 && c.includes('tsconfig')) found.push(`${base}${prefix}${c} (the type-checking config)`);
          expect(r.status, `${prefix}${c}`).toBeLessThan(500);
        }
    expect(found, 'files outside the pages were served').toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// raas view: loopback, Host, and files outside the run directory
// ---------------------------------------------------------------------------------------------

describe('raas view: loopback by default, no foreign Host, nothing outside the run directory', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-rt-view-'));
  const secret = `RTVIEW${hex(10)}`;

  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('binds 127.0.0.1 unless told otherwise, and refuses a non-loopback --host without --insecure', async () => {
    const dir = path.join(tmp, 'bind');
    writeRun(dir);
    const child = spawn(process.execPath, [CLI, 'view', dir, '--port', '0'], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          const m = /raas view: (http:\/\/\S+)\/ui/.exec(out);
          if (m) resolve(m[1]!);
        });
        child.on('exit', (code) => reject(new Error(`raas view exited ${code}: ${out}`)));
      });
      const port = Number(new URL(url).port);
      expect(new URL(url).hostname).toBe('127.0.0.1');
      // The kernel's own table: the socket listens on loopback, not on any address.
      const listening = fs
        .readFileSync('/proc/net/tcp', 'utf8')
        .split('\n')
        .filter((l) => l.includes(`:${port.toString(16).toUpperCase().padStart(4, '0')} `) && / 0A /.test(l))
        .map((l) => l.trim().split(/\s+/)[1]);
      expect(listening).toEqual([`0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`]);
    } finally {
      child.kill('SIGTERM');
    }
    for (const host of ['0.0.0.0', '::', '10.1.2.3']) {
      const r = await new Promise<{ code: number | null; err: string }>((resolve) => {
        const c = spawn(process.execPath, [CLI, 'view', dir, '--port', '0', '--host', host], { stdio: ['ignore', 'ignore', 'pipe'] });
        let err = '';
        c.stderr.on('data', (b: Buffer) => {
          err += b.toString();
        });
        c.on('exit', (code) => resolve({ code, err }));
      });
      expect(r.code, host).not.toBe(0);
      expect(r.err, host).toMatch(/not a loopback address.*--insecure/);
    }
  });

  it('answers no request that names a foreign Host (a DNS-rebinding page reads nothing), and every loopback name', async () => {
    const dir = path.join(tmp, 'rebind');
    writeRun(dir);
    const view = await startRunViewer({ dir, tokenizer: qwen3Tokenizer });
    try {
      const port = new URL(view.url).port;
      for (const host of [
        `attacker.example:${port}`,
        'attacker.example',
        `127.0.0.1.attacker.example:${port}`,
        `localhost.attacker.example:${port}`,
      ]) {
        const r = await rawGet(view.url, '/ui/api/run', { host });
        expect(r.status, `Host: ${host} answered ${r.status}: ${r.body.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
        expect(r.body, host).not.toContain('"steps"');
      }
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `127.0.0.1`]) {
        const r = await rawGet(view.url, '/ui/api/run', { host });
        expect(r.status, `Host: ${host}`).toBe(200);
      }
    } finally {
      await view.close();
    }
  });

  it('reads nothing a link in the run directory points to outside it (summary, metrics, groups, a step file, the batches folder)', async () => {
    const dir = path.join(tmp, 'links');
    writeRun(dir);
    const out = path.join(tmp, 'outside');
    fs.mkdirSync(path.join(out, 'batches'), { recursive: true });
    // Files of the viewer's user that a writer of the run directory wants to read through the view.
    fs.writeFileSync(path.join(out, 'summary.json'), JSON.stringify({ auths: { 'registry.example': { auth: secret } }, steps: [] }));
    fs.writeFileSync(path.join(out, 'metrics.jsonl'), `${JSON.stringify({ step: 0, leaked: secret })}\n`);
    fs.writeFileSync(
      path.join(out, 'groups.jsonl'),
      `${JSON.stringify({ step: 0, group_id: 'x', instance_id: 'x', data_source: 'x', verdict: 'filtered', rewards: [1], rollouts: [{ job_id: 'leak', reward: 1, details: { secret } }] })}\n`,
    );
    const batch = JSON.parse(fs.readFileSync(path.join(dir, 'batches', 'step-0.json'), 'utf8'));
    batch.step = 1;
    batch.groups[0].rollouts[0].details = { secret };
    fs.writeFileSync(path.join(out, 'step-1.json'), JSON.stringify(batch));
    batch.step = 2;
    fs.writeFileSync(path.join(out, 'batches', 'step-2.json'), JSON.stringify(batch));
    fs.rmSync(path.join(dir, 'metrics.jsonl'));
    fs.symlinkSync(path.join(out, 'summary.json'), path.join(dir, 'summary.json'));
    fs.symlinkSync(path.join(out, 'metrics.jsonl'), path.join(dir, 'metrics.jsonl'));
    fs.symlinkSync(path.join(out, 'groups.jsonl'), path.join(dir, 'groups.jsonl'));
    fs.symlinkSync(path.join(out, 'step-1.json'), path.join(dir, 'batches', 'step-1.json'));
    const dir2 = path.join(tmp, 'links2');
    fs.mkdirSync(dir2);
    fs.writeFileSync(path.join(dir2, 'config.json'), '{}');
    fs.symlinkSync(path.join(out, 'batches'), path.join(dir2, 'batches'));

    const answers: string[] = [];
    for (const [d, routes] of [
      [dir, ['/ui/api/run', '/ui/api/run/steps/0', '/ui/api/run/steps/1', '/ui/api/run/rollouts/0/leak', '/ui/api/run/rollouts/1/r0']],
      [dir2, ['/ui/api/run', '/ui/api/run/steps/2', '/ui/api/run/rollouts/2/r0']],
    ] as const) {
      const view = await startRunViewer({ dir: d, tokenizer: qwen3Tokenizer });
      try {
        for (const r of routes) answers.push(`${r}: ${(await rawGet(view.url, r)).body}`);
      } finally {
        await view.close();
      }
    }
    expect(
      answers.filter((a) => a.includes(secret)).map((a) => a.slice(0, 300)),
      'raas view served a file outside its run directory',
    ).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------
// raas serve without a token on loopback: DNS rebinding
// ---------------------------------------------------------------------------------------------

describe('raas serve without a token (loopback): a page of another site reaching it through DNS rebinding', () => {
  let srv: RolloutServer;
  beforeAll(async () => {
    srv = await startRolloutServer({ port: 0, log_level: 'silent' });
  });
  afterAll(async () => srv?.close());

  it('answers no request that names a foreign Host, and every loopback name', async () => {
    const port = new URL(srv.url).port;
    for (const route of ['/status', '/ui/api/overview', '/events?types=backend', '/jobs/x']) {
      const r = await rawGet(srv.url, route, { host: `attacker.example:${port}` });
      expect(r.status, `Host attacker.example ${route}: ${r.status} ${r.body.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
      expect(r.status, route).not.toBe(404);
    }
    // The changes a rebinding page would make: none goes through.
    const before = (await (await fetch(`${srv.url}/status`)).json()) as { status: string };
    const stop = await new Promise<number>((resolve, reject) => {
      const u = new URL(srv.url);
      const req = http.request(
        {
          host: u.hostname,
          port: u.port,
          path: '/pause',
          method: 'POST',
          headers: { host: `attacker.example:${port}`, 'content-type': 'application/json' },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end('{}');
    });
    expect(stop).toBeGreaterThanOrEqual(400);
    expect(((await (await fetch(`${srv.url}/status`)).json()) as { status: string }).status).toBe(before.status);
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
      const r = await rawGet(srv.url, '/status', { host });
      expect(r.status, `Host: ${host}`).toBe(200);
    }
  });
});

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

  // DEFECT: no limit on event streams; each never-reading one holds ~14 MiB (4 MiB of bytes, kept as strings and buffers).
  it.fails("bounds what one tenant's never-reading event streams cost the server", async () => {
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
      const grown = (mem() - before) / 2 ** 20;
      expect(grown, `${accepted} never-reading streams of one tenant cost the server ${grown.toFixed(0)} MiB`).toBeLessThan(64);
    } finally {
      for (const s of streams) s.destroy();
    }
    expect((await fetch(`${srv.url}/health`)).status).toBe(200);
  }, 120_000);
});
