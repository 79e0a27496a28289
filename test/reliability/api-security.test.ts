// API security: a non-loopback bind without a token is refused unless --insecure; wrong or missing
// tokens get 401 on every route but /health; no route, error or result reveals the token, the
// server's environment or its config path; /status and /metrics carry no secrets.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRolloutServer } from '../../src/server/index.js';
import { observe } from './helpers/observe.js';
import { alive } from '../helpers/procs.js';
import { HANDLERS, rawRequest, request, runCli, serveProcess, tempDir, type Answer, type ServeProcess } from './helpers/servers.js';

const TOKEN = 'rel-api-token-9d7e1c55aa';
const ENV_SECRET = 'rel-env-secret-31c8f0e2';

/** A non-loopback address of this machine (or 0.0.0.0). */
function externalAddress(): string {
  for (const list of Object.values(os.networkInterfaces()))
    for (const i of list ?? []) if (i.family === 'IPv4' && !i.internal) return i.address;
  return '0.0.0.0';
}

describe('API security: binding', () => {
  it('a non-loopback bind without a token is refused (library and CLI); --insecure or --token allow it', async () => {
    const ext = externalAddress();
    const seen: string[] = [];
    for (const host of ['0.0.0.0', '::', ext]) {
      const err = await startRolloutServer({ host, port: 0, log_level: 'silent' }).then(
        async (s) => {
          await s.close();
          return undefined;
        },
        (e: Error & { code?: string }) => e,
      );
      expect(err?.code, host).toBe('config_invalid');
      expect(err?.message).toMatch(/--token/);
      expect(err?.message).toMatch(/--insecure/);
      seen.push(`startRolloutServer({host: "${host}"}) → ${err?.code}`);
    }
    const cli = await runCli(['serve', '--host', '0.0.0.0', '--port', '0']);
    expect(cli.code).not.toBe(0);
    expect(cli.output).toMatch(/--token/);
    seen.push(
      `raas serve --host 0.0.0.0 → exit ${cli.code}: "${cli.output
        .trim()
        .split('\n')
        .find((l) => /token/.test(l))
        ?.slice(0, 200)}"`,
    );
    // Loopback binds need nothing; --token (library) and --insecure (CLI) open non-loopback binds.
    for (const cfg of [{ host: '127.0.0.2' }, { host: '0.0.0.0', token: TOKEN }]) {
      const s = await startRolloutServer({ ...cfg, port: 0, log_level: 'silent' });
      expect((await request(`${s.url.replace('0.0.0.0', '127.0.0.1')}/health`)).status).toBe(200);
      await s.close();
      seen.push(`startRolloutServer(${JSON.stringify(cfg).replace(TOKEN, '<token>')}) → listening`);
    }
    const insecure = await serveProcess(['--host', '0.0.0.0', '--insecure']);
    expect((await request(`${insecure.url.replace('0.0.0.0', '127.0.0.1')}/health`)).status).toBe(200);
    insecure.child.kill('SIGTERM');
    expect((await insecure.exited).code).toBe(0);
    seen.push('raas serve --host 0.0.0.0 --insecure → listening, SIGTERM → exit 0');
    observe({ section: 'api_security', name: 'non-loopback bind without --token', observed: seen.join('; ') });
  }, 180_000);
});

describe('API security: tokens and secrets', () => {
  const dir = tempDir('api');
  const cfg = path.join(dir, 'server.yaml');
  let srv: ServeProcess;

  beforeAll(async () => {
    fs.writeFileSync(
      cfg,
      `token: ${TOKEN}\nlog_level: warn\njournal:\n  dir: ${path.join(dir, 'journal')}\nllm:\n  backends:\n    - address: http://127.0.0.1:9\n`,
    );
    srv = await serveProcess(['--config', cfg, '--handler', HANDLERS], { RAAS_REL_SECRET: ENV_SECRET, OPENAI_API_KEY: ENV_SECRET });
  }, 90_000);
  afterAll(async () => {
    if (srv) {
      srv.child.kill('SIGTERM');
      expect((await srv.exited).code).toBe(0);
      expect(alive(srv.pid)).toBe(false);
    }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const routes: Array<[string, string, unknown?]> = [
    ['POST', '/process', { instance: { data_source: 'chat' } }],
    ['POST', '/cancel', { job_id: 'x' }],
    ['POST', '/add_llm_server', { address: 'http://127.0.0.1:1' }],
    ['POST', '/remove_llm_server', { address: 'http://127.0.0.1:9' }],
    ['POST', '/clear_llm_server'],
    ['POST', '/start'],
    ['POST', '/stop'],
    ['GET', '/status'],
    ['GET', '/metrics'],
    ['GET', '/jobs/x'],
    ['GET', '/nope'],
  ];
  const call = (method: string, route: string, body: unknown, auth?: string): Promise<Answer> =>
    request(`${srv.url}${route}`, {
      method,
      body: body === undefined ? undefined : JSON.stringify(body),
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(auth === undefined ? {} : { authorization: auth }),
      },
    });

  it('missing, wrong, truncated, extended or non-Bearer tokens get 401 on every route but /health', async () => {
    const wrong: Array<[string, string | undefined]> = [
      ['missing', undefined],
      ['empty bearer', 'Bearer '],
      ['wrong', 'Bearer not-the-token-at-all'],
      ['truncated', `Bearer ${TOKEN.slice(0, -1)}`],
      ['extended', `Bearer ${TOKEN}x`],
      ['Basic scheme', `Basic ${Buffer.from(`user:${TOKEN}`).toString('base64')}`],
      ['token without scheme', TOKEN],
    ];
    let n = 0;
    for (const [method, route, body] of routes) {
      for (const [label, auth] of wrong) {
        const a = await call(method, route, body, auth);
        n++;
        expect({ route, label, status: a.status }).toEqual({ route, label, status: 401 });
        expect(a.body.error.code).toBe('unauthorized');
        expect(a.body.detail).toBe(a.body.error.message);
        expect(a.headers.get('www-authenticate')).toMatch(/Bearer/);
      }
    }
    // The query string is not a place for the token.
    expect((await request(`${srv.url}/status?token=${TOKEN}`)).status).toBe(401);
    expect((await request(`${srv.url}/health`)).status).toBe(200);
    // Nothing the unauthenticated calls sent took effect: the server still runs with its one backend.
    const st = await call('GET', '/status', undefined, `Bearer ${TOKEN}`);
    expect(st.body).toMatchObject({ status: 'running', backends: [{ address: 'http://127.0.0.1:9' }] });
    observe({
      section: 'api_security',
      name: 'wrong or missing tokens',
      observed: `${n} unauthenticated calls over ${routes.length} routes × ${wrong.length} token variants (missing, empty, wrong, truncated, extended, Basic, no scheme) → 401 unauthorized with WWW-Authenticate: Bearer; ?token= in the query → 401; GET /health open; state unchanged (still running, backends unchanged)`,
      figures: { inputs: n + 1 },
    });
  });

  it('no route, error or result reveals the token, the environment or the config path', async () => {
    const auth = `Bearer ${TOKEN}`;
    const bodies: string[] = [];
    const collect = (a: Answer) => bodies.push(a.text, JSON.stringify([...a.headers]));
    for (const route of ['/status', '/metrics', '/health', '/jobs/never-seen', '/nope', '/jobs/..%2f..%2fetc%2fpasswd'])
      collect(await call('GET', route, undefined, auth));
    collect(await call('POST', '/process', { instance: { data_source: 'nope' } }, auth));
    collect(await call('POST', '/process', { instance: { data_source: 'chat', turns: -1 } }, auth));
    const failedRun = await call('POST', '/process', { job_id: 'sec-1', instance: { data_source: 'rel-faulty', throw_in: 'run' } }, auth);
    collect(failedRun);
    collect(await call('POST', '/process', { job_id: 'sec-2', instance: { data_source: 'chat' } }, auth)); // the backend is unreachable: a run failure
    collect(await call('GET', '/jobs/sec-2', undefined, auth));
    collect(await call('POST', '/add_llm_server', { address: 12 }, auth));
    collect(
      await request(`${srv.url}/process`, {
        method: 'POST',
        body: '{bad json',
        headers: { 'content-type': 'application/json', authorization: auth },
      }),
    );
    collect(await rawRequest(srv.url, 'GET', '/status/../../proc/self/environ', { authorization: auth }));
    collect(await call('GET', '/status', undefined, 'Bearer wrong-token')); // the 401 itself
    const all = bodies.join('\n');
    for (const secret of [TOKEN, ENV_SECRET, cfg, dir, 'RAAS_REL_SECRET', 'OPENAI_API_KEY'])
      expect(all.includes(secret), secret).toBe(false);
    // The failed job's error is data, without a stack trace that would name host paths.
    expect(failedRun.body.critical_error).toBe('run');
    expect(String(failedRun.body.error)).not.toMatch(/\n\s+at /);
    observe({
      section: 'api_security',
      name: '/status, /metrics, errors and results carry no secrets',
      observed: `${bodies.length / 2} answers (/status, /metrics, /health, 400/401/404/405 errors, two failed jobs and GET /jobs/:id) searched for the token, two secret environment values, their variable names and the config path: none found`,
    });
  });
});
