// Red team against the console's HTTP surface, without a browser: the headers that keep hostile
// text from running (CSP, nosniff, no framing), the static routes against path traversal,
// `raas view` (loopback by default, no foreign Host: DNS rebinding, nothing outside its run
// directory through a planted link), and a token-less raas serve against DNS rebinding. Sessions,
// the token and GET /events are in console-sessions.long.test.ts; the browser-side attacks (script
// in rollout text, framing, cross-origin Cancel, the token in the browser's history) in
// console-browser.long.test.ts.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer, type RolloutServer } from '../../src/server/index.js';
import { qwen3Tokenizer } from '../../src/tokens/tokenizer.js';
import { startRunViewer, type RunViewer } from '../../src/ui/view-server.js';
import { rawGet } from './console-kit.js';
import { ROOT, hex } from './helpers.js';

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
  // Made when the tests run (a describe whose tests are all filtered out runs no hook to remove it).
  let tmp: string;
  let srv: RolloutServer;
  let view: RunViewer;

  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-rt-console-'));
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
  // Made when the tests run (a describe whose tests are all filtered out runs no hook to remove it).
  let tmp: string;
  const secret = `RTVIEW${hex(10)}`;

  beforeAll(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'raas-rt-view-'));
  });

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
