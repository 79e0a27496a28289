import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RaasError } from '../../protocol/errors.js';
import type { ServerConfig } from '../../protocol/config-server.js';
import { JobId, type JobState, type Result } from '../../protocol/process.js';
import { parseOrThrow } from '../../protocol/validation.js';
import type { StatusResponse } from '../../protocol/status.js';
import type { Clock } from '../../util/clock.js';
import type { Tokenizer } from '../../tokens/tokenizer.js';
import { WEB_DIR, registerWeb } from '../../ui/assets.js';
import type { BackendRow, JobDetail, Overview, UiInfo } from '../../ui/model.js';
import { streamEvents } from '../../ui/sse.js';
import { trajectoryView, type TrajectorySource } from '../../ui/trajectory.js';
import { RAAS_VERSION } from '../../version.js';
import { gateOf } from '../llm/pool.js';
import type { Pipeline } from '../pipeline/pipeline.js';
import type { Access } from '../tenants/access.js';
import type { TenantSet } from '../tenants/tenants.js';
import type { EngineStatsReader } from './engine-stats.js';
import type { ConsoleFeed } from './feed.js';
import { sees, viewerOf, type Viewer } from './scope.js';
import { SESSION_COOKIE, UiSessions, cookieValue, sameOrigin } from './session.js';

/** What the console's routes read. */
export interface ConsoleDeps {
  config: ServerConfig;
  pipeline: Pipeline;
  tenants: TenantSet;
  /** What a request may reach (its principal), as the API's routes ask it. */
  access: (req: FastifyRequest) => Access;
  feed: ConsoleFeed;
  engine: EngineStatsReader;
  tokenizer: () => Tokenizer;
  clock: Clock;
  wallNow: () => number;
  /** Console logins (only when the server has a token). */
  sessions?: UiSessions;
  /** The server's token check, for the login form. */
  check?: (authorization: string | undefined) => boolean;
}

/** The event names a client may ask for with `?types=`. */
const EVENT_TYPES = new Set(['job', 'backend']);

/** The console's live figures for a viewer. */
function overview(d: ConsoleDeps, viewer: Viewer, startedAt: number): Overview {
  // status() is typed without the backends; the fields read here are StatusResponse's.
  const st = d.pipeline.status(viewer.scope) as unknown as StatusResponse;
  d.engine.touch();
  const shown = viewer.scope ? [viewer.scope] : d.tenants.list;
  const backends: BackendRow[] = shown.flatMap((t) =>
    t.pool.list().map((b) => {
      const full = t.pool.get(b.address);
      return {
        ...b,
        ...(d.tenants.multi ? { tenant: t.name } : {}),
        failures: full?.failures ?? 0,
        last_error: full?.lastError ?? null,
        ...d.engine.of(b.address),
      };
    }),
  );
  const gates = shown.map((t) => gateOf(t.pool).status());
  const tp = viewer.all || viewer.tenant === undefined ? d.feed.throughput : d.feed.throughputOf(viewer.tenant);
  const stage = (s: 'init' | 'run' | 'eval') => ({ queued: st.queues[s], busy: st.workers[s].busy, size: st.workers[s].size });
  return {
    status: st.status,
    version: RAAS_VERSION,
    uptime_s: (d.clock.now() - startedAt) / 1000,
    stages: { init: stage('init'), run: stage('run'), eval: stage('eval') },
    backends,
    generation: gates.length === 1 ? gates[0] : { paused: gates.some((g) => g.paused) },
    live_jobs: d.feed.jobs.liveCount,
    ...(st.tenants ? { tenants: st.tenants } : st.tenant ? { tenants: [st.tenant] } : {}),
    by_state: d.feed.jobs.counts((r) => sees(viewer, r)),
    throughput: { bucket_s: tp.bucketS, buckets: tp.series(d.wallNow()) },
    totals: { ...tp.totals },
    last_event_id: d.feed.log.lastId,
  };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/**
 * `GET /events` (API): the server's job and backend events as server-sent events, resumable with
 * Last-Event-ID. With `?stats=1` the stream also carries the console's figures every second
 * (`event: stats`, no id).
 */
export function registerEvents(app: FastifyInstance, d: ConsoleDeps): void {
  const startedAt = d.clock.now();
  // Open streams per principal: each one that stops reading holds up to its backlog of memory.
  const open = new Map<string, number>();
  const max = d.config.console.max_streams;
  app.get('/events', (req, reply) => {
    const q = req.query as Record<string, unknown>;
    const viewer = viewerOf(d.access(req));
    const types = str(q.types)?.split(',');
    const bad = types?.find((t) => !EVENT_TYPES.has(t));
    if (bad !== undefined)
      throw new RaasError('bad_request', `types: ${JSON.stringify(bad)} is not an event type: use job, backend or both`);
    const wanted = new Set(types ?? EVENT_TYPES);
    const key = viewer.tenant !== undefined ? `tenant:${viewer.tenant}` : viewer.all ? 'admin' : 'anonymous';
    const held = open.get(key) ?? 0;
    if (held >= max)
      throw new RaasError(
        'too_many_streams',
        `GET /events: this token already holds ${held} open event streams (console.max_streams: ${max}); close one or raise console.max_streams`,
      );
    open.set(key, held + 1);
    reply.raw.once('close', () => {
      const n = (open.get(key) ?? 1) - 1;
      if (n > 0) open.set(key, n);
      else open.delete(key);
    });
    streamEvents(req, reply, {
      maxBacklogBytes: 1024 * 1024,
      log: d.feed.log,
      filter: (e) => wanted.has(e.name) && sees(viewer, e.data),
      ...(q.stats === '1' || q.stats === 'true'
        ? { tick: { everyMs: 1000, frame: () => ({ name: 'stats', data: overview(d, viewer, startedAt) }) } }
        : {}),
    });
  });
}

/** The console's pages and their JSON under `/ui` (console.enabled). */
export async function registerConsole(app: FastifyInstance, d: ConsoleDeps): Promise<void> {
  const startedAt = d.clock.now();
  const sessions = d.sessions;
  await registerWeb(app, {
    // A `/ui?token=` link signs in (the app's hook checked the token) and is answered with the bare URL,
    // so the token leaves the address bar and the history.
    beforePage: (req, reply) => {
      const token = str((req.query as Record<string, unknown>).token);
      if (token === undefined) return undefined;
      if (sessions && d.check?.(`Bearer ${token}`)) reply.header('set-cookie', UiSessions.cookie(sessions.create(token), 12 * 3600));
      return reply.redirect('/ui', 303);
    },
  });

  app.get('/ui/api/info', async (): Promise<UiInfo> => ({ mode: 'server', version: RAAS_VERSION, title: `raas serve ${d.config.host}` }));
  app.get('/ui/api/overview', async (req) => overview(d, viewerOf(d.access(req)), startedAt));
  app.get('/ui/api/jobs', async (req) => {
    const q = req.query as Record<string, unknown>;
    const limit = q.limit === undefined ? 200 : Number(q.limit);
    if (!Number.isInteger(limit) || limit < 1 || limit > 10_000)
      throw new RaasError('bad_request', 'limit: send an integer from 1 to 10000');
    const viewer = viewerOf(d.access(req));
    return d.feed.jobs.query({
      state: str(q.state),
      data_source: str(q.data_source),
      critical_error: str(q.critical_error),
      q: str(q.q),
      limit,
      view: (r) => sees(viewer, r),
    });
  });
  app.get('/ui/api/jobs/:id', async (req, reply) => {
    const id = parseOrThrow(JobId, (req.params as { id: string }).id, 'bad_request', 'job_id');
    // Another tenant's job goes on as an unknown id: the pipeline's own not-found answer, word for word.
    const seen = d.feed.jobs.get(id);
    const row = seen && sees(viewerOf(d.access(req)), seen) ? seen : null;
    const got = JSON.parse(await d.pipeline.get(id, d.access(req).scope())) as { job_id: string; state: JobState; result?: Result };
    const detail: JobDetail = {
      job_id: got.job_id,
      state: got.state,
      row,
      trajectory: got.result ? trajectoryView(got.result as unknown as TrajectorySource, d.tokenizer(), { state: got.state }) : null,
    };
    return reply.type('application/json; charset=utf-8').send(JSON.stringify(detail));
  });

  const loginPage = await readFile(path.join(WEB_DIR, 'login.html'), 'utf8');
  const messages = {
    wrong: [401, '<p class="error">That is not the server\'s token.</p>'],
    foreign: [403, '<p class="error">Sign in from this page: another site sent that form.</p>'],
  } as const;
  const sendLogin = (reply: FastifyReply, failed?: keyof typeof messages): FastifyReply =>
    reply
      .code(failed ? messages[failed][0] : 200)
      .type('text/html; charset=utf-8')
      .send(loginPage.replace('<!--message-->', failed ? messages[failed][1] : ''));
  app.get('/ui/login', (_req, reply) => (sessions ? sendLogin(reply) : reply.redirect('/ui', 303)));
  await app.register(async (scope) => {
    // The login form posts application/x-www-form-urlencoded, which only this route reads.
    scope.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: 8192 }, (_req, body, done) =>
      done(null, new URLSearchParams(body as string)),
    );
    scope.post('/ui/login', (req: FastifyRequest, reply) => {
      const token = req.body instanceof URLSearchParams ? (req.body.get('token') ?? '').trim() : '';
      if (!sessions || !d.check) return reply.redirect('/ui', 303);
      // A form another site posts would sign the browser in as whoever that site chose (a tenant of
      // its own, whose console the user would then work in): only the console's own form signs in.
      if (req.headers.origin !== undefined && !sameOrigin(req)) return sendLogin(reply, 'foreign');
      if (!d.check(`Bearer ${token}`)) return sendLogin(reply, 'wrong');
      return reply.header('set-cookie', UiSessions.cookie(sessions.create(token), 12 * 3600)).redirect('/ui', 303);
    });
  });
  app.post('/ui/logout', (req, reply) => {
    sessions?.end(cookieValue(req.headers.cookie, SESSION_COOKIE));
    return reply.header('set-cookie', UiSessions.cookie('', 0)).send({ status: 'ok' });
  });
}
