import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { TokenizerGuard } from '../tokens/backend-check.js';
import { RaasError } from '../protocol/errors.js';
import { AddLlmServerRequest, ClearLlmServerRequest, RemoveLlmServerRequest, addressProblem, type BackendInfo } from '../protocol/llm.js';
import { PauseRequest, type PauseResponse } from '../protocol/pause.js';
import { WorkersUpdate } from '../protocol/config-workers.js';
import { STAGES } from './pipeline/job.js';
import { CancelRequest, JobId } from '../protocol/process.js';
import { parseOrThrow } from '../protocol/validation.js';
import type { ServerConfig } from '../protocol/config-server.js';
import { makeAuthenticator, type Principal } from './auth.js';
import { registerConsole, registerEvents, type ConsoleDeps } from './console/routes.js';
import { UiSessions, credentialOf, sameOrigin } from './console/session.js';
import { gateOf } from './llm/pool.js';
import { normalizeAddress } from './llm/http.js';
import { probeBackend } from './llm/probe.js';
import { checkUnknownKeys } from './unknown-keys.js';
import type { ServerMetrics } from './metrics.js';
import { stoppedError, type Pipeline } from './pipeline/pipeline.js';
import { Access } from './tenants/access.js';
import { hostHeaderIsLoopback, isLoopbackHost } from '../util/loopback.js';
import { backendIdentity, identityAllowed } from './tenants/backend-identity.js';
import type { Tenant } from './tenants/tenant.js';

export interface AppDeps {
  config: ServerConfig;
  pipeline: Pipeline;
  metrics: ServerMetrics;
  /** Checks a backend's tokenizer against the server's before it is registered (src/tokens/backend-check.ts). */
  tokenizerGuard?: TokenizerGuard;
  /** POST /drain: finish what runs, take nothing new, then leave (the server's drain, which also leaves the registry). */
  drain?: () => void;
  /** Routes added by other parts of the server (the node registry, the worker settings), given the request's access. */
  plugins?: Array<(app: FastifyInstance, access: (req: FastifyRequest) => Access) => void>;
  /** The event feed and what the console reads (GET /events always; /ui when console.enabled). */
  console?: Omit<ConsoleDeps, 'config' | 'pipeline' | 'tenants' | 'access' | 'sessions' | 'check'>;
}

/** Paths the API serves, for telling 405 (wrong method) from 404 (no such route). */
const ROUTES: Record<string, string> = {
  '/process': 'POST',
  '/cancel': 'POST',
  '/add_llm_server': 'POST',
  '/remove_llm_server': 'POST',
  '/clear_llm_server': 'POST',
  '/start': 'POST',
  '/stop': 'POST',
  '/pause': 'POST',
  '/resume': 'POST',
  '/prefetch': 'POST',
  '/drain': 'POST',
  '/workers': 'POST',
  '/status': 'GET',
  '/health': 'GET',
  '/metrics': 'GET',
  '/events': 'GET',
};

/**
 * The request's URL as the log shows it: a console sign-in link's token is not written down, however
 * its name is spelled (the query parser decodes `%74oken` to `token`, and the link still signs in).
 */
function logUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const pairs = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq < 0) return pair;
      let key = pair.slice(0, eq);
      try {
        key = decodeURIComponent(key.replaceAll('+', ' '));
      } catch {
        // malformed percent-encoding: compared as it is
      }
      return key.trim().toLowerCase() === 'token' ? `${pair.slice(0, eq)}=[redacted]` : pair;
    });
  return `${url.slice(0, q + 1)}${pairs.join('&')}`;
}

/** Maps fastify's own errors (body parsing, limits) onto the registry's codes. */
function toRaasError(err: FastifyError | Error, limit: number): RaasError {
  if (err instanceof RaasError) return err;
  const code = (err as FastifyError).code;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return new RaasError('body_too_large', `the body exceeds body_limit_bytes (${limit} bytes): send less, or raise body_limit_bytes`);
  if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE')
    return new RaasError('unsupported_media_type', 'the body must be JSON: send Content-Type: application/json');
  if (code === 'FST_ERR_CTP_INVALID_CONTENT_LENGTH') return new RaasError('bad_request', 'Content-Length does not match the body');
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY') return new RaasError('bad_request', 'the body is empty: send a JSON object');
  // The console's static files: a path that climbs out of them (or names none) is no route.
  if ((err as FastifyError).statusCode === 403 || (err as FastifyError).statusCode === 404)
    return new RaasError('route_not_found', `no such file among the console's pages (${err.message})`);
  if ((err as FastifyError).statusCode === 400 || err instanceof SyntaxError)
    return new RaasError('bad_request', `the body is not valid JSON: ${err.message}`);
  return new RaasError('internal', `internal error: ${err.message}`);
}

function sendError(reply: FastifyReply, err: RaasError, config: ServerConfig): FastifyReply {
  if (err.status === 503) reply.header('retry-after', String(config.retry_after_s));
  return reply.code(err.status).send(err.toJSON());
}

/**
 * The rollout server's fastify app: thin routes that parse, call one pipeline or pool function,
 * and answer. Every error answers `{error: {code, message}, detail}`.
 */
export function buildApp(deps: AppDeps): FastifyInstance {
  const { config, pipeline, metrics, tokenizerGuard } = deps;
  const tenants = pipeline.tenants;
  const app = Fastify({
    logger:
      config.log_level === 'silent'
        ? false
        : {
            level: config.log_level,
            serializers: {
              req: (req: { method: string; url: string; ip?: string }) => ({
                method: req.method,
                url: logUrl(req.url),
                remoteAddress: req.ip,
              }),
            },
          },
    bodyLimit: config.body_limit_bytes,
    // Held /process answers can last as long as a job: never time the socket out under them.
    requestTimeout: 0,
    keepAliveTimeout: 65_000,
    forceCloseConnections: true,
    return503OnClosing: false,
    // job_id may be 256 characters (fastify's default limit is 100).
    routerOptions: { maxParamLength: 512 },
    // Malformed percent-encoding and over-long path parameters answer in the API's error shape too.
    frameworkErrors: (err, _req, reply) => {
      const why =
        err.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? 'a path parameter is too long: job_id is at most 256 characters'
          : 'the URL is malformed (bad percent-encoding)';
      void sendError(reply, new RaasError('bad_request', why), config);
    },
  });

  // JSON only: anything else is 415, not a string body the schemas would reject with a vague message.
  app.removeAllContentTypeParsers();
  // An empty JSON body (e.g. POST /start with a Content-Type but no body) counts as {}.
  const json = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    if (body === '' || (typeof body === 'string' && body.trim() === '')) return done(null, undefined);
    return json(req, body as string, done);
  });

  // Every request but GET /health names its principal: the admin, a tenant, or (one tenant) both.
  // A browser's console session cookie stands for the token it signed in with (console/session.ts).
  const authenticate = makeAuthenticator(tenants, config.token);
  const open = authenticate(undefined) !== undefined;
  const sessions = !open && deps.console && config.console.enabled ? new UiSessions(deps.console.clock) : undefined;
  const principals = new WeakMap<FastifyRequest, Principal>();
  // Without a token, loopback is the only protection: a page of another site rebound to 127.0.0.1 by
  // its DNS is same-origin with the server in the browser, and names its own Host.
  const loopbackOnly = open && isLoopbackHost(config.host);
  app.addHook('onRequest', async (req, reply) => {
    if (loopbackOnly && !hostHeaderIsLoopback(req.headers.host))
      return sendError(
        reply,
        new RaasError(
          'forbidden',
          `Host ${JSON.stringify(req.headers.host)} is not a loopback name: a server without a token answers only requests addressed to localhost, 127.0.0.1 or [::1] (a page of another site can reach it through DNS rebinding); use one of those, or start it with --token`,
        ),
        config,
      );
    if (req.method === 'GET' && req.url === '/health') return;
    // The console's sign-in form is what an unauthenticated browser is sent to.
    if (sessions && req.url.split('?')[0] === '/ui/login') return;
    const cred = credentialOf(req, sessions);
    const p = authenticate(cred.authorization);
    if (p) {
      if (cred.via === 'cookie' && req.method !== 'GET' && req.method !== 'HEAD' && !sameOrigin(req))
        return sendError(
          reply,
          new RaasError(
            'unauthorized',
            'a console session cookie authenticates only requests from the console itself: send "Authorization: Bearer <token>"',
          ),
          config,
        );
      return void principals.set(req, p);
    }
    // A browser opening the console without a session is sent to the sign-in form.
    if (sessions && req.method === 'GET' && /^\/ui\/?(\?|$)/.test(req.url)) return reply.redirect('/ui/login', 303);
    reply.header('www-authenticate', 'Bearer');
    return sendError(reply, new RaasError('unauthorized', 'missing or wrong bearer token: send "Authorization: Bearer <token>"'), config);
  });
  const access = (req: FastifyRequest): Access =>
    new Access(tenants, principals.get(req) ?? { tenant: tenants.sole, admin: !tenants.multi });

  app.setErrorHandler((err: FastifyError, req, reply) => {
    const e = toRaasError(err, config.body_limit_bytes);
    if (e.code === 'internal') req.log.error({ err }, 'unhandled error');
    return sendError(reply, e, config);
  });
  app.setNotFoundHandler((req: FastifyRequest, reply) => {
    const path = req.url.split('?')[0];
    const method = ROUTES[path] ?? (/^\/jobs\/[^/]+$/.test(path) ? 'GET' : undefined);
    if (method && method !== req.method && !(method === 'GET' && req.method === 'HEAD'))
      return sendError(reply, new RaasError('method_not_allowed', `${req.method} ${path} is not served: use ${method}`), config);
    return sendError(reply, new RaasError('route_not_found', `no route ${req.method} ${path}: see docs/api.md`), config);
  });

  // Results are serialized once, when the job ends; they go out as they are.
  app.post('/process', async (req, reply) => {
    // Keys the server does not read: refused in strict mode, else named in a Warning header.
    checkUnknownKeys(req, reply, config);
    const sub = await pipeline.submit(req.body, access(req).tenant('POST /process'));
    return reply.type('application/json; charset=utf-8').send(await sub.finished);
  });

  // The routes ProRL guards answer 503 while intake is closed (a draining server still answers
  // them); /process checks inside submit, after validation.
  const guard = (): void => {
    if (pipeline.state === 'stopped' || pipeline.state === 'stopping') throw stoppedError();
  };

  // Another tenant's job id is answered exactly as an unknown one (never 403: no probing).
  app.post('/cancel', async (req) => {
    const { job_id, tenant } = parseOrThrow(CancelRequest, req.body ?? {});
    guard();
    return pipeline.cancel(job_id, access(req).scope(tenant));
  });

  app.get('/jobs/:id', async (req, reply) => {
    const id = parseOrThrow(JobId, (req.params as { id: string }).id, 'bad_request', 'job_id');
    const named = (req.query as { tenant?: unknown }).tenant;
    const scope = access(req).scope(typeof named === 'string' ? named : undefined);
    return reply.type('application/json; charset=utf-8').send(await pipeline.get(id, scope));
  });

  // A non-URL is refused (invalid_address); a backend is registered, then asked once what it serves.
  app.post('/add_llm_server', async (req) => {
    const body = parseOrThrow(AddLlmServerRequest, req.body ?? {});
    const why = addressProblem(body.address);
    if (why) throw new RaasError('invalid_address', `address: ${why}`);
    const owner = access(req).pool('POST /add_llm_server', body.tenant);
    const pool = owner.pool;
    // Compared by the server an address reaches (localhost, 127.1, 0.0.0.0 … are one), not by its spelling.
    const id = backendIdentity(body.address);
    // An operator's allow-lists: a tenant registers only its own addresses, and an address on
    // another tenant's list cannot be taken first by anyone else.
    if (owner.allowedBackends && !identityAllowed(owner.allowedBackends, id))
      throw new RaasError(
        'forbidden',
        `address: ${normalizeAddress(body.address)} is not in this tenant's allowed_backends; ask the server's operator to add it`,
      );
    const reserved = tenants.list.find((t) => t !== owner && t.allowedBackends && identityAllowed(t.allowedBackends, id));
    if (reserved && !owner.allowedBackends)
      throw new RaasError(
        'backend_owned',
        `address: ${normalizeAddress(body.address)} is reserved for another tenant (its allowed_backends); each backend belongs to one tenant: run a server of your own`,
      );
    const taken = tenants.list.find((t) => t !== owner && t.pool.list().some((b) => backendIdentity(b.address) === id));
    if (taken)
      throw new RaasError(
        'backend_owned',
        `address: ${normalizeAddress(body.address)} is another tenant's backend; each backend belongs to one tenant: run a server of your own`,
      );
    const api = body.api ?? 'vllm';
    // A backend whose /tokenize ids differ from ours is refused before it is registered.
    const tokenizer = body.probe === false ? undefined : await tokenizerGuard?.check(body.address, api);
    const b = pool.add(body.address, api, body.weight_version);
    const probe = body.probe === false ? undefined : await probeBackend(b.address, api, Math.min(2_000, config.llm.probe_timeout_s * 1000));
    return {
      status: 'ok',
      backends: backendsOf(owner),
      ...(probe ? { probe: { address: b.address, api, ...probe } } : {}),
      ...(tokenizer ? { tokenizer } : {}),
    };
  });
  app.post('/remove_llm_server', async (req) => {
    const body = parseOrThrow(RemoveLlmServerRequest, req.body ?? {});
    const owner = access(req).pool('POST /remove_llm_server', body.tenant);
    const removed = owner.pool.remove(body.address);
    return { status: removed ? 'ok' : 'not_found', backends: backendsOf(owner) };
  });
  app.post('/clear_llm_server', async (req) => {
    const body = parseOrThrow(ClearLlmServerRequest, req.body ?? {});
    const owner = access(req).pool('POST /clear_llm_server', body.tenant);
    owner.pool.clear();
    return { status: 'ok', backends: backendsOf(owner) };
  });

  app.post('/start', async (req) => {
    access(req).admin('POST /start');
    pipeline.start();
    return { status: pipeline.state };
  });
  app.post('/stop', async (req) => {
    access(req).admin('POST /stop');
    guard();
    await pipeline.stop();
    return { status: pipeline.state };
  });
  // Finish what runs, take nothing new, then leave: answered at once; GET /status shows the progress.
  app.post('/drain', async (req) => {
    access(req).admin('POST /drain');
    if (!deps.drain) throw new RaasError('bad_request', 'this server cannot drain (embedded without a drain handler)');
    deps.drain();
    return { status: pipeline.state, jobs: pipeline.liveTotal };
  });

  // Stage pool sizes at run time: a number fixes a stage, `auto` or {min, max} lets it size itself.
  app.post('/workers', async (req) => {
    access(req).admin('POST /workers');
    const body = parseOrThrow(WorkersUpdate, req.body ?? {});
    for (const s of STAGES) if (body[s] !== undefined) pipeline.autosizer.set(s, body[s]);
    return { status: 'ok', workers: pipeline.status().workers };
  });

  // Co-located trainers: no model call while paused; answered once none is in flight. A tenant
  // pauses its own backends' calls; the admin pauses every tenant's.
  const gatesOf = (req: FastifyRequest): Tenant[] => {
    const scope = access(req).scope();
    return scope ? [scope] : [...tenants.list];
  };
  app.post('/pause', async (req) => {
    const body = parseOrThrow(PauseRequest, req.body ?? {});
    const answers = await Promise.all(gatesOf(req).map((t) => gateOf(t.pool).pause(body.mode, body.abort_grace_s * 1000)));
    return answers.length === 1 ? answers[0] : sumPauses(answers);
  });
  app.post('/resume', async (req) => {
    const answers = gatesOf(req).map((t) => gateOf(t.pool).resume());
    return { status: 'running', released: answers.reduce((n, a) => n + a.released, 0) };
  });

  // A hint of the instances to come: their images unpack while the current jobs run.
  app.post('/prefetch', async (req) => {
    guard();
    return pipeline.prefetch(req.body);
  });

  app.get('/status', async (req) => {
    guard();
    const scope = access(req).scope();
    const shown = scope ? [scope] : tenants.list;
    const gates = shown.map((t) => gateOf(t.pool).status());
    return {
      ...pipeline.status(scope),
      backends: shown.flatMap((t) => backendsOf(t)),
      generation:
        gates.length === 1
          ? gates[0]
          : { paused: gates.some((g) => g.paused), in_flight: sum(gates, 'in_flight'), held: sum(gates, 'held') },
    };
  });
  app.get('/health', async () => ({ status: 'ok' }));
  if (deps.console) {
    const c: ConsoleDeps = {
      ...deps.console,
      config,
      pipeline,
      tenants,
      access,
      sessions,
      check: (authorization) => authenticate(authorization) !== undefined,
    };
    registerEvents(app, c);
    if (config.console.enabled) app.register(async (scope) => registerConsole(scope, c));
  }
  app.get('/metrics', async (req, reply) => {
    access(req).admin('GET /metrics');
    reply.header('content-type', metrics.contentType);
    return metrics.text();
  });
  for (const plugin of deps.plugins ?? []) plugin(app, access);
  return app;

  /** A tenant's backends as the routes answer them (named by tenant on a multi-tenant server). */
  function backendsOf(t: Tenant): BackendInfo[] {
    return tenants.multi ? t.pool.list().map((b) => ({ ...b, tenant: t.name })) : t.pool.list();
  }
}

function sum<K extends string>(xs: Array<Partial<Record<K, number>>>, k: K): number {
  return xs.reduce((n, x) => n + (x[k] ?? 0), 0);
}

/** The admin's pause of every tenant's backends, as one answer. */
function sumPauses(answers: PauseResponse[]): PauseResponse {
  return {
    status: 'paused',
    mode: answers[0]!.mode,
    in_flight: sum(answers, 'in_flight'),
    aborted: sum(answers, 'aborted'),
    disconnected: sum(answers, 'disconnected'),
    held: sum(answers, 'held'),
  };
}
