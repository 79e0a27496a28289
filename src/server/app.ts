import Fastify, { type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { TokenizerGuard } from '../tokens/backend-check.js';
import { RaasError } from '../protocol/errors.js';
import { AddLlmServerRequest, RemoveLlmServerRequest, addressProblem } from '../protocol/llm.js';
import { PauseRequest } from '../protocol/pause.js';
import { CancelRequest, JobId } from '../protocol/process.js';
import { parseOrThrow } from '../protocol/validation.js';
import type { ServerConfig } from '../protocol/config-server.js';
import { makeTokenCheck } from './auth.js';
import { registerConsole, registerEvents, type ConsoleDeps } from './console/routes.js';
import { UiSessions, credentialOf, sameOrigin } from './console/session.js';
import { gateOf } from './llm/pool.js';
import type { BackendPool } from './llm/pool.js';
import { probeBackend } from './llm/probe.js';
import type { ServerMetrics } from './metrics.js';
import { stoppedError, type Pipeline } from './pipeline/pipeline.js';

export interface AppDeps {
  config: ServerConfig;
  pipeline: Pipeline;
  pool: BackendPool;
  metrics: ServerMetrics;
  /** Checks a backend's tokenizer against the server's before it is registered (src/tokens/backend-check.ts). */
  tokenizerGuard?: TokenizerGuard;
  /** The event feed and what the console reads (GET /events always; /ui when console.enabled). */
  console?: Omit<ConsoleDeps, 'config' | 'pipeline' | 'pool' | 'sessions' | 'check'>;
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
  '/status': 'GET',
  '/health': 'GET',
  '/metrics': 'GET',
  '/events': 'GET',
};

/** The request's URL as the log shows it: a console sign-in link's token is not written down. */
function logUrl(url: string): string {
  return url.replace(/([?&]token=)[^&]*/g, '$1[redacted]');
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
  const { config, pipeline, pool, metrics, tokenizerGuard } = deps;
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

  const check = config.token ? makeTokenCheck(config.token) : undefined;
  const sessions = check && deps.console && config.console.enabled ? new UiSessions(deps.console.clock) : undefined;
  if (check) {
    app.addHook('onRequest', async (req, reply) => {
      if (req.method === 'GET' && req.url === '/health') return;
      // The console's sign-in form is what an unauthenticated browser is sent to.
      if (sessions && req.url.split('?')[0] === '/ui/login') return;
      const cred = credentialOf(req, sessions);
      if (check(cred.authorization)) {
        if (cred.via === 'cookie' && req.method !== 'GET' && req.method !== 'HEAD' && !sameOrigin(req))
          return sendError(
            reply,
            new RaasError(
              'unauthorized',
              'a console session cookie authenticates only requests from the console itself: send "Authorization: Bearer <token>"',
            ),
            config,
          );
        return;
      }
      // A browser opening the console without a session is sent to the sign-in form.
      if (sessions && req.method === 'GET' && /^\/ui\/?(\?|$)/.test(req.url)) return reply.redirect('/ui/login', 303);
      reply.header('www-authenticate', 'Bearer');
      return sendError(reply, new RaasError('unauthorized', 'missing or wrong bearer token: send "Authorization: Bearer <token>"'), config);
    });
  }

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
    const sub = await pipeline.submit(req.body);
    return reply.type('application/json; charset=utf-8').send(await sub.finished);
  });

  // The routes ProRL guards answer 503 while intake is closed; /process checks inside submit, after validation.
  const guard = (): void => {
    if (pipeline.state !== 'running') throw stoppedError();
  };

  app.post('/cancel', async (req) => {
    const { job_id } = parseOrThrow(CancelRequest, req.body ?? {});
    guard();
    return pipeline.cancel(job_id);
  });

  app.get('/jobs/:id', async (req, reply) =>
    reply
      .type('application/json; charset=utf-8')
      .send(await pipeline.get(parseOrThrow(JobId, (req.params as { id: string }).id, 'bad_request', 'job_id'))),
  );

  // A non-URL is refused (invalid_address); a backend is registered, then asked once what it serves.
  app.post('/add_llm_server', async (req) => {
    const body = parseOrThrow(AddLlmServerRequest, req.body ?? {});
    const why = addressProblem(body.address);
    if (why) throw new RaasError('invalid_address', `address: ${why}`);
    const api = body.api ?? 'vllm';
    // A backend whose /tokenize ids differ from ours is refused before it is registered.
    const tokenizer = body.probe === false ? undefined : await tokenizerGuard?.check(body.address, api);
    const b = pool.add(body.address, api, body.weight_version);
    const probe = body.probe === false ? undefined : await probeBackend(b.address, api, Math.min(2_000, config.llm.probe_timeout_s * 1000));
    return {
      status: 'ok',
      backends: pool.list(),
      ...(probe ? { probe: { address: b.address, api, ...probe } } : {}),
      ...(tokenizer ? { tokenizer } : {}),
    };
  });
  app.post('/remove_llm_server', async (req) => {
    const body = parseOrThrow(RemoveLlmServerRequest, req.body ?? {});
    const removed = pool.remove(body.address);
    return { status: removed ? 'ok' : 'not_found', backends: pool.list() };
  });
  app.post('/clear_llm_server', async () => {
    pool.clear();
    return { status: 'ok', backends: pool.list() };
  });

  app.post('/start', async () => {
    pipeline.start();
    return { status: pipeline.state };
  });
  app.post('/stop', async () => {
    guard();
    await pipeline.stop();
    return { status: pipeline.state };
  });

  // Co-located trainers: no model call while paused; answered once none is in flight.
  app.post('/pause', async (req) => {
    const body = parseOrThrow(PauseRequest, req.body ?? {});
    return gateOf(pool).pause(body.mode, body.abort_grace_s * 1000);
  });
  app.post('/resume', async () => gateOf(pool).resume());

  app.get('/status', async () => {
    guard();
    return { ...pipeline.status(), backends: pool.list(), generation: gateOf(pool).status() };
  });
  app.get('/health', async () => ({ status: 'ok' }));
  if (deps.console) {
    const c = { ...deps.console, config, pipeline, pool, sessions, check };
    registerEvents(app, c);
    if (config.console.enabled) app.register(async (scope) => registerConsole(scope, c));
  }
  app.get('/metrics', async (_req, reply) => {
    reply.header('content-type', metrics.contentType);
    return metrics.text();
  });
  return app;
}
