// Bad input over every route of the rollout server: fast-check arbitraries (fuzz/arbitraries.ts)
// plus the raw classes a JSON value cannot express (not JSON, wrong media type, invalid UTF-8, deep
// nesting, a 100 MB body, NaN). Each answer is a 4xx JSON error of the documented shape
// `{error: {code, message}, detail}`; the server stays up; no sandbox starts (the lazily prepared
// sandbox root is never even created) and no job is left.
import fs from 'node:fs';
import http from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/protocol/errors.js';
import { AddLlmServerRequest, RemoveLlmServerRequest } from '../../src/protocol/llm.js';
import { CancelRequest } from '../../src/protocol/process.js';
import type { RolloutServer } from '../../src/server/index.js';
import {
  badAddBodies,
  badCancelBodies,
  badJobPaths,
  badProcessBodies,
  badRemoveBodies,
  deepNesting,
  invalidFor,
  type Bad,
} from './fuzz/arbitraries.js';
import { currentTest, observe } from './helpers/observe.js';
import { withCommand } from '../helpers/procs.js';
import { inProcessServer, internals, postJson, rawRequest, request, sandboxRoot, type Answer } from './helpers/servers.js';

const NO_LLM = 'http://127.0.0.1:9';
const RUNS = Number(process.env.RAAS_FUZZ_RUNS ?? 60);

/** The documented error shape, a 4xx status, a registered code. */
function expectApiError(a: Answer, where: string): void {
  const ctx = `${where}: ${a.status} ${a.text.slice(0, 300)}`;
  expect(a.status, ctx).toBeGreaterThanOrEqual(400);
  expect(a.status, ctx).toBeLessThan(500);
  expect(a.headers.get('content-type') ?? '', ctx).toMatch(/application\/json/);
  expect(a.body?.error?.code, ctx).toBeTypeOf('string');
  expect(Object.keys(ERROR_CODES), ctx).toContain(a.body.error.code);
  expect(a.body.error.message, ctx).toBeTypeOf('string');
  expect(a.body.error.message.length, ctx).toBeGreaterThan(0);
  expect(a.body.detail, ctx).toBe(a.body.error.message);
}

/** The same checks as expectApiError, as a boolean (for the report's per-class verdict). */
function conforms(a: Answer): boolean {
  return (
    a.status >= 400 &&
    a.status < 500 &&
    /application\/json/.test(a.headers.get('content-type') ?? '') &&
    typeof a.body?.error?.code === 'string' &&
    Object.keys(ERROR_CODES).includes(a.body.error.code) &&
    typeof a.body.error.message === 'string' &&
    a.body.error.message.length > 0 &&
    a.body.detail === a.body.error.message
  );
}

describe('bad input over every route', () => {
  const root = sandboxRoot('badin');
  let server: RolloutServer;
  /** Per class: inputs tried, and the status/code answers seen. */
  const tried = new Map<string, { n: number; answers: Set<string>; bad: number; test?: string }>();
  const count = (kind: string, a: Answer) => {
    const t = tried.get(kind) ?? { n: 0, answers: new Set<string>(), bad: 0, test: currentTest() };
    t.n++;
    t.answers.add(`${a.status} ${a.body?.error?.code}`);
    if (!conforms(a)) t.bad++;
    tried.set(kind, t);
  };

  beforeAll(async () => {
    server = await inProcessServer({
      sandbox: { runtime: 'bwrap', root },
      llm: { backends: [{ address: NO_LLM }] },
      body_limit_bytes: 8 * 1024 * 1024,
    });
  });
  afterAll(async () => {
    await server?.close();
    fs.rmSync(root, { recursive: true, force: true });
    for (const [kind, t] of [...tried].sort()) {
      observe({
        section: 'bad_input',
        name: kind,
        observed: `${t.n} inputs → ${[...t.answers].sort().join(', ')}${t.bad ? ` (${t.bad} not in the documented error shape)` : ''}`,
        figures: { inputs: t.n, nonconforming: t.bad },
        test: t.test,
      });
    }
  });

  const fuzzPost = async (route: string, arb: fc.Arbitrary<Bad>, schema?: Parameters<typeof invalidFor>[0]) => {
    await fc.assert(
      fc.asyncProperty(arb, async (bad) => {
        if (schema) fc.pre(invalidFor(schema, bad.value) || bad.kind.includes('(404)'));
        const a = await postJson(`${server.url}${route}`, bad.value);
        count(bad.kind, a);
        expectApiError(a, `${route} ${bad.kind} ${JSON.stringify(bad.value).slice(0, 200)}`);
      }),
      { numRuns: RUNS, seed: 7 },
    );
  };

  it('POST /process: invalid bodies of every class', async () => {
    await fuzzPost('/process', badProcessBodies(['chat', 'rel-faulty', 'rel-sandbox', 'math', 'code', 'swe']));
  }, 60_000);
  it('POST /cancel: invalid bodies and unknown ids', () => fuzzPost('/cancel', badCancelBodies, CancelRequest), 60_000);
  it('POST /add_llm_server: invalid bodies (none registers a backend)', async () => {
    await fuzzPost('/add_llm_server', badAddBodies, AddLlmServerRequest);
    expect(server.pool.list().map((b) => b.address)).toEqual([NO_LLM]);
  }, 60_000);
  it('POST /remove_llm_server: invalid bodies', () => fuzzPost('/remove_llm_server', badRemoveBodies, RemoveLlmServerRequest), 60_000);

  it('GET /jobs/:id: traversal, bad characters, unknown ids', async () => {
    await fc.assert(
      fc.asyncProperty(badJobPaths, async (bad) => {
        const a = await request(`${server.url}/jobs/${bad.value}`);
        count(bad.kind, a);
        expectApiError(a, `/jobs/${bad.value}`);
      }),
      { numRuns: RUNS, seed: 7 },
    );
  }, 60_000);

  const rawCases: Array<{ kind: string; routes: string[]; body: () => Buffer | string; type?: string; expect?: number }> = [
    {
      kind: 'raw: not JSON',
      routes: ['/process', '/cancel', '/add_llm_server', '/remove_llm_server', '/clear_llm_server', '/start', '/stop'],
      body: () => '{"instance": {"data_source": "chat",',
    },
    {
      kind: 'raw: NaN / Infinity literals',
      routes: ['/process', '/cancel', '/stop'],
      body: () => '{"instance": {"data_source": "chat", "turns": NaN}, "timeout_s": Infinity}',
    },
    {
      kind: 'raw: wrong media type (text/plain, form)',
      routes: ['/process', '/cancel', '/add_llm_server', '/stop', '/start', '/clear_llm_server'],
      body: () => 'instance=chat',
      type: 'application/x-www-form-urlencoded',
      expect: 415,
    },
    {
      kind: 'raw: invalid UTF-8 inside a JSON string',
      routes: ['/process', '/cancel', '/add_llm_server'],
      body: () =>
        Buffer.concat([Buffer.from('{"instance": {"data_source": "'), Buffer.from([0xff, 0xfe, 0xc3, 0x28, 0xa0]), Buffer.from('"}}')]),
    },
    {
      kind: 'raw: huge string field (2 MB data_source, 3 MB job_id)',
      routes: ['/process'],
      body: () => JSON.stringify({ instance: { data_source: 'x'.repeat(2_000_000) }, job_id: 'j'.repeat(3_000_000) }),
    },
    {
      kind: 'raw: body over body_limit_bytes (9 MB)',
      routes: ['/process', '/cancel', '/stop'],
      body: () => JSON.stringify({ instance: { data_source: 'chat', pad: 'p'.repeat(9 * 1024 * 1024) } }),
      expect: 413,
    },
  ];
  for (const c of rawCases) {
    it(c.kind, async () => {
      for (const route of c.routes) {
        const a = await request(`${server.url}${route}`, {
          method: 'POST',
          body: c.body(),
          headers: { 'content-type': c.type ?? 'application/json' },
        });
        count(c.kind, a);
        expectApiError(a, `${route} ${c.kind}`);
        if (c.expect) expect(a.status).toBe(c.expect);
      }
      // /stop and /start saw only invalid bodies: intake is still open.
      expect((await request(`${server.url}/status`)).body.status).toBe('running');
    });
  }

  it('raw: deep nesting (up to 200,000 levels) as the body', async () => {
    await fc.assert(
      fc.asyncProperty(deepNesting, async (text) => {
        const a = await request(`${server.url}/process`, { method: 'POST', body: text, headers: { 'content-type': 'application/json' } });
        count('raw: deep nesting as the body', a);
        expectApiError(a, `deep nesting (${text.length} bytes)`);
      }),
      { numRuns: 6, seed: 7 },
    );
  }, 30_000);

  it('raw: deep nesting inside a pass-through instance field is refused, not a 500 or a crash', async () => {
    for (const depth of [5_000, 50_000]) {
      const text = `{"instance": {"data_source": "rel-faulty", "deep": ${'['.repeat(depth)}${']'.repeat(depth)}}}`;
      const a = await request(`${server.url}/process`, { method: 'POST', body: text, headers: { 'content-type': 'application/json' } });
      count('raw: deep nesting inside an instance field', a);
      expectApiError(a, `nested instance field, depth ${depth}`);
    }
  });

  it('a 100 MB body is refused with 413 before it is read, and the server stays up', async () => {
    // Announce 100 MB, send only the first MiB, and wait: the 413 must come from Content-Length alone.
    const u = new URL(server.url);
    const t0 = performance.now();
    const a = await new Promise<Answer>((resolve, reject) => {
      const req = http.request(
        {
          host: u.hostname,
          port: u.port,
          method: 'POST',
          path: '/process',
          agent: false,
          headers: { 'content-type': 'application/json', 'content-length': String(100 * 1024 * 1024) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            resolve({
              status: res.statusCode ?? 0,
              headers: new Headers(res.headers as Record<string, string>),
              text,
              body: JSON.parse(text),
            });
            req.destroy();
          });
        },
      );
      req.on('error', (e) => reject(e));
      const timer = setTimeout(() => reject(new Error('no answer within 20 s: the server waits for the whole 100 MB body')), 20_000);
      req.on('close', () => clearTimeout(timer));
      req.write(Buffer.alloc(1024 * 1024, 0x20));
    });
    const s = (performance.now() - t0) / 1000;
    count('raw: 100 MB body (Content-Length 100 MiB, 1 MiB sent)', a);
    expect(a.status).toBe(413);
    expectApiError(a, '100 MB body');
    expect((await request(`${server.url}/health`)).status).toBe(200);
    expect(s).toBeLessThan(20);
  }, 30_000);

  it('unknown routes and wrong methods get 404 / 405 in the same shape', async () => {
    const cases: Array<[string, string, number]> = [
      ['GET', '/process', 405],
      ['PUT', '/cancel', 405],
      ['DELETE', '/status', 405],
      ['POST', '/health', 405],
      ['POST', '/jobs/x', 405],
      ['GET', '/admin', 404],
      ['GET', '/../../etc/passwd', 404],
      ['GET', '/%2e%2e/%2e%2e/etc/shadow', 404],
      ['POST', '/process/../stop', 404],
      ['GET', '/.env', 404],
      // An encoded "../../etc/passwd" is one path segment: a job id like any other (never a path), unknown here.
      ['GET', '/jobs/../status', 404],
      ['GET', '/jobs/%2e%2e%2f%2e%2e%2fetc%2fpasswd', 404],
      // Malformed percent-encoding: the router rejects these before any handler runs.
      ['GET', '/jobs/%zz', 400],
      ['GET', '/%E0%A4%A', 400],
      ['POST', '/cancel%', 400],
    ];
    for (const [method, path, status] of cases) {
      // Sent raw: the server, not the client's URL parser, must deal with the dot segments.
      const a = await rawRequest(server.url, method, path);
      count('routes: unknown path, wrong method, dot segments', a);
      expect({ method, path, status: a.status }).toEqual({ method, path, status });
      expectApiError(a, `${method} ${path}`);
    }
    expect((await request(`${server.url}/status`)).body.status).toBe('running');
  });

  it('shell metacharacters in task fields stay inert data', async () => {
    const marker = `/tmp/raas-pwned-${process.pid}`;
    const a = await postJson(`${server.url}/process`, { instance: { data_source: `$(touch ${marker})` } });
    count('process: shell metacharacters in data_source', a);
    expectApiError(a, 'metachar data_source');
    // Any string is a job id, as in ProRL: the id is data, refused here only for its unknown data_source.
    const b = await postJson(`${server.url}/process`, { job_id: `x;touch${marker}`, instance: { data_source: `$(touch ${marker})` } });
    expectApiError(b, 'metachar job_id');
    expect((await postJson(`${server.url}/cancel`, { job_id: `$(touch ${marker})` })).body).toMatchObject({
      cancelled: false,
      state: 'unknown',
    });
    expect(fs.existsSync(marker)).toBe(false);
  });

  it('afterwards: the server is up, holds no job, and no sandbox ever started', async () => {
    expect((await request(`${server.url}/health`)).status).toBe(200);
    const st = (await request(`${server.url}/status`)).body;
    expect(st).toMatchObject({ status: 'running', jobs: 0, pending_jobs: 0, running: true, in_stage: 0 });
    expect(internals(server).liveJobs).toBe(0);
    // The sandbox runtime prepares lazily on its first open(): its root does not exist at all.
    expect(fs.existsSync(root)).toBe(false);
    expect(withCommand(root)).toEqual([]);
    const total = [...tried.values()].reduce((n, t) => n + t.n, 0);
    observe({
      section: 'bad_input',
      name: 'all routes: server state afterwards',
      observed: `${total} bad inputs in ${tried.size} classes; /health 200, /status running with 0 jobs; sandbox root never created (no sandbox started), no bwrap process; backends unchanged`,
      figures: { bad_inputs: total, sandboxes_started: 0 },
    });
  });
});
