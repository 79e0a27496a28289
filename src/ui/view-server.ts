import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { RaasError } from '../protocol/errors.js';
import { hostHeaderIsLoopback, isLoopbackHost } from '../util/loopback.js';
import { systemClock, type Clock } from '../util/clock.js';
import type { Tokenizer } from '../tokens/tokenizer.js';
import { RAAS_VERSION } from '../version.js';
import { registerWeb } from './assets.js';
import { EventLog } from './event-log.js';
import type { UiInfo } from './model.js';
import { RunDir } from './run-dir.js';
import { RunFollower, type RunChange } from './run-follow.js';
import { streamEvents } from './sse.js';
import { trajectoryView, type TrajectorySource } from './trajectory.js';

/** Options of `raas view`. */
export interface RunViewerOptions {
  dir: string;
  host?: string;
  port?: number;
  /** The tokenizer that decodes the run's ids (loaded on the first trajectory). */
  tokenizer: () => Tokenizer | undefined;
  clock?: Clock;
  wallNow?: () => number;
  /** How often the run's files are looked at (default 1000 ms). */
  followMs?: number;
}

/** A listening run viewer. */
export interface RunViewer {
  url: string;
  app: FastifyInstance;
  close(): Promise<void>;
}

/**
 * `raas view <run dir>`: serves the run view (the same pages as the server console) over a run
 * directory, read-only, on loopback by default; `GET /events` tells the pages when the run's files
 * change, so a run still being written is followed.
 */
export async function startRunViewer(o: RunViewerOptions): Promise<RunViewer> {
  const run = new RunDir(o.dir);
  await run.check();
  const clock = o.clock ?? systemClock;
  const wallNow = o.wallNow ?? Date.now;
  const log = new EventLog<RunChange>(256);
  const follower = new RunFollower(run.dir, { clock, wallNow, everyMs: o.followMs, onChange: (c) => log.emit('run', c) });
  await follower.start();

  // A job id may be 256 characters, so up to 768 percent-encoded (fastify's default limit is 100).
  const app = Fastify({ logger: false, forceCloseConnections: true, routerOptions: { maxParamLength: 1024 } });
  app.setErrorHandler((err: FastifyError, _req, reply) => {
    const e =
      err instanceof RaasError
        ? err
        : err.statusCode === 403 || err.statusCode === 404
          ? new RaasError('route_not_found', `no such file among the pages (${err.message}): the run view is at /ui`)
          : err instanceof SyntaxError
            ? new RaasError('internal', `a file of the run is not valid JSON: ${err.message}`)
            : new RaasError('internal', err.message);
    return reply.code(e.status).send(e.toJSON());
  });
  app.setNotFoundHandler((req, reply) => {
    const e = new RaasError('route_not_found', `no route ${req.method} ${req.url.split('?')[0]}: the run view is at /ui`);
    return reply.code(404).send(e.toJSON());
  });
  // The view has no authentication: on loopback it answers only requests addressed to a loopback
  // name, so a page of another site that its DNS rebinds to 127.0.0.1 reads nothing.
  if (isLoopbackHost(o.host ?? '127.0.0.1'))
    app.addHook('onRequest', async (req, reply) => {
      if (hostHeaderIsLoopback(req.headers.host)) return;
      const e = new RaasError(
        'forbidden',
        `Host ${JSON.stringify(req.headers.host)} is not a loopback name: raas view answers only requests addressed to localhost, 127.0.0.1 or [::1] (a page of another site can reach it through DNS rebinding)`,
      );
      return reply.code(e.status).send(e.toJSON());
    });
  await registerWeb(app);
  app.get('/', (_req, reply) => reply.redirect('/ui', 302));
  app.get('/health', async () => ({ status: 'ok' }));
  app.get('/ui/api/info', async (): Promise<UiInfo> => ({ mode: 'run', version: RAAS_VERSION, title: run.dir }));
  app.get('/ui/api/run', async () => run.view(follower.updatedAt, wallNow()));
  app.get('/ui/api/run/steps/:k', async (req) => run.stepView(Number((req.params as { k: string }).k)));
  app.get('/ui/api/run/rollouts/:k/:job', async (req, reply) => {
    const p = req.params as { k: string; job: string };
    const step = Number(p.k);
    const { rollout, group, batch } = await run.rollout(step, p.job);
    const view = trajectoryView(rollout as unknown as TrajectorySource, o.tokenizer(), {
      step,
      data_source: group.data_source,
      instance_id: group.instance_id,
      ...(group.group_id ? { group_id: group.group_id } : {}),
      ...(batch ? { batch_policy_version: batch.policy_version } : {}),
    });
    return reply.type('application/json; charset=utf-8').send(JSON.stringify(view));
  });
  app.get('/events', (req, reply) => streamEvents(req, reply, { log }));

  try {
    await app.listen({ host: o.host ?? '127.0.0.1', port: o.port ?? 0 });
  } catch (err) {
    follower.close();
    throw new RaasError('config_invalid', `cannot listen on ${o.host ?? '127.0.0.1'}:${o.port ?? 0}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : (o.port ?? 0);
  const host = (o.host ?? '127.0.0.1').includes(':') ? `[${o.host}]` : (o.host ?? '127.0.0.1');
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    app,
    close() {
      closing ??= (async () => {
        follower.close();
        await app.close();
      })();
      return closing;
    },
  };
}
